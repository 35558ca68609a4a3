package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// Config sizes and shapes one soak.
type Config struct {
	Root     string        // repository root
	Duration time.Duration // the load's length
	// VotesPerSecond fixes the producers' rate; 0 sizes it from the
	// store's ceiling, measured before the load: SteadyShare of it, and
	// Bursts bursts of BurstShare of it for BurstFor each (sizing.go).
	VotesPerSecond          int
	SteadyShare, BurstShare float64
	Bursts                  int
	BurstFor                time.Duration
	// ObjectWorkers run the document workload (each one request at a
	// time).
	ObjectWorkers int
	// SharedWorkers write a few bodies under many keys and delete keys
	// (shared blobs freed and taken again).
	SharedWorkers int
	// ObjectsPerSecond paces the document workload: the object and shared
	// workers together send at most this many requests a second (each
	// worker its share), so its writes grow the objects table's stream at
	// a known rate (see DefaultObjectRate).
	ObjectsPerSecond float64
	// Servers, when set, are running servers the soak provisions on
	// instead of starting its own, under StackName; only without Faults
	// (the faults restart a server).
	Servers   *servers.Stack
	StackName string
	// Setups replace functions' own (registry.All) and run them in this
	// process instead of their binaries: a test gives the tally one that
	// ignores its checkpoint, to show the vote invariant breaking.
	Setups map[string]lambdafn.Setup
	// Faults turns on the proxies' fault mix, kills and the server
	// restart; off, the soak is a plain load run (with redeliveries).
	Faults bool
	// DuplicateRate is the share of successful SQS and stream batches the
	// runner delivers twice (Lambda's at-least-once delivery), from the
	// load's start to the end of the checks, with Faults on or off.
	DuplicateRate float64
	// KillEvery is the time between two SIGKILLs of a function's process.
	KillEvery time.Duration
	// PhaseEvery is how long each fault mix lasts.
	PhaseEvery time.Duration
	// LeakBurst is the burst of load after the checks whose idle state is
	// compared with the soak's (default 15 s).
	LeakBurst time.Duration
	// NoLeakCheck leaves out the leak check and its two bursts (minutes
	// of waiting for idle): for a test that proves another invariant.
	NoLeakCheck bool
	Seed        uint64
	// StreamShards presents every stream as this many shards, split after
	// StreamSplitAfter records (stack.Options); Conflicts cancels
	// overlapping transactions as DynamoDB does. make soak runs with both.
	StreamShards, StreamSplitAfter int
	Conflicts                      bool
	Progress                       io.Writer // human progress lines
	FnLog                          io.Writer // the functions' and runner's JSON logs
	// Binaries are functions already built (buildFunctions), by logical
	// id; the functions run as processes that it lacks are built.
	Binaries map[string]string
}

// DefaultObjectRate is the document requests per second of all workers
// together. Unpaced, the workers took whatever DynamoDB Local could serve
// (24 to 40 requests/s), each write adding stream records that slow every
// later write: 10 minutes of that with the shared workers' writes
// saturated DynamoDB Local's single SQLite thread half-way through, and
// the counter's puts timed out from then on. 12/s leaves the votes their
// share.
const DefaultObjectRate = 12

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 10 * time.Minute
	}
	if c.SteadyShare <= 0 {
		c.SteadyShare = DefaultSteadyShare
	}
	if c.BurstShare <= 0 {
		c.BurstShare = DefaultBurstShare
	}
	if c.BurstFor <= 0 {
		c.BurstFor = DefaultBurstFor
	}
	if c.SharedWorkers <= 0 {
		c.SharedWorkers = 2
	}
	if c.ObjectWorkers <= 0 {
		c.ObjectWorkers = 2
	}
	if c.ObjectsPerSecond <= 0 {
		c.ObjectsPerSecond = DefaultObjectRate
	}
	if c.KillEvery <= 0 {
		c.KillEvery = max(5*time.Second, c.Duration/30)
	}
	if c.PhaseEvery <= 0 {
		c.PhaseEvery = max(5*time.Second, c.Duration/20)
	}
	if c.LeakBurst <= 0 {
		c.LeakBurst = 15 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.FnLog == nil {
		c.FnLog = io.Discard
	}
}

// killable are the functions run in processes of their own: the ones the
// soak kills mid-invocation, one event source of each kind (SQS, streams,
// HTTP) and the reaper, whose deletes race the objects' writes.
var killable = []string{"CounterFunction", "TallyFunction", "ArchiverFunction", "ObjectsApiFunction", "ObjectsReaperFunction"}

