package archive

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAlreadyRetired(t *testing.T) {
	at := date(2026, 12, 3, 1)
	tests := []struct {
		name string
		c    Contents
		want bool
	}{
		{"no manifest", Contents{}, false},
		{"manifest without a verification", Contents{Manifest: &Manifest{}}, false},
		{"verification failed", Contents{Manifest: &Manifest{Verification: &Verification{At: at}}}, false},
		{"verified", Contents{Manifest: &Manifest{Verification: &Verification{At: at, OK: true}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.AlreadyRetired(); got != tt.want {
				t.Errorf("AlreadyRetired = %v, want %v", got, tt.want)
			}
		})
	}
}

// An archive that cannot be read says nothing about whether the month was
// retired: the retirement fails before any step, touching nothing, even
// when the month was retired and its table is back with its stream on.
func TestRetireFailsSafeWhenTheArchiveIsUnreadable(t *testing.T) {
	const table = "app-votes-2026-11"
	boom := errors.New("injected")
	tests := []struct {
		name    string
		arrange func(t *testing.T, w *world)
	}{
		{"never retired", func(*testing.T, *world) {}},
		{"retired, created again", func(t *testing.T, w *world) {
			if err := w.rotator(date(2026, 12, 3, 1)).Run(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := (memTables{w}).Ensure(context.Background(), Spec{Name: table, Month: "2026-11"}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := novemberWorld(t)
			tt.arrange(t, w)
			w.fail["read"] = boom
			calls := len(w.calls)
			ret := w.rotator(date(2026, 12, 4, 0)).Retire(context.Background(), w.table(table).Table)
			if ret.Outcome != Failed || !errors.Is(ret.Err, boom) || len(ret.Steps) != 1 || ret.Steps[0].Step != StepLease {
				t.Errorf("outcome %s, err %v, steps %v; want Failed on the read before any step but the lease", ret.Outcome, ret.Err, ret.Steps)
			}
			if l := w.lease(table); !l.IsZero() {
				t.Errorf("lease %+v kept, want it released", l)
			}
			if got := w.calls[calls:]; len(got) != 0 {
				t.Errorf("the retirement touched the table: %v", got)
			}
			if tb := w.table(table); tb == nil || !tb.StreamEnabled || !tb.DeletionProtection {
				t.Errorf("table %+v, want it kept, protected, its stream on", tb)
			}
		})
	}
}

// startNovember starts the retirement of November's table at now.
func startNovember(t *testing.T, w *world, now time.Time) *retirement {
	t.Helper()
	rt, ok := w.rotator(now).startRetirement(context.Background(), w.table("app-votes-2026-11").Table)
	if !ok {
		t.Fatalf("retirement did not start: %v", rt.ret.Err)
	}
	return rt
}

// walkTo runs the retirement's steps before step (those that apply).
func walkTo(t *testing.T, rt *retirement, step Step) {
	t.Helper()
	for _, s := range rt.steps() {
		if s.step == step {
			return
		}
		if s.when != nil && !s.when() {
			continue
		}
		if !rt.run(context.Background(), s) {
			t.Fatalf("step %s: %v", s.step, rt.ret.Err)
		}
	}
}

// Each step alone, from the state the steps before it leave.
func TestRetirementSteps(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("injected")
	tests := []struct {
		name    string
		arrange func(t *testing.T, w *world, rt *retirement)
		step    func(rt *retirement) func(context.Context) (string, error)
		detail  string
		err     bool
		stop    Outcome
		calls   []string
	}{
		{"ensure: nothing to change", nil,
			func(rt *retirement) func(context.Context) (string, error) { return rt.ensure },
			"nothing to change", false, "", nil},
		{"ensure: a provisioned table is lowered", func(_ *testing.T, _ *world, rt *retirement) { rt.t.Capacity = &Capacity{Read: 50, Write: 50} },
			func(rt *retirement) func(context.Context) (string, error) { return rt.ensure },
			"capacity lowered to 1/1", false, "", []string{"capacity app-votes-2026-11 1/1"}},
		{"drain: caught up", nil,
			func(rt *retirement) func(context.Context) (string, error) { return rt.drain },
			"archive and counters hold the last record of every shard", false, "", []string{"disable stream app-votes-2026-11"}},
		{"drain: behind stops NotDrained", func(t *testing.T, w *world, rt *retirement) {
			w.deliver = false
			w.put("app-votes-2026-11", "poll#p", "late", 1, date(2026, 11, 30, 23))
			rt.r.Sleep = func(context.Context, time.Duration) error { return nil }
		}, func(rt *retirement) func(context.Context) (string, error) { return rt.drain },
			"1 stream records not archived", false, NotDrained, []string{"disable stream app-votes-2026-11"}},
		{"verify: the archive holds the table", func(t *testing.T, w *world, rt *retirement) { walkTo(t, rt, StepVerify) },
			func(rt *retirement) func(context.Context) (string, error) { return rt.verify },
			"archive verified", false, "", nil},
		{"compact after a snapshot stops Alarm", func(t *testing.T, w *world, rt *retirement) {
			walkTo(t, rt, StepVerify)
			rt.verification = Verification{At: date(2026, 12, 3, 1), OK: true, Snapshot: true}
		}, func(rt *retirement) func(context.Context) (string, error) { return rt.compact },
			"manifest of", false, Alarm, nil},
		{"unprotect refused before compaction", func(_ *testing.T, _ *world, rt *retirement) { rt.verification.OK = true },
			func(rt *retirement) func(context.Context) (string, error) { return rt.unprotect },
			"", true, "", nil},
		{"unprotect refused after a snapshot", func(_ *testing.T, _ *world, rt *retirement) {
			rt.verification = Verification{OK: true, Snapshot: true}
			rt.ret.Compaction = &Compaction{}
		}, func(rt *retirement) func(context.Context) (string, error) { return rt.unprotect },
			"", true, "", nil},
		{"unsubscribe fails", func(_ *testing.T, w *world, _ *retirement) { w.fail["remove"] = boom },
			func(rt *retirement) func(context.Context) (string, error) { return rt.unsubscribe },
			"", true, "", nil},
		{"delete: protected table refused", nil,
			func(rt *retirement) func(context.Context) (string, error) { return rt.delete },
			"deleted", true, "", nil},
		{"delete: gone already", func(_ *testing.T, w *world, _ *retirement) { delete(w.tables, "app-votes-2026-11") },
			func(rt *retirement) func(context.Context) (string, error) { return rt.delete },
			"gone already", false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := novemberWorld(t)
			rt := startNovember(t, w, date(2026, 12, 3, 1))
			if tt.arrange != nil {
				tt.arrange(t, w, rt)
			}
			calls := len(w.calls)
			detail, err := tt.step(rt)(ctx)
			if !strings.Contains(detail, tt.detail) || (err != nil) != tt.err || rt.stop != tt.stop {
				t.Errorf("detail %q, err %v, stop %q; want %q, error %v, stop %q", detail, err, rt.stop, tt.detail, tt.err, tt.stop)
			}
			if tt.calls != nil && !slices.Equal(w.calls[calls:], tt.calls) {
				t.Errorf("calls %v, want %v", w.calls[calls:], tt.calls)
			}
			if slices.Contains(w.calls[calls:], "protect app-votes-2026-11 false") && tt.err {
				t.Errorf("protection lifted by a failed step: %v", w.calls[calls:])
			}
		})
	}
}

// The reverification alarms whatever it finds, and lets the compaction
// run only when the snapshot made the archive complete; its alarm is
// logged after the step is recorded.
func TestReverify(t *testing.T) {
	tests := []struct {
		name     string
		complete bool
		stop     Outcome
	}{
		{"complete after the snapshot", true, ""},
		{"still incomplete", false, Alarm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := novemberWorld(t)
			delete(w.files, w.fileKeys("table=app-votes/month=2026-11/")[1])
			rt := startNovember(t, w, date(2026, 12, 3, 1))
			walkTo(t, rt, StepSnapshot)
			if tt.complete {
				if !rt.run(context.Background(), retireStep{StepSnapshot, nil, rt.snapshot}) {
					t.Fatal(rt.ret.Err)
				}
			}
			if !rt.run(context.Background(), retireStep{StepReverify, nil, rt.reverify}) {
				t.Fatal(rt.ret.Err)
			}
			if rt.stop != tt.stop || rt.alarm != nil || rt.ret.Reverification == nil || rt.ret.Reverification.OK() != tt.complete {
				t.Errorf("stop %q, reverification %v, alarm pending %v; want stop %q", rt.stop, rt.ret.Reverification, rt.alarm != nil, tt.stop)
			}
			if got := rt.verification.Snapshot; got != tt.complete {
				t.Errorf("verification by snapshot %v, want %v", got, tt.complete)
			}
		})
	}
}
