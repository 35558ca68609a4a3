package archive

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOwns(t *testing.T) {
	pol := RotationPolicy{Prefix: "app-votes"}
	tests := []struct {
		name, table string
		month       string // "" when not owned
	}{
		{"own month", "app-votes-2026-11", "2026-11"},
		{"december", "app-votes-2026-12", "2026-12"},
		{"a copy", "app-votes-2026-11-old", ""},
		{"another stack extending the prefix", "app-votes-staging-2026-11", ""},
		{"another stack sharing the start", "app-votes2-2026-11", ""},
		{"another stack ending in the prefix", "other-app-votes-2026-11", ""},
		{"month 13", "app-votes-2026-13", ""},
		{"month 00", "app-votes-2026-00", ""},
		{"one-digit month", "app-votes-2026-1", ""},
		{"five-digit year", "app-votes-02026-11", ""},
		{"no month", "app-votes", ""},
		{"the objects table", "app-votes-objects", ""},
		{"other case", "App-votes-2026-11", ""},
		{"trailing space", "app-votes-2026-11 ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := pol.Owns(tt.table)
			if ok != (tt.month != "") || m != tt.month {
				t.Errorf("Owns(%q) = %q, %v; want %q", tt.table, m, ok, tt.month)
			}
		})
	}
	if _, ok := (RotationPolicy{}).Owns("-2026-11"); ok {
		t.Error("an empty prefix owns -2026-11")
	}
}

// Deletion protection is lifted only from a month verified archived and
// compacted: every way a retirement can stop short leaves the table there
// and protected, and protection is never turned off.
func TestProtectionStaysUnlessVerifiedAndCompacted(t *testing.T) {
	const table = "app-votes-2026-11"
	boom := errors.New("injected")
	tests := []struct {
		name    string
		arrange func(w *world, r *Rotator)
		want    Outcome
	}{
		{"stream not drained", func(w *world, r *Rotator) {
			w.deliver = false
			w.put(table, "poll#p", "late", 1, date(2026, 11, 30, 23))
			r.Sleep = func(context.Context, time.Duration) error { return nil }
		}, NotDrained},
		{"archive unreadable", func(w *world, _ *Rotator) { w.fail["read"] = boom }, Failed},
		{"verification scan fails", func(w *world, _ *Rotator) { w.fail["scan"] = boom }, Failed},
		{"archive incomplete: snapshot written, compacted, kept", func(w *world, _ *Rotator) {
			delete(w.files, w.fileKeys("table=app-votes/month=2026-11/")[1])
		}, Alarm},
		{"archive incomplete, snapshot not written", func(w *world, _ *Rotator) {
			delete(w.files, w.fileKeys("table=app-votes/month=2026-11/")[1])
			w.fail["write"] = boom
		}, Failed},
		{"compaction fails", func(w *world, _ *Rotator) { w.fail["compact"] = boom }, Failed},
		{"unsubscribe fails", func(w *world, _ *Rotator) { w.fail["remove"] = boom }, Failed},
		{"protect fails: no delete tried", func(w *world, _ *Rotator) { w.fail["protect"] = boom }, Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := novemberWorld(t)
			r := w.rotator(date(2026, 12, 3, 1))
			tt.arrange(w, r)
			rep := r.Run(context.Background())
			if len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != tt.want {
				t.Fatalf("retirements %+v, want one %s", rep.Retirements, tt.want)
			}
			tb := w.table(table)
			if tb == nil || !tb.DeletionProtection {
				t.Fatalf("table %+v, want it kept and protected", tb)
			}
			for _, c := range w.calls {
				if c == "protect "+table+" false" || c == "delete "+table {
					t.Errorf("called %q: %v", c, w.calls)
				}
			}
			steps := rep.Retirements[0].Steps
			if i := slices.IndexFunc(steps, func(s StepResult) bool { return s.Step == StepDelete }); i >= 0 {
				t.Errorf("delete step ran: %+v", steps[i])
			}
		})
	}
}

