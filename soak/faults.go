package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// A fault mix: what the three proxies inject for one phase.
type mix struct {
	name   string
	faults faultproxy.Faults
}

// mixes are the phases the soak cycles through, calm ones between.
var mixes = []mix{
	{"calm", faultproxy.Faults{}},
	{"throttles 5 %", faultproxy.Faults{ThrottleRate: 0.05}},
	{"5xx 3 %", faultproxy.Faults{ServerErrorRate: 0.03}},
	{"latency 20±30 ms", faultproxy.Faults{Latency: 20 * time.Millisecond, LatencyJitter: 30 * time.Millisecond}},
	{"dropped connections 1 %", faultproxy.Faults{DropRate: 0.01}},
	{"calm", faultproxy.Faults{}},
	{"all at once", faultproxy.Faults{ThrottleRate: 0.02, ServerErrorRate: 0.01, DropRate: 0.005, Latency: 5 * time.Millisecond, LatencyJitter: 20 * time.Millisecond}},
}

// event is one fault the timeline marks: a kill, a restart, a phase.
type event struct {
	At     time.Duration
	Kind   string // "phase", "kill", "restart", "month"
	Detail string
}

// faultLog records the faults injected.
type faultLog struct {
	began  time.Time
	mu     sync.Mutex
	events []event
	kills  map[string]int // function → SIGKILLs
	busy   int            // kills that hit a process mid-invocation
	phases map[string]time.Duration
	down   map[string]time.Duration // each restarted server's outage ("S3", "search")
}

func newFaultLog(began time.Time) *faultLog {
	return &faultLog{began: began, kills: map[string]int{}, phases: map[string]time.Duration{}, down: map[string]time.Duration{}}
}

func (f *faultLog) add(kind, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{At: time.Since(f.began), Kind: kind, Detail: detail})
}

func (f *faultLog) snapshot() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event(nil), f.events...)
}

// setMix applies a fault mix to every proxy (the functions', the
// producers' and the rotator's traffic alike).
func (s *soak) setMix(m mix) {
	for _, p := range s.env.Proxies {
		p.SetFaults(m.faults)
	}
}

// injectFaults cycles through the mixes, a PhaseEvery each.
func (s *soak) injectFaults(ctx context.Context) {
	for i := 0; ; i++ {
		m := mixes[i%len(mixes)]
		s.setMix(m)
		s.faults.add("phase", m.name)
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.PhaseEvery):
		}
		s.faults.mu.Lock()
		s.faults.phases[m.name] += time.Since(start)
		s.faults.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// redeliver has the runner deliver a DuplicateRate share of batches twice,
// from the load's start to the end of the checks, faults or not:
// redelivery is Lambda's at-least-once delivery, not a fault, and a batch
// the pipeline only gets to in the drain (a slow machine's counter behind
// its queue) may come twice as well.
func (s *soak) redeliver() {
	s.env.Runner.SetFaults(runner.Faults{DuplicateRate: s.cfg.DuplicateRate})
}

// calm turns the faults off for the drain and the checks.
func (s *soak) calm() {
	s.setMix(mix{})
}

// killFunctions sends SIGKILL to a process of each killable function in
// turn, preferring one that is running an invocation.
func (s *soak) killFunctions(ctx context.Context) {
	t := time.NewTicker(s.cfg.KillEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		id := killable[i%len(killable)]
		p := s.env.Processes[id]
		// Prefer a process mid-invocation: wait for one, up to half the
		// interval, rather than kill whatever the tick finds.
		busy := p.Busy() > 0
		for wait := time.Now().Add(s.cfg.KillEvery / 2); !busy && time.Now().Before(wait) && ctx.Err() == nil; {
			time.Sleep(10 * time.Millisecond)
			busy = p.Busy() > 0
		}
		pid, ok := p.Kill()
		if !ok {
			continue
		}
		s.faults.mu.Lock()
		s.faults.kills[id]++
		if busy {
			s.faults.busy++
		}
		s.faults.mu.Unlock()
		what := "idle"
		if busy {
			what = "mid-invocation"
		}
		s.faults.add("kill", fmt.Sprintf("%s pid %d (%s)", id, pid, what))
	}
}

// restartServer restarts the S3 server once, at two fifths of the load,
// down for a twentieth of the run (at most 5 s):
// the objects' blobs, the archive's files and presigned transfers all
// lose their server for a while. (S3 keeps its files across the restart;
// the SQS server keeps nothing, so restarting it would lose the queue's
// messages, which no real outage does.) In soaks of two minutes or more
// (`make soak`), the search engine restarts the same way at three fifths:
// the indexer's batches wait on the stream and go through once it is
// back. Not in the test's 30-second soak: ZincSearch has come back from a
// restart without documents it had acknowledged (31 of 36 in one run of
// four), which the search proxy's versions then refuse to write again;
// the local engine's durability is not the product's, so the gate does
// not rest on it while that is open (issue 37's closing note).
func (s *soak) restartServer(ctx context.Context) {
	s.restart(ctx, servers.S3Server, "S3", s.cfg.Duration*2/5)
	if s.servers.Search != "" && s.cfg.Duration >= 2*time.Minute {
		s.restart(ctx, servers.SearchServer, "search", s.cfg.Duration/5)
	}
}

// restart restarts one server after a wait and records its outage.
func (s *soak) restart(ctx context.Context, server, name string, after time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(after):
	}
	s.faults.add("restart", name+" server stopped")
	down, err := s.servers.Restart(ctx, server, min(5*time.Second, s.cfg.Duration/20))
	if err != nil {
		s.faults.add("restart", name+" restart failed: "+err.Error())
		s.progress("%s restart failed: %v", name, err)
		return
	}
	s.faults.mu.Lock()
	s.faults.down[name] = down
	s.faults.mu.Unlock()
	s.faults.add("restart", fmt.Sprintf("%s server back after %s", name, down.Round(time.Millisecond)))
	s.progress("%s server restarted: down %s", name, down.Round(time.Millisecond))
}

// faultSummary counts the faults injected, by kind.
type faultSummary struct {
	// Proxy counts by service: throttles, 5xx, dropped connections,
	// upstream failures (the restarted server), from the proxies.
	Proxy      map[string]faultproxy.Counts
	Phases     map[string]time.Duration
	Kills      map[string]int
	KillsBusy  int
	Duplicates int // batches delivered twice by the runner
	Crashed    map[string]runner.ProcessStats
	S3Down     time.Duration
	SearchDown time.Duration // 0 when the servers have no search engine
	Events     []event
}

func (f *faultLog) summary(env *stack.Env) faultSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := faultSummary{Proxy: map[string]faultproxy.Counts{}, Phases: map[string]time.Duration{}, Kills: map[string]int{},
		KillsBusy: f.busy, Crashed: map[string]runner.ProcessStats{}, S3Down: f.down["S3"], SearchDown: f.down["search"], Events: append([]event(nil), f.events...)}
	for svc, p := range env.Proxies {
		out.Proxy[string(svc)] = p.Stats().Counts
	}
	for k, v := range f.phases {
		out.Phases[k] = v
	}
	for k, v := range f.kills {
		out.Kills[k] = v
	}
	for _, st := range env.Runner.Stats() {
		out.Duplicates += st.Duplicates
	}
	for id, p := range env.Processes {
		out.Crashed[id] = p.Stats()
	}
	sort.Slice(out.Events, func(i, j int) bool { return out.Events[i].At < out.Events[j].At })
	return out
}
