// Package runner does locally what Lambda's event source mappings do in AWS:
// it polls SQS queues and DynamoDB streams, fires schedules, serves HTTP API
// routes and delivers S3 notifications, and invokes the functions' handlers
// in-process through aws-lambda-go's own JSON path
// (lambda.NewHandler(h).Invoke), each with its template environment and a
// context deadline from its Timeout.
package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// ErrUnknownFunction is returned for a function the runner does not host.
var ErrUnknownFunction = errors.New("runner: unknown function")

// Function is one hosted function.
type Function struct {
	LogicalID string
	Name      string
	ARN       string
	Timeout   time.Duration
	Handler   lambda.Handler
}

// Faults are switches for tests and benchmarks; rates are in [0, 1].
type Faults struct {
	// DuplicateRate: share of successful SQS and stream batches delivered to
	// the handler a second time, as at-least-once delivery may.
	DuplicateRate float64
	// CrashRate: share of SQS and stream invocations where the handler sees
	// only the first part of the batch (a random cut) and the invocation then
	// fails as if the function crashed mid-batch: the work done on the first
	// part stays, and the whole batch is retried.
	CrashRate float64
	// CrashNext makes the next CrashNext invocations crash mid-batch,
	// whatever CrashRate says (deterministic tests).
	CrashNext int
	// Only limits the faults to one function (logical id); empty for all.
	Only string
}

// Runner hosts functions and drives their event sources.
type Runner struct {
	log    *slog.Logger
	region string
	clock  Clock
	// scheduleClock is what schedules fire by (WithScheduleClock).
	scheduleClock Clock

	mu        sync.Mutex
	functions map[string]*Function // by logical id, name and ARN
	stats     map[string]*Stats    // by logical id
	faults    Faults
	rng       *mrand.Rand
	sources   map[string]*source // by mapping id
	s3        s3Notifier
	wiring    Wiring
	esms      map[string]ESM // mappings created through the Lambda API
	running   context.Context
	// stopped is closed when the runner's last Start is stopped: held
	// invocations then give up (waitHeld).
	stopped chan struct{}
	wg      sync.WaitGroup
	held    map[string]chan struct{} // by logical id: closed on release
	// bells wake the idle readers of a table's stream (Wake), by table.
	bells    map[string]*bell
	idlePoll time.Duration // WithIdlePollInterval
}

// Clock is the runner's time source; tests replace it to fire schedules.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time                                   { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, d) }

// Option configures a Runner.
type Option func(*Runner)

// WithLogger sets the runner's logger.
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = l } }

// WithRegion sets the region put into events (default us-east-1).
func WithRegion(region string) Option { return func(r *Runner) { r.region = region } }

// WithClock replaces the time source.
func WithClock(c Clock) Option { return func(r *Runner) { r.clock = c } }

// WithScheduleClock sets the clock the schedules fire by (default the
// runner's). A rehearsal moves it with the functions' clocks (MovedClock);
// the event sources keep the runner's, as a stream record's age is real.
func WithScheduleClock(c Clock) Option { return func(r *Runner) { r.scheduleClock = c } }

// MovedClock is a clock that may be moved while the runner runs: At reads
// it (for example lambdafn's clock file). Its Sleep looks at it every
// second, so a clock moved forward fires what has come due at once.
type MovedClock struct{ At func() time.Time }

// Now is the moved time.
func (c MovedClock) Now() time.Time { return c.At() }

// Sleep waits until the moved time is d later than now.
func (c MovedClock) Sleep(ctx context.Context, d time.Duration) error {
	until := c.At().Add(d)
	for {
		left := until.Sub(c.At())
		if left <= 0 {
			return ctx.Err()
		}
		if err := retry.Sleep(ctx, min(left, time.Second)); err != nil {
			return err
		}
	}
}

// WithSeed makes fault injection repeatable.
func WithSeed(seed uint64) Option {
	return func(r *Runner) { r.rng = mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// New returns an empty runner.
func New(opts ...Option) *Runner {
	r := &Runner{
		log: slog.New(slog.DiscardHandler), region: "us-east-1", clock: realClock{},
		functions: map[string]*Function{}, stats: map[string]*Stats{}, sources: map[string]*source{}, esms: map[string]ESM{},
		rng: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())), idlePoll: defaultIdlePoll,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// AddFunction hosts a function. Timeout 0 means 3 s, Lambda's default.
func (r *Runner) AddFunction(f Function) error {
	if f.LogicalID == "" || f.Handler == nil {
		return fmt.Errorf("runner: function needs a logical id and a handler")
	}
	if f.Timeout <= 0 {
		f.Timeout = 3 * time.Second
	}
	if f.Name == "" {
		f.Name = f.LogicalID
	}
	if f.ARN == "" {
		f.ARN = fmt.Sprintf("arn:aws:lambda:%s:000000000000:function:%s", r.region, f.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fn := &f
	r.functions[f.LogicalID] = fn
	r.functions[f.Name] = fn
	r.functions[f.ARN] = fn
	r.stats[f.LogicalID] = &Stats{Function: f.LogicalID}
	return nil
}

// Function looks a function up by logical id, name or ARN.
func (r *Runner) Function(ref string) (*Function, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.functions[ref]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownFunction, ref)
	}
	return f, nil
}

// SetFaults changes the fault switches at any time.
func (r *Runner) SetFaults(f Faults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = f
}

// chance draws a fault decision for function fn.
func (r *Runner) chance(fn string, pick func(Faults) float64) (bool, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.faults.Only != "" && r.faults.Only != fn {
		return false, 0
	}
	p := pick(r.faults)
	return p > 0 && r.rng.Float64() < p, r.rng.Float64()
}

// crash decides whether the next invocation of fn crashes mid-batch, and
// where in the batch (a share in [0, 1)).
func (r *Runner) crash(fn string) (bool, float64) {
	r.mu.Lock()
	if r.faults.CrashNext > 0 && (r.faults.Only == "" || r.faults.Only == fn) {
		r.faults.CrashNext--
		cut := r.rng.Float64()
		r.mu.Unlock()
		return true, cut
	}
	r.mu.Unlock()
	return r.chance(fn, func(f Faults) float64 { return f.CrashRate })
}

// Invoke runs a function's handler once with a raw JSON payload, the way
// Lambda does: a fresh request id, a deadline from the function's Timeout.
// A panic in the handler is returned as an error.
func (r *Runner) Invoke(ctx context.Context, ref string, payload []byte) ([]byte, error) {
	f, err := r.Function(ref)
	if err != nil {
		return nil, err
	}
	if err := r.waitHeld(ctx, f.LogicalID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	reqID := newID()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: reqID, InvokedFunctionArn: f.ARN})
	r.count(f.LogicalID, func(s *Stats) { s.InFlight++ })
	start := time.Now()
	out, err := safeInvoke(ctx, f.Handler, payload)
	took := time.Since(start)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("runner: %s: task timed out after %s", f.LogicalID, f.Timeout)
	}
	r.record(f.LogicalID, took, err)
	if err != nil {
		r.log.Warn("invocation failed", "function", f.LogicalID, "requestId", reqID, "err", err, "took", took)
	}
	return out, err
}

