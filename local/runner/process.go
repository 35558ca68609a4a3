package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Functions as separate processes: a function's own binary (what `make
// build` builds for Lambda, built for this machine) started the way Lambda
// starts an execution environment, with AWS_LAMBDA_RUNTIME_API pointing at a
// Runtime API served here. A Processes value is a lambda.Handler, so the
// runner's event sources, the HTTP API and Invoke drive it unchanged, and
// the event source mappings' state (SQS in-flight messages, stream
// positions) lives in the runner, outside the processes — as it lives in
// Lambda's service, not in the function. Killing a process mid-invocation
// (Kill) is then what a crashed or OOM-killed Lambda environment is: the
// invocation fails with Runtime.ExitError and the next one starts a new
// environment (a cold start).

// ProcessConfig says how to run a function's environments.
type ProcessConfig struct {
	Function string   // logical id, for logs and errors
	Binary   string   // the function's executable
	Env      []string // its whole environment (KEY=value); AWS_LAMBDA_RUNTIME_API is added
	// MaxEnvironments caps the processes running at once (default 4); an
	// invocation waits for a free one, as Lambda queues at its concurrency.
	MaxEnvironments int
	// Output receives the processes' stdout and stderr (logs, EMF lines)
	// in whole lines; it must take writes from several goroutines.
	Output io.Writer
	Log    *slog.Logger
}

// ProcessStats counts what happened to a function's environments.
type ProcessStats struct {
	Started     int // processes started (cold starts)
	Killed      int // processes Kill ended
	Exited      int // processes that ended while invoked (killed or crashed)
	InitErrors  int // processes that reported an init error or exited before their first poll
	Invocations int
}

// Processes runs one function in processes. Its Invoke implements
// lambda.Handler.
type Processes struct {
	cfg  ProcessConfig
	slot chan struct{} // one token per allowed environment

	mu     sync.Mutex
	idle   []*execEnv
	busy   map[*execEnv]bool
	stats  ProcessStats
	closed bool
}

// NewProcesses returns a handler that runs cfg.Binary in processes.
func NewProcesses(cfg ProcessConfig) *Processes {
	if cfg.MaxEnvironments <= 0 {
		cfg.MaxEnvironments = 4
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Processes{cfg: cfg, slot: make(chan struct{}, cfg.MaxEnvironments), busy: map[*execEnv]bool{}}
}

// ErrRuntimeExited is the error of an invocation whose process ended before
// it answered, as Lambda's Runtime.ExitError.
var ErrRuntimeExited = errors.New("Runtime.ExitError")

// Invoke runs one invocation in an idle environment, or a new one.
func (p *Processes) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	select {
	case p.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.slot }()
	for {
		env, err := p.acquire(ctx)
		if err != nil {
			return nil, err
		}
		out, err, reusable := env.invoke(ctx, payload)
		p.release(env, reusable)
		if errors.Is(err, errNotDelivered) {
			continue // the process ended before taking it: a fresh one will
		}
		return out, err
	}
}

// errNotDelivered: the process ended (after a panic, say) before it asked
// for the invocation, which can go to another process.
var errNotDelivered = errors.New("runner: environment ended before the invocation was delivered")

func (p *Processes) acquire(ctx context.Context) (*execEnv, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("runner: %s: processes closed", p.cfg.Function)
	}
	for n := len(p.idle); n > 0; n = len(p.idle) {
		env := p.idle[n-1]
		p.idle = p.idle[:n-1]
		if env.gone() { // ended after its last invocation (a panic, a signal)
			p.stats.Exited++
			go env.stop()
			continue
		}
		p.busy[env] = true
		p.stats.Invocations++
		p.mu.Unlock()
		return env, nil
	}
	p.mu.Unlock()
	env, err := p.start(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.stats.InitErrors++
		return nil, err
	}
	p.stats.Started++
	p.stats.Invocations++
	p.busy[env] = true
	return env, nil
}

func (p *Processes) release(env *execEnv, reusable bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.busy, env)
	if !reusable {
		p.stats.Exited++
		env.stop()
		return
	}
	if p.closed {
		env.stop()
		return
	}
	p.idle = append(p.idle, env)
}

// Kill sends SIGKILL to a process that is running an invocation (an idle
// one when none is busy) and returns its pid; false when none runs.
func (p *Processes) Kill() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var victim *execEnv
	for env := range p.busy {
		victim = env
		break
	}
	if victim == nil && len(p.idle) > 0 {
		victim = p.idle[0]
		p.idle = p.idle[1:]
		defer victim.stop()
	}
	if victim == nil {
		return 0, false
	}
	pid := victim.cmd.Process.Pid
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	p.stats.Killed++
	return pid, true
}

// Stats returns the counters.
func (p *Processes) Stats() ProcessStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Busy is the number of processes running an invocation now.
func (p *Processes) Busy() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.busy)
}

// PIDs returns the running processes' ids.
func (p *Processes) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, env := range p.idle {
		pids = append(pids, env.cmd.Process.Pid)
	}
	for env := range p.busy {
		pids = append(pids, env.cmd.Process.Pid)
	}
	return pids
}

// Trim stops the idle processes, as Lambda reclaims idle environments;
// the next invocation starts a new one. It returns how many it stopped.
func (p *Processes) Trim() int {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, env := range idle {
		env.stop()
	}
	return len(idle)
}

// Close stops the idle processes; busy ones stop when their invocation ends.
func (p *Processes) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, env := range idle {
		env.stop()
	}
}