// params are the template parameters of a soak stack: timeouts short
// enough that a killed invocation's messages come back within the run.
func params(c Config) map[string]string {
	return map[string]string{
		"CounterTimeoutSeconds":         strconv.Itoa(int(counterTimeout.Seconds())),
		"VotesVisibilityTimeoutSeconds": "30",
		"CounterBatchingWindowSeconds":  "1",
		"CounterBatchSize":              "200",
		"ArchiveBatchingWindowSeconds":  "1",
	}
}

// counterTimeout is the counter's timeout in a soak.
const counterTimeout = 5 * time.Second

// soak is one run in progress.
type soak struct {
	cfg     Config
	env     *stack.Env
	servers *servers.Stack
	rng     *rand.Rand
	rngMu   sync.Mutex
	log     *slog.Logger
	began   time.Time
	api     *http.Client // signed

	clock     *virtualClock
	loadStart time.Time // when the load began (real time)
	sizing    sizing
	load      *loadState
	faults    *faultLog
	samples   *timeline

	rotMu     sync.Mutex
	rotations []rotationRun
	own       *ownBlobs // the function log's writes that kept blobs of their own
}

func (s *soak) float() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

func (s *soak) intn(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

func (s *soak) progress(format string, args ...any) {
	fmt.Fprintf(s.cfg.Progress, "[%6.1fs] %s\n", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}

// Run brings a local stack up on servers of its own, runs the three flows
// under faults for cfg.Duration, lets the pipeline drain and checks every
// invariant. The error is for a soak that could not run; broken invariants
// are in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	s := &soak{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed>>1|1)), began: time.Now(),
		log: slog.New(slog.NewJSONHandler(cfg.FnLog, nil)), own: newOwnBlobs(cfg.FnLog)}
	rate := "votes sized from the store's ceiling"
	if cfg.VotesPerSecond > 0 {
		rate = fmt.Sprintf("%d votes/s", cfg.VotesPerSecond)
	}
	s.progress("soak: %s of load, %s, %g document requests/s by %d object and %d shared workers, faults %v, seed %d",
		cfg.Duration, rate, cfg.ObjectsPerSecond, cfg.ObjectWorkers, cfg.SharedWorkers, cfg.Faults, cfg.Seed)

	setups, procs := functionSetups(cfg)
	bins, err := functionBinaries(ctx, cfg.Root, procs, cfg.Binaries)
	if err != nil {
		return nil, err
	}
	s.progress("%s as processes (native builds of functions/*)", strings.Join(procs, ", "))

	// Servers of its own: the soak restarts one, and DynamoDB Local slows
	// down with other runs' tables.
	if s.servers = cfg.Servers; s.servers == nil {
		if s.servers, err = servers.Start(ctx, servers.Options{Root: cfg.Root, Log: io.Discard}); err != nil {
			return nil, err
		}
		defer s.servers.Stop()
	} else if cfg.Faults {
		return nil, errors.New("soak: faults restart a server: they need servers of the soak's own (Config.Servers unset)")
	}
	// Every function runs on the producers' clock: 31 October until the
	// crossing, then November (and the jump past October's grace); an
	// hour earlier still during the setup.
	s.clock = newVirtualClock(s.began, cfg.Duration)
	s.env, err = stack.Up(ctx, stack.Options{
		Root: cfg.Root, StackName: cfg.StackName, Params: params(cfg), Setups: setups, Servers: s.servers,
		Processes: bins, FunctionLog: s.own, Progress: io.Discard, ClockOffset: s.clock.offset(),
		StreamShards: cfg.StreamShards, StreamSplitAfter: cfg.StreamSplitAfter, Conflicts: cfg.Conflicts,
	})
	if err != nil {
		return nil, err
	}
	defer s.env.Close()
	s.api = s.env.APIClient()
	s.load = newLoadState()
	s.faults = newFaultLog(s.began)
	s.samples = newTimeline(s.began)

	if err := s.setupVotes(ctx); err != nil {
		return nil, err
	}
	if err := s.size(ctx); err != nil {
		return nil, err
	}
	// The rotator's first run, on the producers' clock (31 October):
	// it creates and subscribes the coming month's table.
	s.rotate(ctx, "before the load")
	if err := s.env.Start(ctx); err != nil {
		return nil, err
	}
	base := leakBaseline(s)
	s.progress("stack up; load starts (%d goroutines, %d open files in this process)", base.Goroutines, base.FDs)

	if err := s.runLoad(ctx); err != nil {
		return nil, err
	}
	s.progress("load done: %d votes sent (%d distinct accepted, %d bad), %d object operations; faults off, draining",
		s.load.votesSent(), s.load.distinctAccepted(), s.load.badSent(), s.load.objectOps())

	res := &Result{Config: cfg, Began: s.began, LoadEnded: time.Now(), Crossing: s.clock.crossing.Sub(s.began)}
	s.check(ctx, res, base)
	s.summarise(res)
	s.progress("done in %s: %d invariants checked, %d violated", res.Took.Round(time.Second), len(res.Invariants), res.Violations())
	return res, nil
}