// Hold stops new invocations of a function until release is called, as
// a reserved concurrency of 0 would on AWS: its event sources wait with
// their records, and invocations in flight finish. Holding a held function
// again is an error.
func (r *Runner) Hold(ref string) (release func(), err error) {
	f, err := r.Function(ref)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]chan struct{}{}
	}
	if _, ok := r.held[f.LogicalID]; ok {
		return nil, fmt.Errorf("runner: %s is already held", f.LogicalID)
	}
	gate := make(chan struct{})
	r.held[f.LogicalID] = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.held, f.LogicalID)
			r.mu.Unlock()
			close(gate)
		})
	}, nil
}

// waitHeld waits while the function is held (Hold).
func (r *Runner) waitHeld(ctx context.Context, id string) error {
	r.mu.Lock()
	gate, ok := r.held[id]
	stopped := r.stopped
	r.mu.Unlock()
	if !ok {
		return nil
	}
	// An invocation's context outlives the runner's stop (a batch in
	// flight ends), so the stop is watched too: a held function never
	// keeps the runner from stopping.
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stopped:
		return fmt.Errorf("runner: %s held when the runner stopped", id)
	}
}

func safeInvoke(ctx context.Context, h lambda.Handler, payload []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("runner: handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h.Invoke(ctx, payload)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Stats counts what happened to one function.
type Stats struct {
	Function    string
	Invocations int // finished
	InFlight    int // running now
	Errors      int
	Records     int // SQS messages, stream records, S3 records delivered
	Duplicates  int // batches delivered twice by fault injection
	Crashes     int // invocations failed mid-batch by fault injection
	Discarded   int // stream records sent to the on-failure destination
	Filtered    int // stream records the mapping's FilterCriteria dropped
	IdleShards  int // stream shards in an idle wait now (IdlePollInterval)
	Total       time.Duration
}

func (r *Runner) record(fn string, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats[fn]
	s.InFlight--
	s.Invocations++
	s.Total += took
	if err != nil {
		s.Errors++
	}
}

func (r *Runner) count(fn string, f func(*Stats)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.stats[fn])
}

// Stats returns a copy of every function's counters, sorted by function.
func (r *Runner) Stats() []Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Stats, 0, len(r.stats))
	for _, s := range r.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Function < out[j].Function })
	return out
}

// source is one running event source (an SQS or stream mapping, a schedule).
type source struct {
	id     string
	kind   string
	desc   string
	cancel context.CancelFunc
	done   chan struct{}
	start  func(ctx context.Context)
}

// add registers a source and starts it when the runner is running.
func (r *Runner) add(s *source) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources[s.id] = s
	if r.running != nil {
		r.launch(s)
	}
}

func (r *Runner) launch(s *source) {
	ctx, cancel := context.WithCancel(r.running)
	s.cancel = cancel
	s.done = make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(s.done)
		s.start(ctx)
		if ctx.Err() == nil { // it ended by itself: its stream is gone
			r.mu.Lock()
			delete(r.sources, s.id)
			if e, ok := r.esms[s.id]; ok {
				e.State = "Disabled"
				r.esms[s.id] = e
			}
			r.mu.Unlock()
		}
	}()
}

// Remove stops and forgets an event source.
func (r *Runner) Remove(id string) error {
	r.mu.Lock()
	s, ok := r.sources[id]
	delete(r.sources, id)
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("runner: no event source mapping %q", id)
	}
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	return nil
}

// Start launches every event source in the background and returns a stop
// function that ends them and waits for in-flight invocations to finish.
func (r *Runner) Start(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	if r.running != nil {
		r.mu.Unlock()
		cancel()
		return nil, errors.New("runner: already running")
	}
	r.running = ctx
	stopped := make(chan struct{})
	r.stopped = stopped
	for _, s := range r.sources {
		r.launch(s)
	}
	r.mu.Unlock()
	return func() {
		cancel()
		close(stopped)
		r.wg.Wait()
		r.mu.Lock()
		r.running = nil
		r.mu.Unlock()
	}, nil
}

// Run starts every event source and blocks until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	stop, err := r.Start(ctx)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}