// execEnv is one process and the Runtime API it polls.
type execEnv struct {
	fn      string
	cmd     *exec.Cmd
	srv     *http.Server
	next    chan *invocation
	exited  chan struct{} // closed when the process has been reaped
	waitErr error
	polled  chan struct{} // closed at the first GET next
	initErr chan string

	mu      sync.Mutex
	current *invocation
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	arn      string
	done     chan result
}

type result struct {
	out []byte
	err error
}

const runtimePrefix = "/2018-06-01/runtime/"

// start launches a process and waits for its first poll for an invocation
// (its init done), as Lambda's cold start does.
func (p *Processes) start(ctx context.Context) (*execEnv, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	env := &execEnv{
		fn: p.cfg.Function, next: make(chan *invocation), exited: make(chan struct{}),
		polled: make(chan struct{}), initErr: make(chan string, 1),
	}
	env.srv = &http.Server{Handler: http.HandlerFunc(env.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = env.srv.Serve(ln) }()

	env.cmd = exec.Command(p.cfg.Binary)
	env.cmd.Env = append(append([]string{}, p.cfg.Env...), "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String())
	out := io.Discard
	if p.cfg.Output != nil {
		out = p.cfg.Output
	}
	lw := &lines{out: out}
	env.cmd.Stdout, env.cmd.Stderr = lw, lw
	env.cmd.SysProcAttr = processSysProcAttr()
	env.cmd.WaitDelay = time.Second
	if err := env.cmd.Start(); err != nil {
		_ = env.srv.Close()
		return nil, fmt.Errorf("runner: start %s: %w", p.cfg.Function, err)
	}
	go func() {
		env.waitErr = env.cmd.Wait()
		lw.flush()
		close(env.exited)
	}()
	p.cfg.Log.Debug("environment started", "function", p.cfg.Function, "pid", env.cmd.Process.Pid)
	select {
	case <-env.polled:
		return env, nil
	case msg := <-env.initErr:
		env.stop()
		return nil, fmt.Errorf("runner: %s: Runtime.InitError: %s", p.cfg.Function, msg)
	case <-env.exited:
		env.stop()
		return nil, fmt.Errorf("runner: %s: %w: exited during init: %v", p.cfg.Function, ErrRuntimeExited, env.waitErr)
	case <-ctx.Done():
		env.stop()
		return nil, fmt.Errorf("runner: %s: init: %w", p.cfg.Function, ctx.Err())
	}
}

// invoke hands one invocation to the process and waits for its answer, its
// exit or the deadline. reusable is false when the process cannot take
// another invocation (it exited, or was stopped at the deadline, as Lambda
// discards a timed-out environment).
func (env *execEnv) invoke(ctx context.Context, payload []byte) (out []byte, err error, reusable bool) {
	inv := &invocation{id: newID(), payload: payload, arn: "", done: make(chan result, 1)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		inv.id, inv.arn = lc.AwsRequestID, lc.InvokedFunctionArn
	}
	inv.deadline = time.Now().Add(15 * time.Minute)
	if dl, ok := ctx.Deadline(); ok {
		inv.deadline = dl
	}
	select {
	case env.next <- inv:
	case <-env.exited:
		return nil, errNotDelivered, false
	case <-ctx.Done():
		return nil, ctx.Err(), false
	}
	select {
	case r := <-inv.done:
		return r.out, r.err, true
	case <-env.exited:
		return nil, fmt.Errorf("runner: %s: %w: runtime exited with error: %v", env.fn, ErrRuntimeExited, env.waitErr), false
	case <-ctx.Done():
		return nil, ctx.Err(), false
	}
}

// serve is the Runtime API: next, response, error, init error.
func (env *execEnv) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, runtimePrefix)
	switch {
	case r.Method == http.MethodGet && path == "invocation/next":
		select {
		case <-env.polled:
		default:
			close(env.polled)
		}
		select {
		case inv := <-env.next:
			env.mu.Lock()
			env.current = inv
			env.mu.Unlock()
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", inv.arn)
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.payload)
		case <-r.Context().Done():
		}
	case r.Method == http.MethodPost && path == "init/error":
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		select {
		case env.initErr <- string(body):
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "invocation/"):
		id, kind, _ := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20+1))
		env.mu.Lock()
		inv := env.current
		if inv != nil && inv.id == id {
			env.current = nil
		} else {
			inv = nil
		}
		env.mu.Unlock()
		if inv == nil {
			http.Error(w, `{"errorMessage":"unknown request id","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		switch {
		case err != nil:
			inv.done <- result{err: fmt.Errorf("runner: %s: read response: %w", env.fn, err)}
		case kind == "response" && len(body) > 6<<20:
			inv.done <- result{err: fmt.Errorf("runner: %s: response larger than 6 MB (Function.ResponseSizeTooLarge)", env.fn)}
		case kind == "response":
			inv.done <- result{out: body}
		default:
			inv.done <- result{err: functionError(body)}
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}

// functionError turns a Runtime API error document into an error.
func functionError(body []byte) error {
	var doc struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Message == "" {
		return fmt.Errorf("function error: %s", strings.TrimSpace(string(body)))
	}
	return fmt.Errorf("%s: %s", doc.Type, doc.Message)
}

func (env *execEnv) gone() bool {
	select {
	case <-env.exited:
		return true
	default:
		return false
	}
}

// stop kills the process (if still running) and closes its Runtime API.
func (env *execEnv) stop() {
	_ = env.cmd.Process.Signal(syscall.SIGKILL)
	<-env.exited
	_ = env.srv.Close()
}