// The run that retires a month lifts its protection only after the
// verification passed and the compaction wrote the manifest recording it.
func TestProtectionLiftedAfterVerificationAndCompaction(t *testing.T) {
	w := novemberWorld(t)
	r := w.rotator(date(2026, 12, 3, 1))
	var seen []Step
	r.OnStep = func(table string, s StepResult) {
		if table != "app-votes-2026-11" {
			return
		}
		seen = append(seen, s.Step)
		if s.Step == StepUnprotect && !slices.Contains(seen, StepVerify) {
			t.Errorf("unprotect before verification: %v", seen)
		}
	}
	rep := r.Run(context.Background())
	ret := rep.Retirements[0]
	if ret.Outcome != Retired || ret.Verification == nil || !ret.Verification.OK() {
		t.Fatalf("retirement %s %v, want retired after a passing verification", ret.Outcome, ret.Verification)
	}
	if m := ret.Compaction.Manifest.Verification; m == nil || !m.OK || m.Snapshot || m.TableItems != 50 {
		t.Errorf("manifest verification %+v, want OK over 50 items without a snapshot", m)
	}
	want := []Step{StepLease, StepEnsure, StepDrain, StepVerify, StepCompact, StepUnsubscribe, StepUnprotect, StepDelete}
	if !slices.Equal(seen, want) {
		t.Errorf("steps %v, want %v", seen, want)
	}
}

// Tables that look like the rotator's but are not <prefix>-YYYY-MM are never
// touched, however cold their "month": not their stream, capacity,
// subscription or protection; Retire refuses them when asked directly.
func TestOnlyItsOwnTablesAreTouched(t *testing.T) {
	w := novemberWorld(t)
	lookAlikes := []string{
		"app-votes-2026-10-old", "app-votes-staging-2026-10", "app-votes-staging-2026-11", "app-votes2-2026-10",
		"other-app-votes-2026-10", "app-votes-2026-13", "app-votes-2026-1", "app-votes-objects", "app-votes-2026-10-2026-10",
	}
	for _, name := range lookAlikes {
		if _, _, err := (memTables{w}).Ensure(context.Background(), Spec{Name: name}); err != nil {
			t.Fatal(err)
		}
		w.tables[name].Capacity = &Capacity{Read: 50, Write: 50}
		w.subs["arn:stream/"+name] = 1
		w.put(name, "poll#p", "v", 1, date(2026, 10, 2, 0))
	}
	w.pump()
	setup := len(w.calls)
	r := w.rotator(date(2027, 3, 1, 0))
	rep := r.Run(context.Background())
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Retirements) != 1 || rep.Retirements[0].Table != "app-votes-2026-11" || rep.Retirements[0].Outcome != Retired {
		t.Fatalf("retirements %+v, want only app-votes-2026-11, retired", rep.Retirements)
	}
	touched := func(calls []string) []string {
		var out []string
		for _, c := range calls {
			for _, f := range strings.Fields(c) {
				if slices.Contains(lookAlikes, strings.TrimPrefix(f, "arn:stream/")) || strings.Contains(f, "table="+"app-votes-staging") {
					out = append(out, c)
				}
			}
		}
		return out
	}
	if got := touched(w.calls[setup:]); len(got) > 0 {
		t.Errorf("look-alike tables touched: %v", got)
	}
	for _, name := range lookAlikes {
		tb := w.table(name)
		if tb == nil || !tb.DeletionProtection || !tb.StreamEnabled || tb.Capacity.Read != 50 || w.subs["arn:stream/"+name] != 1 {
			t.Errorf("%s changed: %+v, %d subscriptions", name, tb, w.subs["arn:stream/"+name])
		}
	}
	// Asked directly, Retire refuses them before any call.
	before := len(w.calls)
	for _, name := range lookAlikes {
		ret := r.Retire(context.Background(), w.table(name).Table)
		if ret.Outcome != Failed || ret.Err == nil || len(ret.Steps) != 0 {
			t.Errorf("Retire(%s) = %s %v %v, want refused before any step", name, ret.Outcome, ret.Err, ret.Steps)
		}
	}
	if got := w.calls[before:]; len(got) > 0 {
		t.Errorf("Retire of look-alikes called %v", got)
	}
}
