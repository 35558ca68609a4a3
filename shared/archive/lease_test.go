package archive

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// errCrashed is what a run's calls return once it has crashed.
var errCrashed = errors.New("injected crash: the run stopped here")

// crash stops a run in the middle of a step, as a process that dies does:
// the first call named at once the run took a lease is made (its effect
// lands), and then it and every later call of the run fail, so nothing
// the run does reaches the world any more, not even the release of its
// lease.
type crash struct {
	at      string
	mu      sync.Mutex
	armed   bool
	crashed bool
}

func crashCall[T any](c *crash, name string, f func() (T, error)) (T, error) {
	var zero T
	c.mu.Lock()
	down := c.crashed
	c.mu.Unlock()
	if down {
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

func (c *crash) down() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

type crashTables struct {
	Tables
	c *crash
}

type none struct{}

func (t crashTables) List(ctx context.Context, base string) ([]Table, error) {
	return crashCall(t.c, "List", func() ([]Table, error) { return t.Tables.List(ctx, base) })
}
func (t crashTables) Describe(ctx context.Context, name string) (Table, error) {
	return crashCall(t.c, "Describe", func() (Table, error) { return t.Tables.Describe(ctx, name) })
}
func (t crashTables) Ensure(ctx context.Context, s Spec) (Table, bool, error) {
	var created bool
	tb, err := crashCall(t.c, "Ensure", func() (Table, error) {
		tb, c, err := t.Tables.Ensure(ctx, s)
		created = c
		return tb, err
	})
	return tb, created, err
}
func (t crashTables) SetCapacity(ctx context.Context, name string, c Capacity) error {
	_, err := crashCall(t.c, "SetCapacity", func() (none, error) { return none{}, t.Tables.SetCapacity(ctx, name, c) })
	return err
}
func (t crashTables) RaiseWarm(ctx context.Context, name string, w Warm) (bool, error) {
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
func (t crashTables) Scan(ctx context.Context, name string, keep bool) (Scan, error) {
	return crashCall(t.c, "Scan", func() (Scan, error) { return t.Tables.Scan(ctx, name, keep) })
}

type crashSubs struct {
	Subscriptions
	c *crash
}

func (s crashSubs) Ensure(ctx context.Context, arn string) (bool, error) {
	return crashCall(s.c, "Subscribe", func() (bool, error) { return s.Subscriptions.Ensure(ctx, arn) })
}
func (s crashSubs) Remove(ctx context.Context, arn string) (int, error) {
	return crashCall(s.c, "Unsubscribe", func() (int, error) { return s.Subscriptions.Remove(ctx, arn) })
}

type crashParts struct {
	Partitions
	c *crash
}

func (p crashParts) Read(ctx context.Context, pt Partition) (Contents, error) {
	return crashCall(p.c, "Read", func() (Contents, error) { return p.Partitions.Read(ctx, pt) })
}
func (p crashParts) Compact(ctx context.Context, pt Partition, pol CompactionPolicy, table string, v Verification) (Compaction, error) {
	return crashCall(p.c, "Compact", func() (Compaction, error) { return p.Partitions.Compact(ctx, pt, pol, table, v) })
}
func (p crashParts) Write(ctx context.Context, key string, rows []Row) (File, error) {
	return crashCall(p.c, "Write", func() (File, error) { return p.Partitions.Write(ctx, key, rows) })
}

type crashLeases struct {
	Leases
	c *crash
}

func (l crashLeases) Take(ctx context.Context, ls Lease, now time.Time) (Lease, bool, error) {
	var taken bool
	other, err := crashCall(l.c, "Take", func() (Lease, error) {
		o, t, err := l.Leases.Take(ctx, ls, now)
		taken = t
		return o, err
	})
	return other, taken, err
}
func (l crashLeases) Renew(ctx context.Context, ls Lease) (Lease, bool, error) {
	var kept bool
	other, err := crashCall(l.c, "Renew", func() (Lease, error) {
		o, k, err := l.Leases.Renew(ctx, ls)
		kept = k
		return o, err
	})
	return other, kept, err
}
func (l crashLeases) Release(ctx context.Context, ls Lease) error {
	_, err := crashCall(l.c, "Release", func() (none, error) { return none{}, l.Leases.Release(ctx, ls) })
	return err
}

var (
	_ Tables        = crashTables{}
	_ Subscriptions = crashSubs{}
	_ Partitions    = crashParts{}
	_ Leases        = crashLeases{}
)

// crashing makes r's run crash at the call named at.
func crashing(r *Rotator, at string) *crash {
	c := &crash{at: at}
	r.Tables, r.Subscriptions = crashTables{r.Tables, c}, crashSubs{r.Subscriptions, c}
	r.Archive, r.Leases = crashParts{r.Archive, c}, crashLeases{r.Leases, c}
	return c
}

// A run that finds the month's lease held by another leaves the month
// alone, says who holds it, since when and where it is, and does not fail.
func TestHeldLeaseLeavesTheMonthAlone(t *testing.T) {
	w := novemberWorld(t)
	since := date(2026, 12, 3, 0).Add(55 * time.Minute)
	holder := Lease{Table: "app-votes-2026-11", Holder: "the scheduled rotator (request 42)", Run: "other", Since: since, Step: StepDrain, Expires: since.Add(15 * time.Minute)}
	w.leases[holder.Table] = holder
	calls := len(w.calls)
	r := w.rotator(date(2026, 12, 3, 1))
	rep := r.Run(context.Background())
	if err := rep.Err(); err != nil {
		t.Fatalf("run: %v, want no error: another run's work is not a failure", err)
	}
	if len(rep.Retirements) != 1 {
		t.Fatalf("retirements %+v", rep.Retirements)
	}
	ret := rep.Retirements[0]
	if ret.Outcome != HeldByAnother || ret.HeldBy != holder || rep.Retired() != 0 {
		t.Errorf("outcome %s, held by %+v; want held by %+v", ret.Outcome, ret.HeldBy, holder)
	}
	want := "held by the scheduled rotator (request 42) since 2026-12-03T00:55:00Z, at step drain, until 2026-12-03T01:10:00Z: left to it"
	if len(ret.Steps) != 1 || ret.Steps[0].Step != StepLease || ret.Steps[0].Detail != want {
		t.Errorf("steps %+v, want one lease step %q", ret.Steps, want)
	}
	for _, c := range w.calls[calls:] {
		if strings.Contains(c, "2026-11") {
			t.Errorf("the run touched November: %s", c)
		}
	}
	if got := w.lease(holder.Table); got != holder {
		t.Errorf("lease %+v, want the holder's left as it was", got)
	}
}

// The lease is renewed before each step, naming it, and released at the
// end; its expiry follows the lease clock, not the run's time.
func TestLeaseRenewedAtEachStepAndReleased(t *testing.T) {
	w := novemberWorld(t)
	r := w.rotator(date(2026, 12, 3, 1))
	r.RunID = "run-1"
	w.setLeaseClock(date(2026, 12, 3, 5))
	var expiries []time.Time
	r.OnStep = func(table string, s StepResult) {
		if l := w.lease(table); table == "app-votes-2026-11" && !l.IsZero() {
			expiries = append(expiries, l.Expires)
		}
	}
	ret := r.Run(context.Background()).Retirements[0]
	if ret.Outcome != Retired {
		t.Fatalf("outcome %s (%v)", ret.Outcome, ret.Err)
	}
	var got []string
	for _, c := range w.leaseCalls {
		got = append(got, strings.TrimPrefix(c, "renew app-votes-2026-11 run-1 "))
	}
	want := []string{"take app-votes-2026-11 run-1", "ensure", "drain", "verify", "compact", "unsubscribe", "unprotect", "delete", "release app-votes-2026-11 run-1"}
	if !slices.Equal(got, want) {
		t.Errorf("lease calls %q, want %q", got, want)
	}
	for _, e := range expiries {
		if !e.Equal(date(2026, 12, 3, 5).Add(DefaultLeaseFor)) {
			t.Errorf("expiry %s, want the lease clock + %s", e, DefaultLeaseFor)
		}
	}
	if ret.Lease.Step != StepDelete || ret.Lease.Run != "run-1" {
		t.Errorf("lease as last held %+v, want run-1's at step delete", ret.Lease)
	}
}

// A run stopped in the middle of any step keeps the month's lease: a run
// before it lapses leaves the month alone; the first after it takes it
// over and resumes where the first stopped, each step done says so, and
// the month is retired once, its archive holding the table exactly.
func TestCrashedRunIsResumedOnceItsLeaseLapses(t *testing.T) {
	tests := []struct {
		at        string // the call the run dies right after
		stoppedAt Step
		says      map[Step]string // what the resuming run's steps say
	}{
		{"Take", StepLease, nil},
		{"Subscribe", StepEnsure, nil},
		{"DisableStream", StepDrain, map[Step]string{StepDrain: "stream off: already"}},
		{"Scan", StepVerify, map[Step]string{StepDrain: "stream off: already"}},
		{"Compact", StepCompact, map[Step]string{StepDrain: "stream off: already; drained by the run of"}},
		{"Unsubscribe", StepUnsubscribe, map[Step]string{StepUnsubscribe: "no mappings: removed already"}},
		{"Protect", StepUnprotect, map[Step]string{StepUnprotect: "deletion protection off: already"}},
		{"Delete", StepDelete, nil},
	}
	for _, tt := range tests {
		t.Run(tt.at, func(t *testing.T) {
			ctx := context.Background()
			w := novemberWorld(t)
			before, err := (memTables{w}).Scan(ctx, "app-votes-2026-11", false)
			if err != nil {
				t.Fatal(err)
			}
			at := date(2026, 12, 3, 1)
			first := w.rotator(at)
			first.Holder = "the scheduled rotator"
			c := crashing(first, tt.at)
			crashed := first.Run(ctx)
			if !c.down() || len(crashed.Retirements) != 1 || crashed.Retirements[0].Outcome != Failed {
				t.Fatalf("the first run: crashed %v, %+v; want it stopped at %s", c.down(), crashed.Retirements, tt.at)
			}
			lease := w.lease("app-votes-2026-11")
			if lease.Holder != "the scheduled rotator" || lease.Step != tt.stoppedAt {
				t.Fatalf("lease after the crash %+v, want the crashed run's at step %s", lease, tt.stoppedAt)
			}

			// Before the lease lapses: left alone, not failed.
			w.setLeaseClock(lease.Expires.Add(-time.Second))
			rep := w.rotator(at).Run(ctx)
			if tt.at == "Delete" {
				// The table is gone: there is nothing left to retire.
				if len(rep.Retirements) != 0 || rep.Err() != nil {
					t.Errorf("after a crash at the delete: %+v, %v; want nothing to do", rep.Retirements, rep.Err())
				}
			} else if rep.Err() != nil || len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != HeldByAnother {
				t.Errorf("a run before the lease lapsed: %+v, %v; want the month held by another run", rep.Retirements, rep.Err())
			}

			// Once it lapsed: taken over, resumed, retired.
			w.setLeaseClock(lease.Expires.Add(time.Second))
			next := w.rotator(at)
			next.Holder = "ddbpipe tables rotate"
			steps := map[Step]string{}
			next.OnStep = func(table string, s StepResult) {
				if table == "app-votes-2026-11" {
					steps[s.Step] = s.Detail
				}
			}
			rep = next.Run(ctx)
			if err := rep.Err(); err != nil {
				t.Fatalf("the resuming run: %v", err)
			}
			if tt.at != "Delete" {
				if len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != Retired {
					t.Fatalf("the resuming run: %+v, want November retired", rep.Retirements)
				}
				ret := rep.Retirements[0]
				if ret.TookOver.Holder != "the scheduled rotator" || ret.TookOver.Step != tt.stoppedAt {
					t.Errorf("took over %+v, want the crashed run's lease at %s", ret.TookOver, tt.stoppedAt)
				}
				if d := steps[StepLease]; !strings.Contains(d, "took over from the scheduled rotator, which stopped at step "+string(tt.stoppedAt)) {
					t.Errorf("lease step %q, want it to say whose lease it took over and where that run stopped", d)
				}
				for step, want := range tt.says {
					if !strings.Contains(steps[step], want) {
						t.Errorf("step %s said %q, want %q", step, steps[step], want)
					}
				}
			}
			if n := countCalls(w, "delete app-votes-2026-11"); n != 1 {
				t.Errorf("%d deletes of November, want 1", n)
			}
			c2, err := (memArchive{w}).Read(ctx, Partition{Table: "app-votes", Month: "2026-11"})
			if err != nil {
				t.Fatal(err)
			}
			if v := Verify(c2.State, before.State); !v.OK() || v.TableItems != 50 || !c2.AlreadyRetired() {
				t.Errorf("the archive against the table before: %s, retired %v; want it exact and retired", v, c2.AlreadyRetired())
			}
			if tt.at != "Delete" && !w.lease("app-votes-2026-11").IsZero() {
				t.Errorf("lease %+v left, want it released", w.lease("app-votes-2026-11"))
			}
		})
	}
}

// A run whose lease lapsed while a step worked, and was taken over by
// another run, stops before its next step: it deletes nothing.
func TestLostLeaseStopsTheRun(t *testing.T) {
	w := novemberWorld(t)
	r := w.rotator(date(2026, 12, 3, 1))
	other := Lease{Table: "app-votes-2026-11", Holder: "ddbpipe tables rotate", Run: "other", Since: date(2026, 12, 3, 2), Step: StepVerify, Expires: date(2026, 12, 3, 3)}
	r.OnStep = func(table string, s StepResult) {
		if table == "app-votes-2026-11" && s.Step == StepVerify {
			w.mu.Lock()
			w.leases[table] = other // this run's lapsed; another took it over
			w.mu.Unlock()
		}
	}
	rep := r.Run(context.Background())
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	ret := rep.Retirements[0]
	if ret.Outcome != HeldByAnother || ret.HeldBy != other {
		t.Errorf("outcome %s, held by %+v; want the run that took over", ret.Outcome, ret.HeldBy)
	}
	if last := ret.Steps[len(ret.Steps)-1]; last.Step != StepLease || !strings.Contains(last.Detail, "lost before compact") {
		t.Errorf("last step %+v, want the lease lost before the compaction", last)
	}
	if w.table("app-votes-2026-11") == nil || countCalls(w, "compact") != 0 {
		t.Errorf("the run went on after losing its lease: %v", w.calls)
	}
	if got := w.lease("app-votes-2026-11"); got != other {
		t.Errorf("lease %+v, want the other run's left as it is", got)
	}
}

// A lease that cannot be taken or renewed fails the retirement before it
// touches the table, and the next run resumes.
func TestLeaseStoreFailures(t *testing.T) {
	for _, op := range []string{"take", "renew"} {
		t.Run(op, func(t *testing.T) {
			w := novemberWorld(t)
			w.fail[op] = errors.New("throttled")
			calls := len(w.calls)
			ret := w.rotator(date(2026, 12, 3, 1)).Run(context.Background()).Retirements[0]
			if ret.Outcome != Failed || ret.Err == nil || !strings.Contains(ret.Err.Error(), "lease") {
				t.Errorf("outcome %s, err %v; want failed on the lease", ret.Outcome, ret.Err)
			}
			for _, c := range w.calls[calls:] {
				if strings.Contains(c, "2026-11") {
					t.Errorf("the run touched November: %s", c)
				}
			}
			delete(w.fail, op)
			if ret := w.rotator(date(2026, 12, 3, 1)).Run(context.Background()).Retirements[0]; ret.Outcome != Retired {
				t.Errorf("the next run: %s (%v), want retired", ret.Outcome, ret.Err)
			}
		})
	}
}

// A run that lists the table before another retires it, and gets to it
// after, says the month was retired by another run: not failed, not
// retired twice.
func TestTableGoneUnderTheLeaseIsRetiredByAnother(t *testing.T) {
	w := novemberWorld(t)
	listed := w.table("app-votes-2026-11").Table
	if rep := w.rotator(date(2026, 12, 3, 1)).Run(context.Background()); rep.Retired() != 1 {
		t.Fatalf("first run: %+v", rep.Retirements)
	}
	ret := w.rotator(date(2026, 12, 3, 1)).Retire(context.Background(), listed)
	if ret.Outcome != RetiredByAnother || ret.Err != nil {
		t.Errorf("outcome %s (%v), want retired by another run", ret.Outcome, ret.Err)
	}
	if len(ret.Steps) != 1 || !strings.Contains(ret.Steps[0].Detail, "the table is gone: another run retired the month") {
		t.Errorf("steps %+v, want the lease step saying so", ret.Steps)
	}
	if n := countCalls(w, "delete app-votes-2026-11"); n != 1 {
		t.Errorf("%d deletes, want 1", n)
	}
}

// The heartbeat renews the lease while a step works, with the lease
// clock's time, until it is stopped.
func TestHeartbeatRenews(t *testing.T) {
	w := newWorld()
	at := date(2026, 12, 3, 1)
	l := Lease{Table: "app-votes-2026-11", Holder: "h", Run: "r", Since: at, Step: StepVerify, Expires: at.Add(time.Minute)}
	w.leases[l.Table] = l
	h := &holding{leases: memLeases{w}, clock: func() time.Time { return at.Add(time.Hour) }, dur: time.Minute, lease: l}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.heartbeat(ctx, time.Millisecond) }()
	deadline := time.Now().Add(30 * time.Second)
	for w.lease(l.Table).Expires.Equal(l.Expires) {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat never renewed the lease")
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	if got := w.lease(l.Table); !got.Expires.Equal(at.Add(time.Hour+time.Minute)) || got.Step != StepVerify {
		t.Errorf("lease %+v, want it renewed to the clock + a minute, still at verify", got)
	}
}
