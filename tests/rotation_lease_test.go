package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
	"github.com/ddbpipe/ddbpipe/tests/clibin"
)

// Rotations that overlap, on one stack and its real engines (DynamoDB
// Local, the S3 and Lambda servers, the IAM judge):
//
//   - October is retired by a chain of runs, each stopped in the middle of
//     a step (right after the step's first call took effect: its answer
//     and every later call of the run are lost, the lease's release too,
//     as when a process dies), each restarted once the stopped run's lease
//     lapsed (an injected lease clock moves past it). A run before that
//     leaves the month alone without failing; the run after takes the
//     lease over and resumes where the other stopped, each step done
//     already saying so.
//   - November, once cold by the stack's clock, is rotated by three
//     `ddbpipe tables rotate` and the scheduled rotator function at once.
//
// Every time: the month's table deleted once, its archive exactly the
// table, and no run failing for another's work.
func TestRotationsOverlap(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	midOctober := time.Date(2026, 10, 14, 12, 0, 0, 0, time.UTC)
	env := upLocalAt(t, midOctober)
	prefix := env.Vars["LEDGER_TABLE_PREFIX"]
	october, november := prefix+"-2026-10", prefix+"-2026-11"

	// The month's votes, counted (so archived and checkpointed) before the
	// month turns.
	createPoll(t, env, `{"pollId":"oct","options":["red","green","blue"],"shards":2}`)
	sendVotesAt(t, env, "oct", midOctober, 60)
	eventually(t, 3*time.Minute, "October's votes counted", func() bool { return getResults(t, env, "oct").Total == 60 })
	if err := env.MoveClock(time.Until(midNovember)); err != nil {
		t.Fatal(err)
	}
	createPoll(t, env, `{"pollId":"nov","options":["red","green","blue"],"shards":2}`)
	sendVotesAt(t, env, "nov", midNovember, 60)
	eventually(t, 3*time.Minute, "November's votes counted", func() bool { return getResults(t, env, "nov").Total == 60 })

	deletes := countDeletes(env)
	t.Run("october, stopped in every step", func(t *testing.T) {
		retireThroughCrashes(t, env, october, deletes)
	})
	t.Run("november, four runs at once", func(t *testing.T) {
		rotateAtOnce(t, env, november, deletes)
	})
}

// deleteCounter counts the DeleteTable requests the DynamoDB proxy sees,
// by table: whoever sends them, the CLI, a function or the test.
type deleteCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *deleteCounter) of(table string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[table]
}

func countDeletes(env *stack.Env) *deleteCounter {
	d := &deleteCounter{n: map[string]int{}}
	env.Proxies[faultproxy.DynamoDB].SetFaults(faultproxy.Faults{Match: func(op faultproxy.Operation) bool {
		if op.Action == "DeleteTable" {
			d.mu.Lock()
			d.n[op.Table]++
			d.mu.Unlock()
		}
		return false // no fault: the proxy only counts
	}})
	return d
}

// sendVotesAt sends n distinct votes for poll, cast k seconds after at for
// vote k.
func sendVotesAt(t *testing.T, env *stack.Env, poll string, at time.Time, n int) {
	t.Helper()
	options := []string{"red", "green", "blue"}
	vs := make([]votes.Vote, n)
	for k := range vs {
		vs[k] = votes.Vote{VoteID: fmt.Sprintf("%s-%05d", poll, k), PollID: poll, OptionID: options[(k*7)%3],
			VoterID: fmt.Sprintf("voter-%d", k), CastAt: at.Add(time.Duration(k) * time.Second)}
	}
	res, err := votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"]).Send(context.Background(), vs)
	if err != nil || res.Sent != n {
		t.Fatalf("send: %v (%d of %d sent)", err, res.Sent, n)
	}
}

// scanOf is a table's content, for the archive to be compared with once
// the table is gone.
func scanOf(t *testing.T, r *archive.Rotator, table string) archive.State {
	t.Helper()
	s, err := r.Tables.Scan(context.Background(), table, false)
	if err != nil {
		t.Fatal(err)
	}
	return s.State
}