// functionSetups is the functions the stack runs in this process (those
// of cfg.Setups, which are not killed) and the ids of those it runs as
// processes, which the faults kill.
func functionSetups(cfg Config) (map[string]lambdafn.Setup, []string) {
	setups := maps.Clone(registry.All)
	var procs []string
	for _, id := range killable {
		if setup, ok := cfg.Setups[id]; ok {
			setups[id] = setup // in this process: not killed
		} else {
			procs = append(procs, id)
		}
	}
	return setups, procs
}

// runLoad runs the load for cfg.Duration (votes, documents, the rotator,
// the clock's jump and, with faults on, the faults) and calms the stack
// after it.
func (s *soak) runLoad(ctx context.Context) error {
	cfg := s.cfg
	// The load's virtual start (31 October, half the run before
	// midnight) is now, however long the setup took.
	s.loadStart = time.Now()
	s.clock.startLoad(s.loadStart, cfg.Duration)
	if err := s.env.MoveClock(s.clock.offset()); err != nil {
		return err
	}
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	var wg sync.WaitGroup
	wg.Go(func() { s.produceVotes(loadCtx) })
	for i := range cfg.ObjectWorkers {
		wg.Go(func() { s.objectWorker(loadCtx, i) })
	}
	for range cfg.SharedWorkers {
		wg.Go(func() { s.sharedWorker(loadCtx) })
	}
	wg.Go(func() { s.sample(loadCtx) })
	wg.Go(func() { s.rotateDuringLoad(loadCtx, ctx) })
	wg.Go(func() { s.jumpPastTheGrace(loadCtx) })
	s.redeliver()
	if cfg.Faults {
		wg.Go(func() { s.injectFaults(loadCtx) })
		wg.Go(func() { s.killFunctions(loadCtx) })
		wg.Go(func() { s.restartServer(loadCtx) })
	}
	wg.Wait()
	stopLoad()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("soak interrupted during the load: %w", err) // Ctrl-C: no drain, no checks
	}
	s.calm()
	s.calm()
	return nil
}

// summarise adds the run's figures to its checked result: faults, load,
// sizing, rotations, the functions' and the IAM judge's figures.
func (s *soak) summarise(res *Result) {
	res.Faults = s.faults.summary(s.env)
	res.Timeline = s.samples
	res.Load = s.load.summary(s.cfg.Duration)
	res.Sizing = s.sizing
	res.Rotations = s.rotations
	res.Functions = s.env.Runner.Stats()
	if j := s.env.Judge; j != nil {
		js := &res.Judge
		js.P50, js.Requests = j.Latency(0.5)
		js.P99, _ = j.Latency(0.99)
		js.Max, _ = j.Latency(1)
		_, js.Cached = j.CacheLatency(true, 0.5)
		js.AskedP99, js.Asked = j.CacheLatency(false, 0.99)
	}
	res.Took = time.Since(s.began)
}

// functionBinaries returns the binaries of the functions ids: those of
// have (built before, by logical id), and the rest built.
func functionBinaries(ctx context.Context, root string, ids []string, have map[string]string) (map[string]string, error) {
	bins := map[string]string{}
	var missing []string
	for _, id := range ids {
		if b := have[id]; b != "" {
			bins[id] = b
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return bins, nil
	}
	more, err := buildFunctions(ctx, root, missing)
	if err != nil {
		return nil, err
	}
	maps.Copy(bins, more)
	return bins, nil
}

// buildFunctions builds the functions ids (logical ids) for this machine
// into <cache>/soak-functions and returns their binaries by id. The
// folder stays: go build leaves a binary that is up to date as it is
// (linking the four functions the soak kills took 6 s of CPU each run).
func buildFunctions(ctx context.Context, root string, ids []string) (map[string]string, error) {
	cache, err := servers.CacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "soak-functions")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, id := range ids {
		name := cfn.FunctionName(id)
		args = append(args, "./functions/"+name)
		bins[id] = filepath.Join(dir, name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("soak: go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bins, nil
}

// virtualClock is the clock of the producers and of every function: it
// crosses from October into November halfway through the load, so the
// ledger's month changes under load. A tenth of the run later it jumps
// ahead by October's grace and the fence margin, as the two days after a
// month's end would pass: from then on the counter refuses October's
// votes (the fence) and the rotator retires October while November's
// votes arrive.
type virtualClock struct {
	began    time.Time
	crossing time.Time    // real time of the month boundary
	boundary time.Time    // 1 November 2026, 00:00 UTC
	jump     atomic.Int64 // nanoseconds
	jumpedAt atomic.Int64 // real Unix nanoseconds of the jump; 0 before it
}

// settled waits until the jump is further back than the counter's
// timeout: the fence margin in real time. On AWS the margin (1 hour) is
// longer than any invocation that passed the fence before the grace ended
// can go on writing (15 minutes at most); a jump of two days in an
// instant leaves such invocations running, so a rotator run waits them
// out here rather than verify a month they still write.
func (c *virtualClock) settled(ctx context.Context) {
	if at := c.jumpedAt.Load(); at != 0 {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(time.Unix(0, at).Add(counterTimeout + time.Second))):
		}
	}
}

// newVirtualClock returns the clock for the setup: an hour before the
// load's virtual start, whatever the setup takes (builds, servers, the
// stack); startLoad then sets the crossing from the load's real start.
func newVirtualClock(began time.Time, d time.Duration) *virtualClock {
	return &virtualClock{began: began, crossing: began.Add(d/2 + time.Hour), boundary: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
}

// startLoad puts the crossing half the load's duration after now, the
// load's start. Call it before the load's goroutines start.
func (c *virtualClock) startLoad(now time.Time, d time.Duration) { c.crossing = now.Add(d / 2) }

// Now is the virtual time: the boundary plus the real time since the
// crossing (negative before it), plus the jump once made.
func (c *virtualClock) Now() time.Time { return time.Now().Add(c.offset()) }

// offset is the virtual time less the real time.
func (c *virtualClock) offset() time.Duration {
	return c.boundary.Sub(c.crossing) + time.Duration(c.jump.Load())
}

// Month is the producers' current month.
func (c *virtualClock) Month() string { return ledger.MonthOf(c.Now()) }

const (
	coldMonth = "2026-10"
	liveMonth = "2026-11"
	graceDays = 2
	// pastTheGrace is the jump: October's grace and the rotator's fence
	// margin (1 hour), and a half hour more.
	pastTheGrace = graceDays*ledger.Day + 90*time.Minute
)

// jumpPastTheGrace moves every clock past October's grace a twentieth of
// the run after the crossing: between two of the rotator's runs (every
// tenth), so counter invocations that passed the fence just before the
// jump have ended (their timeout is 5 s) before a run retires October.
func (s *soak) jumpPastTheGrace(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(s.clock.crossing.Add(s.cfg.Duration / 20))):
	}
	s.clock.jump.Store(int64(pastTheGrace))
	s.clock.jumpedAt.Store(time.Now().UnixNano())
	if err := s.env.MoveClock(s.clock.offset()); err != nil {
		s.progress("the clock's jump failed: %v", err)
		return
	}
	s.faults.add("month", fmt.Sprintf("clock jumped to %s: %s's grace is over", s.clock.Now().Format("2006-01-02 15:04"), coldMonth))
	s.progress("clock jumped to %s: %s takes no more votes", s.clock.Now().Format("2006-01-02 15:04"), coldMonth)
}

// rotatorNow is the rotator's clock: everyone's.
func (s *soak) rotatorNow() time.Time { return s.clock.Now() }

// rotationRun is one rotator run as the report lists it.
type rotationRun struct {
	At      time.Duration // when the run started, since the soak began
	Clock   time.Time     // the rotator's clock
	Why     string
	Created []string
	Retired []string
	Outcome map[string]string // table → outcome
	// Counters is each verified table's counters check (the tally's
	// votes against the items verified archived).
	Counters map[string]archive.CountersCheck
	Err      string
	Took     time.Duration
}

// rotate runs the rotator once, wired as its function wires it, with its
// clock set to rotatorNow.
func (s *soak) rotate(ctx context.Context, why string) rotationRun {
	s.clock.settled(ctx)
	now := s.rotatorNow()
	r := s.rotator(now)
	start := time.Now()
	rep := r.Run(ctx)
	run := rotationRun{At: start.Sub(s.began), Clock: now, Why: why, Created: rep.Created,
		Outcome: map[string]string{}, Counters: map[string]archive.CountersCheck{}, Took: time.Since(start)}
	for _, t := range rep.Retirements {
		run.Outcome[t.Table] = string(t.Outcome)
		if t.Counters != nil {
			run.Counters[t.Table] = *t.Counters
		}
		if t.Outcome == archive.Retired {
			run.Retired = append(run.Retired, t.Table)
		}
	}
	if err := rep.Err(); err != nil {
		run.Err = err.Error()
	}
	s.rotMu.Lock()
	s.rotations = append(s.rotations, run)
	s.rotMu.Unlock()
	s.progress("rotator at %s (%s): created %v, retired %v, outcomes %v, err %v", now.Format("2006-01-02 15:04"), why, rep.Created, run.Retired, run.Outcome, rep.Err())
	return run
}