// archiveExact fails unless the month's archive is retired and holds
// exactly want.
func archiveExact(t *testing.T, r *archive.Rotator, p archive.Partition, want archive.State) {
	t.Helper()
	c, err := r.Archive.Read(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if rep := archive.Verify(c.State, want); !rep.OK() || !c.AlreadyRetired() {
		t.Errorf("archive of %s: %s, retired %v; want it exactly the table, retired", p.Prefix(), rep, c.AlreadyRetired())
	}
}

// The chain's crash points, in the order of the steps: the call each run
// stops right after, and the step that leaves its lease at.
var crashPoints = []struct {
	call string
	step archive.Step
	// says is what the next run's steps say of the work this one did.
	says map[archive.Step]string
}{
	{"Take", archive.StepLease, nil},
	{"Subscribe", archive.StepEnsure, nil},
	{"DisableStream", archive.StepDrain, map[archive.Step]string{archive.StepDrain: "stream off: already"}},
	{"Scan", archive.StepVerify, nil},
	{"Tallied", archive.StepCounters, nil},
	{"Compact", archive.StepCompact, map[archive.Step]string{archive.StepDrain: "stream off: already; drained by the run of"}},
	{"Unsubscribe", archive.StepUnsubscribe, map[archive.Step]string{archive.StepUnsubscribe: "no mappings: removed already"}},
	{"Protect", archive.StepUnprotect, map[archive.Step]string{archive.StepUnprotect: "deletion protection off: already"}},
	{"Delete", archive.StepDelete, nil},
}

func retireThroughCrashes(t *testing.T, env *stack.Env, table string, deletes *deleteCounter) {
	ctx := context.Background()
	var leaseNow atomic.Int64
	leaseNow.Store(time.Now().UnixNano())
	run := func(k int) *archive.Rotator {
		r := rotatorAt(t, env, midNovember, testLogger(t))
		r.Holder = fmt.Sprintf("run %d", k)
		r.LeaseClock = func() time.Time { return time.Unix(0, leaseNow.Load()) }
		return r
	}
	probe := run(0)
	before := scanOf(t, probe, table)
	p := archive.Partition{Table: env.Vars["LEDGER_TABLE_PREFIX"], Month: "2026-10"}
	if len(before) != 60 {
		t.Fatalf("%s holds %d items, want 60", table, len(before))
	}
	var stopped archive.Lease // the lease the last stopped run left
	for k, cp := range crashPoints {
		if k > 0 {
			// Before the stopped run's lease lapses, the month is left to it.
			leaseNow.Store(stopped.Expires.Add(-time.Second).UnixNano())
			rep := run(100 + k).Run(ctx)
			ret := retirementOf(rep, table)
			if rep.Err() != nil || ret == nil || ret.Outcome != archive.HeldByAnother || ret.HeldBy.Run != stopped.Run {
				t.Fatalf("before the lease of the run stopped at %s lapsed: %+v, %v; want the month held by it", crashPoints[k-1].call, ret, rep.Err())
			}
			leaseNow.Store(stopped.Expires.Add(time.Second).UnixNano())
		}
		r := run(k + 1)
		steps := map[archive.Step]string{}
		r.OnStep = func(tb string, s archive.StepResult) {
			if tb == table {
				steps[s.Step] = s.Detail
			}
		}
		crash := crashAt(r, cp.call)
		rep := r.Run(ctx)
		ret := retirementOf(rep, table)
		if !crash.down() || ret == nil || ret.Outcome != archive.Failed || !errors.Is(ret.Err, errCrashed) {
			t.Fatalf("run %d: stopped %v, %+v; want it stopped at %s", k+1, crash.down(), ret, cp.call)
		}
		if cp.call == "Take" {
			// Stopped before it heard that it took the lease: the lease
			// is the one it asked for.
			now := time.Unix(0, leaseNow.Load())
			ret.Lease = archive.Lease{Table: table, Holder: r.Holder, Run: r.RunID, Since: now, Step: archive.StepLease, Expires: now.Add(archive.DefaultLeaseFor)}
		}
		if ret.Lease.Step != cp.step || ret.Lease.Run != r.RunID {
			t.Errorf("run %d left its lease %+v, want its own at %s", k+1, ret.Lease, cp.step)
		}
		if k > 0 {
			prev := crashPoints[k-1]
			if ret.TookOver.Run != stopped.Run || ret.TookOver.Step != prev.step {
				t.Errorf("run %d took over %+v, want the lease of the run stopped at %s", k+1, ret.TookOver, prev.step)
			}
			if d := steps[archive.StepLease]; !strings.Contains(d, "which stopped at step "+string(prev.step)) {
				t.Errorf("run %d's lease step %q, want it to say where the run before stopped", k+1, d)
			}
			for step, want := range prev.says {
				if !strings.Contains(steps[step], want) {
					t.Errorf("run %d's %s step said %q, want %q", k+1, step, steps[step], want)
				}
			}
		}
		stopped = ret.Lease
		t.Logf("run %d stopped in %s (%s)", k+1, cp.step, cp.call)
	}
	// The last run stopped right after the delete: nothing is left to do.
	leaseNow.Store(stopped.Expires.Add(time.Second).UnixNano())
	rep := run(len(crashPoints) + 1).Run(ctx)
	if err := rep.Err(); err != nil || retirementOf(rep, table) != nil {
		t.Errorf("after the chain: %+v, %v; want nothing left to retire", rep.Retirements, err)
	}
	if tableExists(t, env, table) {
		t.Errorf("%s still exists", table)
	}
	if n := deletes.of(table); n != 1 {
		t.Errorf("%d DeleteTable requests for %s, want 1", n, table)
	}
	archiveExact(t, probe, p, before)
}

func retirementOf(rep archive.RotationReport, table string) *archive.Retirement {
	for i := range rep.Retirements {
		if rep.Retirements[i].Table == table {
			return &rep.Retirements[i]
		}
	}
	return nil
}

// rotateAtOnce moves the stack's clock past November's grace and runs
// three `ddbpipe tables rotate` and the scheduled rotator at once.
func rotateAtOnce(t *testing.T, env *stack.Env, table string, deletes *deleteCounter) {
	probe := rotatorAt(t, env, coldNovember, testLogger(t))
	before := scanOf(t, probe, table)
	if len(before) != 60 {
		t.Fatalf("%s holds %d items, want 60", table, len(before))
	}
	if err := env.MoveClock(time.Until(coldNovember)); err != nil {
		t.Fatal(err)
	}
	bin := clibin.Path(t, repoRoot(t), t.TempDir())
	vars := os.Environ()
	for k, v := range env.Vars {
		vars = append(vars, k+"="+v)
	}
	const clis = 3
	outs := make([]bytes.Buffer, clis)
	errs := make([]error, clis+1)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clis {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "tables", "rotate", "-drain-wait", "2m")
			cmd.Env, cmd.Dir = vars, t.TempDir()
			cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
			<-start
			errs[i] = cmd.Run()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		errs[clis] = env.Rotate(t.Context()) // the daily schedule's run
	}()
	close(start)
	wg.Wait()
	retired, held := 0, 0
	for i := range clis {
		out := outs[i].String()
		t.Logf("tables rotate #%d:\n%s", i+1, out)
		if errs[i] != nil || strings.Contains(out, "FAILED") {
			t.Errorf("tables rotate #%d: %v; want exit 0 and no step failed", i+1, errs[i])
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 4 && f[0] == table && f[1] == "delete" && f[2] == "ok":
				retired++
			case len(f) >= 4 && f[0] == table && f[1] == "lease" && f[3] == "held":
				held++
			}
		}
	}
	if errs[clis] != nil {
		t.Errorf("the scheduled rotator: %v, want no error", errs[clis])
	}
	if retired > 1 {
		t.Errorf("%d runs of tables rotate deleted %s, want at most one (or the function)", retired, table)
	}
	t.Logf("%d of the CLI runs retired the month, %d found it held by another run", retired, held)
	if tableExists(t, env, table) {
		t.Errorf("%s still exists", table)
	}
	if n := deletes.of(table); n != 1 {
		t.Errorf("%d DeleteTable requests for %s, want 1", n, table)
	}
	archiveExact(t, probe, archive.Partition{Table: env.Vars["LEDGER_TABLE_PREFIX"], Month: "2026-11"}, before)
	sameCounts(t, "retired at once", archivedVotes(t, env, "nov"), getResults(t, env, "nov").Totals)
}