// rotateDuringLoad runs the rotator every tenth of the load, as its daily
// schedule would on the moving clock. A run started under load finishes
// on ctx, not load: the load's end does not cut a retirement short.
func (s *soak) rotateDuringLoad(load, ctx context.Context) {
	t := time.NewTicker(max(5*time.Second, s.cfg.Duration/10))
	defer t.Stop()
	for {
		select {
		case <-load.Done():
			return
		case <-t.C:
			s.rotate(ctx, "under load")
		}
	}
}

// coldCounters is the last counters check of the cold month's table
// (ok false when no run verified it).
func (s *soak) coldCounters() (c archive.CountersCheck, ok bool) {
	s.rotMu.Lock()
	defer s.rotMu.Unlock()
	for _, r := range s.rotations {
		if cc, found := r.Counters[s.ledgerTable(coldMonth)]; found {
			c, ok = cc, true
		}
	}
	return c, ok
}

// retired reports whether a rotator run retired the cold month's table.
func (s *soak) retired() bool {
	s.rotMu.Lock()
	defer s.rotMu.Unlock()
	for _, r := range s.rotations {
		if r.Outcome[s.ledgerTable(coldMonth)] == string(archive.Retired) {
			return true
		}
	}
	return false
}

func (s *soak) ledgerTable(month string) string {
	return ledger.TableName(s.env.Vars["LEDGER_TABLE_PREFIX"], month)
}

// leak is a process's resource use at one moment.
type leak struct {
	// Goroutines leaves out those of idle keep-alive connections, counted
	// in Pooled; FDs leaves out their sockets, counted in IdleSockets.
	Goroutines, Pooled int
	FDs, IdleSockets   int
	Processes          map[string]int // idle function processes by logical id
}

func leakBaseline(s *soak) leak {
	runtime.GC()
	all, pooled, sockets := goroutines()
	l := leak{Goroutines: all - pooled, Pooled: pooled, FDs: openFiles() - sockets, IdleSockets: sockets, Processes: map[string]int{}}
	for id, p := range s.env.Processes {
		l.Processes[id] = len(p.PIDs()) // none once reclaimed (see idle)
	}
	return l
}

// goroutines counts this process's goroutines, and those among them that
// only hold an idle keep-alive connection: a client's read and write loops
// (net/http's persistConn), a server's wait for the next request. The
// pools keep up to their bounds of such connections, more after a burst
// that ran more requests at once, and drop them once idle long enough; a
// burst that happens to run wider leaves a few dozen more, which is not a
// leak. A goroutine stuck anywhere else still counts, and a connection
// leaked busy (a body never closed) still shows among the open files.
// sockets counts the idle connections' sockets: one per client connection
// (its read loop) and one per server connection waiting for a request.
func goroutines() (all, pooled, sockets int) {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return runtime.NumGoroutine(), 0, 0
	}
	for _, block := range strings.Split(b.String(), "\n\n") {
		head := block
		if i := strings.Index(block, "\n"); strings.HasPrefix(block, "goroutine profile:") && i >= 0 {
			head = block[i+1:]
		}
		var n int
		if _, err := fmt.Sscanf(head, "%d @", &n); err != nil {
			continue
		}
		all += n
		if idleConn(block) {
			pooled += n
		}
		if idleSocket(block) {
			sockets += n
		}
	}
	return all, pooled, sockets
}

// idleConn reports whether a goroutine profile's stack is an idle
// keep-alive connection's.
func idleConn(stack string) bool {
	return idleSocket(stack) || strings.Contains(stack, "net/http.(*persistConn).writeLoop")
}

// idleSocket reports whether a goroutine profile's stack holds an idle
// keep-alive connection's socket: a client's read loop or a server's
// connection, each waiting for the next message's first byte (a client
// connection whose body was never closed waits elsewhere, and counts).
func idleSocket(stack string) bool {
	return (strings.Contains(stack, "net/http.(*persistConn).readLoop") || strings.Contains(stack, "net/http.(*conn).serve")) &&
		strings.Contains(stack, "bufio.(*Reader).Peek")
}

func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

var errNotQuiet = errors.New("soak: the pipeline did not drain")