// errCrashed is what a stopped run's calls return.
var errCrashed = errors.New("injected stop: the run died here")

// crash stops a run in the middle of a step, as a process that dies does:
// the first call named at once the run took a month's lease is made (its
// effect lands), and then it and every later call of the run fail,
// nothing of it reaching the stack any more, not even the release of its
// lease. It wraps the rotator's ports: Tables, Subscriptions, Partitions,
// Leases and Counted.
type crash struct {
	at      string
	mu      sync.Mutex
	armed   bool
	crashed bool
}

func (c *crash) down() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

func crashCall[T any](c *crash, name string, f func() (T, error)) (T, error) {
	var zero T
	if c.down() {
		return zero, errCrashed
	}
	v, err := f()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = c.armed || name == "Take"
	if c.armed && name == c.at {
		c.crashed = true
		return zero, errCrashed
	}
	return v, err
}

// crashAt makes r's run stop at the call named at.
func crashAt(r *archive.Rotator, at string) *crash {
	c := &crash{at: at}
	r.Tables = crashTables{r.Tables, c}
	r.Subscriptions = crashSubs{r.Subscriptions, c}
	r.Archive = crashParts{r.Archive, c}
	r.Leases = crashLeases{r.Leases, c}
	r.Counted = crashCounted{r.Counted, c}
	return c
}

type none struct{}

type crashTables struct {
	archive.Tables
	c *crash
}

func (t crashTables) List(ctx context.Context, base string) ([]archive.Table, error) {
	return crashCall(t.c, "List", func() ([]archive.Table, error) { return t.Tables.List(ctx, base) })
}
func (t crashTables) Describe(ctx context.Context, name string) (archive.Table, error) {
	return crashCall(t.c, "Describe", func() (archive.Table, error) { return t.Tables.Describe(ctx, name) })
}
func (t crashTables) Ensure(ctx context.Context, s archive.Spec) (archive.Table, bool, error) {
	var created bool
	tb, err := crashCall(t.c, "Ensure", func() (archive.Table, error) {
		tb, c, err := t.Tables.Ensure(ctx, s)
		created = c
		return tb, err
	})
	return tb, created, err
}
func (t crashTables) SetCapacity(ctx context.Context, name string, c archive.Capacity) error {
	_, err := crashCall(t.c, "SetCapacity", func() (none, error) { return none{}, t.Tables.SetCapacity(ctx, name, c) })
	return err
}
func (t crashTables) RaiseWarm(ctx context.Context, name string, w archive.Warm) (bool, error) {
	return crashCall(t.c, "RaiseWarm", func() (bool, error) { return t.Tables.RaiseWarm(ctx, name, w) })
}
func (t crashTables) DisableStream(ctx context.Context, name string) error {
	_, err := crashCall(t.c, "DisableStream", func() (none, error) { return none{}, t.Tables.DisableStream(ctx, name) })
	return err
}
func (t crashTables) Protect(ctx context.Context, name string, on bool) error {
	_, err := crashCall(t.c, "Protect", func() (none, error) { return none{}, t.Tables.Protect(ctx, name, on) })
	return err
}
func (t crashTables) Delete(ctx context.Context, name string) error {
	_, err := crashCall(t.c, "Delete", func() (none, error) { return none{}, t.Tables.Delete(ctx, name) })
	return err
}
func (t crashTables) Scan(ctx context.Context, name string, keep bool) (archive.Scan, error) {
	return crashCall(t.c, "Scan", func() (archive.Scan, error) { return t.Tables.Scan(ctx, name, keep) })
}

type crashSubs struct {
	archive.Subscriptions
	c *crash
}

func (s crashSubs) Ensure(ctx context.Context, arn string) (bool, error) {
	return crashCall(s.c, "Subscribe", func() (bool, error) { return s.Subscriptions.Ensure(ctx, arn) })
}
func (s crashSubs) Remove(ctx context.Context, arn string) (int, error) {
	return crashCall(s.c, "Unsubscribe", func() (int, error) { return s.Subscriptions.Remove(ctx, arn) })
}

type crashParts struct {
	archive.Partitions
	c *crash
}

func (p crashParts) Read(ctx context.Context, pt archive.Partition) (archive.Contents, error) {
	return crashCall(p.c, "Read", func() (archive.Contents, error) { return p.Partitions.Read(ctx, pt) })
}
func (p crashParts) Compact(ctx context.Context, pt archive.Partition, pol archive.CompactionPolicy, table string, v archive.Verification) (archive.Compaction, error) {
	return crashCall(p.c, "Compact", func() (archive.Compaction, error) { return p.Partitions.Compact(ctx, pt, pol, table, v) })
}
func (p crashParts) Write(ctx context.Context, key string, rows []archive.Row) (archive.File, error) {
	return crashCall(p.c, "Write", func() (archive.File, error) { return p.Partitions.Write(ctx, key, rows) })
}

type crashLeases struct {
	archive.Leases
	c *crash
}

func (l crashLeases) Take(ctx context.Context, ls archive.Lease, now time.Time) (archive.Lease, bool, error) {
	var taken bool
	other, err := crashCall(l.c, "Take", func() (archive.Lease, error) {
		o, tk, err := l.Leases.Take(ctx, ls, now)
		taken = tk
		return o, err
	})
	return other, taken, err
}
func (l crashLeases) Renew(ctx context.Context, ls archive.Lease) (archive.Lease, bool, error) {
	var kept bool
	other, err := crashCall(l.c, "Renew", func() (archive.Lease, error) {
		o, k, err := l.Leases.Renew(ctx, ls)
		kept = k
		return o, err
	})
	return other, kept, err
}
func (l crashLeases) Release(ctx context.Context, ls archive.Lease) error {
	_, err := crashCall(l.c, "Release", func() (none, error) { return none{}, l.Leases.Release(ctx, ls) })
	return err
}

type crashCounted struct {
	archive.Counted
	c *crash
}

func (n crashCounted) Uncounted(ctx context.Context, table string, recs []archive.StreamRecord) ([]archive.StreamRecord, error) {
	return crashCall(n.c, "Uncounted", func() ([]archive.StreamRecord, error) { return n.Counted.Uncounted(ctx, table, recs) })
}
func (n crashCounted) Tallied(ctx context.Context, table string) (int64, error) {
	return crashCall(n.c, "Tallied", func() (int64, error) { return n.Counted.Tallied(ctx, table) })
}

var (
	_ archive.Tables        = crashTables{}
	_ archive.Subscriptions = crashSubs{}
	_ archive.Partitions    = crashParts{}
	_ archive.Leases        = crashLeases{}
	_ archive.Counted       = crashCounted{}
)
