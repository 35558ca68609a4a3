package archive

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func date(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }

func TestPlan(t *testing.T) {
	pol := RotationPolicy{Prefix: "app-votes", GraceDays: 2}
	existing := []string{"app-votes-2026-10", "app-votes-2026-11", "app-votes-2026-12", "app-votes-objects", "app-votes-2026-13", "app-votes-x-2026-11"}
	tests := []struct {
		name               string
		now                time.Time
		ensure, keep, gone []string
	}{
		{"in grace", date(2026, 12, 2, 23), []string{"app-votes-2026-12", "app-votes-2027-01"}, []string{"app-votes-2026-11"}, []string{"app-votes-2026-10"}},
		{"grace over, within the fence margin", date(2026, 12, 3, 0), []string{"app-votes-2026-12", "app-votes-2027-01"}, []string{"app-votes-2026-11"}, []string{"app-votes-2026-10"}},
		{"cold", date(2026, 12, 3, 1), []string{"app-votes-2026-12", "app-votes-2027-01"}, nil, []string{"app-votes-2026-10", "app-votes-2026-11"}},
		{"mid month", date(2026, 11, 21, 19), []string{"app-votes-2026-11", "app-votes-2026-12"}, nil, []string{"app-votes-2026-10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pol.Plan(tt.now, existing)
			if !reflect.DeepEqual(got.Ensure, tt.ensure) || !reflect.DeepEqual(got.Keep, tt.keep) || !reflect.DeepEqual(got.Retire, tt.gone) {
				t.Errorf("plan at %s: ensure %v keep %v retire %v; want %v %v %v", tt.now, got.Ensure, got.Keep, got.Retire, tt.ensure, tt.keep, tt.gone)
			}
		})
	}
}

// novemberWorld has a November ledger with 50 items, 10 of them updated,
// delivered to the archive in batches while it was written.
func novemberWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld()
	if _, _, err := (memTables{w}).Ensure(context.Background(), Spec{Name: "app-votes-2026-11"}); err != nil {
		t.Fatal(err)
	}
	w.subs["arn:stream/app-votes-2026-11"] = 1
	at := date(2026, 11, 20, 10)
	for i := range 50 {
		w.put("app-votes-2026-11", "poll#p", "voter-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1, at)
		if i%10 == 9 {
			w.pump()
		}
	}
	for i := range 10 {
		w.put("app-votes-2026-11", "poll#p", "voter-"+string(rune('a'+i))+"a", 2, at.Add(time.Hour))
		w.pump()
	}
	return w
}

func TestRunRetiresAColdMonth(t *testing.T) {
	w := novemberWorld(t)
	var steps []Step
	r := w.rotator(date(2026, 12, 3, 1))
	r.OnStep = func(table string, s StepResult) {
		if table == "app-votes-2026-11" {
			steps = append(steps, s.Step)
		}
	}
	rep := r.Run(context.Background())
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"app-votes-2026-12", "app-votes-2027-01"}; !reflect.DeepEqual(rep.Created, want) {
		t.Errorf("created %v, want %v", rep.Created, want)
	}
	if len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != Retired {
		t.Fatalf("retirements %+v, want November retired", rep.Retirements)
	}
	want := []Step{StepLease, StepEnsure, StepDrain, StepVerify, StepCompact, StepUnsubscribe, StepUnprotect, StepDelete}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}
	if w.table("app-votes-2026-11") != nil {
		t.Error("November's table is still there")
	}
	ret := rep.Retirements[0]
	if ret.Verification == nil || !ret.Verification.OK() || ret.Verification.TableItems != 50 {
		t.Errorf("verification %+v, want 50 items matching", ret.Verification)
	}
	if files := w.fileKeys("table=app-votes/month=2026-11/"); len(files) != 1 {
		t.Errorf("files after compaction %v, want one", files)
	}
	if c := ret.Compaction; c == nil || c.FilesBefore != 15 || c.FilesAfter != 1 || c.Manifest.Rows != 60 {
		t.Errorf("compaction %+v, want 15 files → 1 holding 60 rows", c)
	}
	// The order that matters: stream off before the drain check, the
	// subscription removed and protection off only after compaction.
	order := func(prefix string) int {
		return slices.IndexFunc(w.calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
	}
	if !(order("close app-votes-2026-11") < order("disable stream") && order("disable stream") < order("compact") && order("compact") < order("unsubscribe") &&
		order("unsubscribe") < order("protect app-votes-2026-11 false") && order("protect app-votes-2026-11 false") < order("delete")) {
		t.Errorf("calls out of order: %v", w.calls)
	}
	// New tables are subscribed.
	for _, name := range []string{"app-votes-2026-12", "app-votes-2027-01"} {
		if w.subs["arn:stream/"+name] != 1 {
			t.Errorf("%s has %d subscriptions, want 1", name, w.subs["arn:stream/"+name])
		}
	}
}

func TestRunTwiceChangesNothing(t *testing.T) {
	w := novemberWorld(t)
	r := w.rotator(date(2026, 12, 3, 1))
	if err := r.Run(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	calls, files := len(w.calls), w.fileKeys("")
	rep := r.Run(context.Background())
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Created)+len(rep.Subscribed)+len(rep.Retirements) != 0 || len(w.calls) != calls {
		t.Errorf("second run did something: %+v, calls %v", rep, w.calls[calls:])
	}
	if got := w.fileKeys(""); !reflect.DeepEqual(got, files) {
		t.Errorf("files changed: %v → %v", files, got)
	}
}

// Two runs retire the same month at once (the schedule's and an
// operator's): the one that comes while the other works finds the month's
// lease held, says by whom and since when, touches nothing and does not
// fail; the first retires the month, once.
func TestRunsRacingForAMonthOneRetiresIt(t *testing.T) {
	for _, at := range []Step{StepLease, StepEnsure, StepDrain, StepVerify, StepCompact, StepUnsubscribe, StepUnprotect} {
		t.Run("the other comes after "+string(at), func(t *testing.T) {
			w := novemberWorld(t)
			first, other := w.rotator(date(2026, 12, 3, 1)), w.rotator(date(2026, 12, 3, 1))
			first.Holder, other.Holder = "the scheduled rotator", "ddbpipe tables rotate"
			var otherRep RotationReport
			var otherCalls []string
			first.OnStep = func(table string, s StepResult) {
				if table == "app-votes-2026-11" && s.Step == at && otherRep.Retirements == nil {
					before := len(w.calls)
					otherRep = other.Run(context.Background())
					otherCalls = w.calls[before:]
				}
			}
			rep := first.Run(context.Background())
			if err := otherRep.Err(); err != nil || len(otherRep.Retirements) != 1 || otherRep.Retirements[0].Outcome != HeldByAnother {
				t.Fatalf("the other run: %+v, %v; want November held by another run", otherRep.Retirements, err)
			}
			held := otherRep.Retirements[0]
			if len(held.Steps) != 1 || !strings.Contains(held.Steps[0].Detail, "held by the scheduled rotator since 2026-12-03T01:00:00Z") ||
				held.HeldBy.Holder != "the scheduled rotator" {
				t.Errorf("the other run's steps %+v, want one lease step saying who holds it and since when", held.Steps)
			}
			for _, c := range otherCalls {
				if strings.Contains(c, "2026-11") {
					t.Errorf("the other run touched November: %s", c)
				}
			}
			if err := rep.Err(); err != nil || len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != Retired {
				t.Fatalf("the first run: %+v, %v; want November retired", rep.Retirements, err)
			}
			if n := countCalls(w, "delete app-votes-2026-11"); n != 1 {
				t.Errorf("%d deletes of November, want 1", n)
			}
			if !w.lease("app-votes-2026-11").IsZero() {
				t.Errorf("lease %+v left after the retirement, want it released", w.lease("app-votes-2026-11"))
			}
		})
	}
}

// countCalls counts the world's calls that begin with prefix.
func countCalls(w *world, prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func TestNotDrainedKeepsTheTable(t *testing.T) {
	w := novemberWorld(t)
	w.deliver = false
	w.put("app-votes-2026-11", "poll#p", "late", 1, date(2026, 11, 30, 23))
	r := w.rotator(date(2026, 12, 3, 1))
	var slept time.Duration
	r.Sleep = func(_ context.Context, d time.Duration) error { slept += d; return nil }
	rep := r.Run(context.Background())
	ret := rep.Retirements[0]
	if ret.Outcome != NotDrained || ret.Err != nil {
		t.Fatalf("outcome %s (%v), want not-drained", ret.Outcome, ret.Err)
	}
	if slept > r.Policy.DrainWait {
		t.Errorf("waited %s, more than DrainWait %s", slept, r.Policy.DrainWait)
	}
	if want := (50 * time.Hour).Seconds(); ret.LagSeconds != want {
		t.Errorf("lag %.0fs, want %.0fs (the late record's age)", ret.LagSeconds, want)
	}
	if w.table("app-votes-2026-11") == nil {
		t.Error("an undrained table was deleted")
	}
	// The next run, with the archiver caught up, retires it.
	w.deliver = true
	rep = w.rotator(date(2026, 12, 4, 0)).Run(context.Background())
	if ret := rep.Retirements[0]; ret.Outcome != Retired || ret.Verification.TableItems != 51 {
		t.Errorf("second run: %s %+v, want retired with 51 items", ret.Outcome, ret.Verification)
	}
}

func TestMissingFileTakesTheSnapshotPath(t *testing.T) {
	w := novemberWorld(t)
	lost := w.fileKeys("table=app-votes/month=2026-11/")[1] // items 10–19, never updated since
	delete(w.files, lost)
	// The lost file is not the stream's last: the drain check passes (the
	// shard was delivered to its end) and the verification finds the loss.
	rep := w.rotator(date(2026, 12, 3, 1)).Run(context.Background())
	ret := rep.Retirements[0]
	if ret.Outcome != Alarm || ret.Err != nil {
		t.Fatalf("outcome %s (%v), want alarm", ret.Outcome, ret.Err)
	}
	if ret.Verification.OK() || len(ret.Verification.Missing) == 0 {
		t.Errorf("first verification %v, want items missing", ret.Verification)
	}
	if ret.Reverification == nil || !ret.Reverification.OK() {
		t.Errorf("verification after the snapshot: %v, want OK", ret.Reverification)
	}
	if w.table("app-votes-2026-11") == nil {
		t.Fatal("the table was deleted in the run that found the archive incomplete")
	}
	// The snapshot holds only the difference: the lost file's 10 items.
	if ret.Snapshot != (Backfill{Missing: 10}) || len(ret.Verification.Missing) != 10 {
		t.Errorf("snapshot %s for %d missing items, want the 10 items of the lost file only", ret.Snapshot, len(ret.Verification.Missing))
	}
	if ret.Compaction == nil || ret.Compaction.Manifest.Verification == nil || !ret.Compaction.Manifest.Verification.Snapshot {
		t.Errorf("manifest %+v, want one recording the snapshot", ret.Compaction)
	}
	// The archive is complete now; the next run verifies it and retires the table.
	rep = w.rotator(date(2026, 12, 4, 0)).Run(context.Background())
	if ret := rep.Retirements[0]; ret.Outcome != Retired || !ret.Verification.OK() {
		t.Errorf("next run: %s %v, want retired", ret.Outcome, ret.Verification)
	}
}

// A snapshot holds only the difference, so it must not overwrite an
// earlier one: a run again with the same clock (tables rotate -now) that
// finds a snapshot file of the same instant writes the whole table there.
func TestSnapshotOfTheSameInstantWritesTheWholeTable(t *testing.T) {
	w := novemberWorld(t)
	p := Partition{Table: "app-votes", Month: "2026-11"}
	lost := w.fileKeys(p.Prefix())[1] // items 10–19
	at := date(2026, 12, 3, 1)
	// An earlier run at the same instant wrote 3 of them, then the rest
	// of that file went too.
	w.files[SnapshotKey(p, at)] = w.files[lost][:3]
	delete(w.files, lost)
	rep := w.rotator(at).Run(context.Background())
	ret := rep.Retirements[0]
	if ret.Outcome != Alarm || ret.Err != nil || ret.Reverification == nil || !ret.Reverification.OK() {
		t.Fatalf("outcome %s (%v), reverification %v; want an alarm and the archive complete", ret.Outcome, ret.Err, ret.Reverification)
	}
	if len(ret.Verification.Missing) != 7 || ret.Snapshot != (Backfill{Missing: 7, Unchanged: 43}) {
		t.Errorf("%d missing, snapshot %s; want the whole table (7 missing, 43 unchanged)", len(ret.Verification.Missing), ret.Snapshot)
	}
}

func TestColdProvisionedTableIsLowered(t *testing.T) {
	w := novemberWorld(t)
	w.tables["app-votes-2026-11"].Capacity = &Capacity{Read: 50, Write: 100}
	w.deliver = false
	w.put("app-votes-2026-11", "poll#p", "late", 1, date(2026, 11, 30, 23))
	r := w.rotator(date(2026, 12, 3, 1))
	r.Sleep = func(context.Context, time.Duration) error { return nil }
	r.Run(context.Background())
	if c := w.table("app-votes-2026-11").Capacity; c == nil || *c != (Capacity{Read: 1, Write: 1}) {
		t.Errorf("capacity %+v, want 1/1", c)
	}
}

func TestSnapshotRowsReplayToTheTable(t *testing.T) {
	p := Partition{Table: "app-votes", Month: "2026-11"}
	a := Item{"pk": "a", "sk": "1", "n": Number("1")}
	b := Item{"pk": "b", "sk": "1", "n": Number("2")}
	ka, _ := KeyJSON(a, "pk", "sk")
	kb, _ := KeyJSON(b, "pk", "sk")
	ia, _ := ImageJSON(a)
	ib, _ := ImageJSON(b)
	sa, _ := Checksum(a)
	sb, _ := Checksum(b)
	scan := Scan{State: State{ka: sa, kb: sb}, Images: map[string]string{ka: ia, kb: ib}}
	// The archive holds an old image of a, nothing of b, and a key the table lost.
	stale := Row{Table: p.Table, Month: p.Month, Stream: "s", EventName: EventInsert, SequenceNumber: "100000000000000000001",
		Keys: ka, NewImage: `{"n":"0","pk":"a","sk":"1"}`}
	extra := Row{Table: p.Table, Month: p.Month, Stream: "s", EventName: EventInsert, SequenceNumber: "100000000000000000002",
		Keys: `{"pk":"z","sk":"1"}`, NewImage: `{"pk":"z","sk":"1"}`}
	replay := NewReplay()
	for _, r := range []Row{stale, extra} {
		_ = replay.Add(r)
	}
	rows, err := SnapshotRows(p, scan, replay.State(), date(2026, 12, 3, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := replay.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if rep := Verify(replay.State(), scan.State); !rep.OK() {
		t.Errorf("after the snapshot: %s", rep)
	}
	if len(rows) != 3 || rows[2].EventName != EventRemove {
		t.Errorf("rows %+v, want two MODIFY and one REMOVE", rows)
	}
}

func TestUnarchived(t *testing.T) {
	rec := func(shard, seq string) StreamRecord { return StreamRecord{Shard: shard, SequenceNumber: seq} }
	recs := []StreamRecord{rec("a", "11"), rec("a", "12"), rec("a", "13"), rec("b", "21"), rec("b", "22")}
	tests := []struct {
		name     string
		archived []string
		want     int
	}{
		{"nothing archived", nil, 5},
		{"both shards to their end", []string{"13", "22"}, 0},
		{"a middle record lost: the verification's business", []string{"11", "13", "21", "22"}, 0},
		{"shard b behind", []string{"11", "12", "13", "21"}, 1},
		{"leading zeros do not count", []string{"013", "0022"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Contents{Sequences: map[string]bool{}}
			for _, s := range tt.archived {
				c.Sequences[trimZeros(s)] = true
			}
			if got := Unarchived(recs, c); len(got) != tt.want {
				t.Errorf("Unarchived = %v, want %d records", got, tt.want)
			}
		})
	}
}

// A retired month's table created again (a late writer) is left alone: no
// verification against the archive, no snapshot whose REMOVEs would take
// the month's items out of the archive; the run says why.
func TestRetiredMonthCreatedAgainIsLeftAlone(t *testing.T) {
	w := novemberWorld(t)
	if err := w.rotator(date(2026, 12, 3, 1)).Run(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	files := w.fileKeys("table=app-votes/month=2026-11/")
	if _, _, err := (memTables{w}).Ensure(context.Background(), Spec{Name: "app-votes-2026-11", Month: "2026-11"}); err != nil {
		t.Fatal(err)
	}
	w.put("app-votes-2026-11", "poll#p", "late-1", 1, date(2026, 11, 30, 23))
	calls := len(w.calls)

	rep := w.rotator(date(2026, 12, 4, 0)).Run(context.Background())
	if len(rep.Retirements) != 1 {
		t.Fatalf("retirements %+v, want November's", rep.Retirements)
	}
	ret := rep.Retirements[0]
	if ret.Outcome != Alarm || ret.Err == nil || !strings.Contains(ret.Err.Error(), "exists again") || len(ret.Steps) != 1 || ret.Steps[0].Step != StepLease {
		t.Errorf("outcome %s, err %v, steps %v; want an alarm before any step but the lease", ret.Outcome, ret.Err, ret.Steps)
	}
	if got := w.fileKeys("table=app-votes/month=2026-11/"); !reflect.DeepEqual(got, files) {
		t.Errorf("the archive changed: %v → %v", files, got)
	}
	if w.table("app-votes-2026-11") == nil {
		t.Error("the table was deleted")
	}
	for _, c := range w.calls[calls:] {
		if strings.Contains(c, "2026-11") {
			t.Errorf("the run touched November: %s", c)
		}
	}
}

// A month retires only once it is cold by the counters' clock too: the
// counter fences a month by its own clock (the month's end plus the
// grace), so a run told a later time (`tables rotate -now`, a wrong clock)
// keeps the month while the counters may still write it, and says so.
func TestRetireOnlyWhenColdByTheCountersClock(t *testing.T) {
	for _, tt := range []struct {
		name   string
		clock  time.Time
		retire bool
	}{
		{"counters in November", date(2026, 11, 25, 0), false},
		{"counters in the grace", date(2026, 12, 2, 12), false},
		{"counters within the fence margin", date(2026, 12, 3, 0), false},
		{"counters past the margin", date(2026, 12, 3, 1), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := novemberWorld(t)
			r := w.rotator(date(2026, 12, 10, 0))
			r.Clock = func() time.Time { return tt.clock }
			rep := r.Run(context.Background())
			if err := rep.Err(); err != nil {
				t.Fatal(err)
			}
			retired := len(rep.Retirements) == 1 && rep.Retirements[0].Outcome == Retired
			if retired != tt.retire || (len(rep.Kept) == 1) == tt.retire {
				t.Errorf("retirements %+v, kept %v; want retired %v", rep.Retirements, rep.Kept, tt.retire)
			}
			if !tt.retire && w.table("app-votes-2026-11") == nil {
				t.Error("November's table is gone")
			}
			if !tt.retire && len(rep.Kept) == 1 {
				// The reason names the counters' clock and when they stop.
				why := rep.Kept[0].Reason
				for _, want := range []string{tt.clock.Format(time.RFC3339), "until 2026-12-03T00:00:00Z", "retires from 2026-12-03T01:00:00Z"} {
					if !strings.Contains(why, want) {
						t.Errorf("kept because %q; want it to say %q", why, want)
					}
				}
			}
			// No month after the counters' next one is created, whatever
			// the run's time: January waits while they are in November.
			if jan := w.table("app-votes-2027-01") != nil; jan != (tt.clock.Month() == time.December) {
				t.Errorf("January's table exists %v with the counters at %s; deferred %+v", jan, tt.clock, rep.Deferred)
			}
		})
	}
}

// memCounted is the tally's side: every record counted, Tallied as given.
type memCounted struct {
	tallied int64
	err     error
}

func (memCounted) Uncounted(context.Context, string, []StreamRecord) ([]StreamRecord, error) {
	return nil, nil
}

func (m memCounted) Tallied(context.Context, string) (int64, error) { return m.tallied, m.err }

// A verified month's items are compared with the votes the tally counted:
// equal, the retirement goes on; different, it goes on too (the archive is
// complete) but says by how much; unreadable, it stops and is retried.
func TestRetirementComparesTheCounters(t *testing.T) {
	tests := []struct {
		name    string
		counted memCounted
		outcome Outcome
		differ  int64
		detail  string
	}{
		{"agree", memCounted{tallied: 50}, Retired, 0, "the counters agree with the archive: the tally counted 50 votes"},
		{"one counted twice", memCounted{tallied: 51}, Retired, 1, "the counters differ from the archive by +1"},
		{"some never counted", memCounted{tallied: 47}, Retired, -3, "the counters differ from the archive by -3"},
		{"checkpoints unreadable", memCounted{err: errors.New("throttled")}, Failed, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := novemberWorld(t)
			r := w.rotator(date(2026, 12, 3, 1))
			r.Counted = tt.counted
			var detail string
			var steps []Step
			r.OnStep = func(table string, s StepResult) {
				if table == "app-votes-2026-11" {
					steps = append(steps, s.Step)
					if s.Step == StepCounters {
						detail = s.Detail
					}
				}
			}
			rep := r.Run(context.Background())
			if len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != tt.outcome {
				t.Fatalf("retirements %+v, want November %s", rep.Retirements, tt.outcome)
			}
			ret := rep.Retirements[0]
			if tt.outcome == Failed {
				if ret.Counters != nil || w.table("app-votes-2026-11") == nil || !strings.Contains(ret.Err.Error(), "throttled") {
					t.Errorf("counters %+v, err %v, table kept %v; want the table kept and the error", ret.Counters, ret.Err, w.table("app-votes-2026-11") != nil)
				}
				return
			}
			if ret.Counters == nil || ret.Counters.Differ() != tt.differ || ret.Counters.Items != 50 {
				t.Errorf("counters %+v, want %d against 50 items", ret.Counters, tt.differ)
			}
			if !strings.Contains(detail, tt.detail) {
				t.Errorf("step detail %q, want it to say %q", detail, tt.detail)
			}
			if want := []Step{StepLease, StepEnsure, StepDrain, StepVerify, StepCounters, StepCompact, StepUnsubscribe, StepUnprotect, StepDelete}; !reflect.DeepEqual(steps, want) {
				t.Errorf("steps %v, want %v", steps, want)
			}
		})
	}
}

// countedUpTo is a reader that has counted the first n of any records.
type countedUpTo struct{ memCounted }

func (countedUpTo) Uncounted(_ context.Context, _ string, recs []StreamRecord) ([]StreamRecord, error) {
	return recs[min(58, len(recs)):], nil
}

// StreamLags says, per owned table with its stream on, what the archive
// and the other reader have not caught up with; look-alike tables are not
// read.
func TestStreamLags(t *testing.T) {
	w := novemberWorld(t) // 60 records, all archived
	w.deliver = false     // the archiver stops: the next 3 are not archived
	for i := range 3 {
		w.put("app-votes-2026-11", "poll#p", fmt.Sprint("late-", i), 1, date(2026, 11, 21, 10))
	}
	if _, _, err := (memTables{w}).Ensure(context.Background(), Spec{Name: "app-votes-staging-2026-11"}); err != nil {
		t.Fatal(err)
	}
	w.put("app-votes-staging-2026-11", "poll#p", "x", 1, date(2026, 11, 21, 10))
	r := w.rotator(date(2026, 11, 21, 12))
	r.Counted = countedUpTo{}
	tests := []struct {
		name              string
		archived, counted bool
		want              []StreamLag
	}{
		{"both", true, true, []StreamLag{{Table: "app-votes-2026-11", Unarchived: 3, Uncounted: 5}}},
		{"archive only", true, false, []StreamLag{{Table: "app-votes-2026-11", Unarchived: 3}}},
		{"counters only", false, true, []StreamLag{{Table: "app-votes-2026-11", Uncounted: 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.StreamLags(context.Background(), tt.archived, tt.counted)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("StreamLags = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// A month's table is planned the warm throughput of the month before's
// table, at least the floor and at most the ceiling, read and write each.
func TestWarmFor(t *testing.T) {
	pol := RotationPolicy{Prefix: "app-votes", WarmFloor: Warm{Read: 12000, Write: 4000}, WarmCeiling: Warm{Read: 40000, Write: 40000}}
	const prev = "app-votes-2026-11"
	tests := []struct {
		name string
		pol  RotationPolicy
		prev *Warm
		want WarmPlan
	}{
		{"no month before: the floor", pol, nil, WarmPlan{Warm{Read: 12000, Write: 4000}, "the floor"}},
		{"the month before above the floor: its", pol, &Warm{Read: 30000, Write: 20000},
			WarmPlan{Warm{Read: 30000, Write: 20000}, prev + "'s"}},
		{"the month before at a new table's default: the floor", pol, &Warm{Read: 12000, Write: 4000},
			WarmPlan{Warm{Read: 12000, Write: 4000}, "the floor"}},
		{"the month before below a raised floor: the floor", RotationPolicy{Prefix: "app-votes", WarmFloor: Warm{Read: 12000, Write: 10000}},
			&Warm{Read: 12000, Write: 6000}, WarmPlan{Warm{Read: 12000, Write: 10000}, "the floor"}},
		{"writes above the floor, reads not", pol, &Warm{Read: 12000, Write: 20000},
			WarmPlan{Warm{Read: 12000, Write: 20000}, "writes: " + prev + "'s; reads: the floor"}},
		{"above the ceiling: the ceiling", pol, &Warm{Read: 12000, Write: 55000},
			WarmPlan{Warm{Read: 12000, Write: 40000}, "writes: the ceiling (" + prev + " has 55000/s); reads: the floor"}},
		{"defaults: a new table's floor, DynamoDB's quota as the ceiling", RotationPolicy{Prefix: "app-votes"}, &Warm{Read: 90000, Write: 3000},
			WarmPlan{Warm{Read: 40000, Write: 4000}, "writes: the floor; reads: the ceiling (" + prev + " has 90000/s)"}},
		{"a ceiling below the floor is the floor", RotationPolicy{Prefix: "app-votes", WarmFloor: Warm{Read: 12000, Write: 8000}, WarmCeiling: Warm{Read: 12000, Write: 5000}},
			&Warm{Read: 12000, Write: 9000}, WarmPlan{Warm{Read: 12000, Write: 8000}, "writes: the ceiling (" + prev + " has 9000/s); reads: the floor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pol.WarmFor(prev, tt.prev); got != tt.want {
				t.Errorf("WarmFor(%v) = %+v, want %+v", tt.prev, got, tt.want)
			}
		})
	}
}

// Each ensured month's table gets the warm throughput planned from the
// month before's: a new one is created with it (asked only above a new
// table's default), an existing one below it is raised by the figures it
// lacks, one at or above it is left alone, and a run again changes nothing.
func TestRunWarmsTheNextMonth(t *testing.T) {
	floor, ceiling := Warm{Read: 12000, Write: 4000}, Warm{Read: 40000, Write: 40000}
	tests := []struct {
		name    string
		floor   Warm
		current Warm  // November's, the current month's
		next    *Warm // December's, when it exists already
		noWarm  bool  // the server has no warm throughput (DynamoDB Local)
		fail    error // the raise fails
		want    Warm  // December's afterwards
		calls   []string
		detail  string // December's warm step says
		warmed  bool
	}{
		{name: "current above the floor: the next is created with it", floor: floor, current: Warm{Read: 12000, Write: 20000},
			want:   Warm{Read: 12000, Write: 20000},
			calls:  []string{"create app-votes-2026-12", "create app-votes-2026-12 warm 20000 writes/s"},
			detail: "20000 writes/s, 12000 reads/s (writes: app-votes-2026-11's; reads: the floor): created with it", warmed: true},
		{name: "current below the floor: the floor", floor: Warm{Read: 12000, Write: 10000}, current: Warm{Read: 12000, Write: 6000},
			want: Warm{Read: 12000, Write: 10000},
			// The current month is brought up to the floor too.
			calls:  []string{"raise app-votes-2026-11 warm 10000 writes/s", "create app-votes-2026-12", "create app-votes-2026-12 warm 10000 writes/s"},
			detail: "10000 writes/s, 12000 reads/s (the floor): created with it", warmed: true},
		{name: "current above the ceiling: the ceiling", floor: floor, current: Warm{Read: 60000, Write: 70000},
			want:   ceiling,
			calls:  []string{"create app-votes-2026-12", "create app-votes-2026-12 warm 40000 writes/s, 40000 reads/s"},
			detail: "40000 writes/s, 40000 reads/s (writes: the ceiling (app-votes-2026-11 has 70000/s); reads: the ceiling (app-votes-2026-11 has 60000/s)): created with it", warmed: true},
		{name: "current at the default: the next created plain", floor: floor, current: DefaultWarm,
			want: DefaultWarm, calls: []string{"create app-votes-2026-12"},
			detail: "4000 writes/s, 12000 reads/s (the floor): a new table's default"},
		{name: "next exists below: raised by what it lacks", floor: floor, current: Warm{Read: 12000, Write: 20000}, next: &DefaultWarm,
			want: Warm{Read: 12000, Write: 20000}, calls: []string{"raise app-votes-2026-12 warm 20000 writes/s"},
			detail: "20000 writes/s, 12000 reads/s (writes: app-votes-2026-11's; reads: the floor): raised from 4000 writes/s, 12000 reads/s", warmed: true},
		{name: "next exists at the target: nothing", floor: floor, current: Warm{Read: 12000, Write: 20000}, next: &Warm{Read: 12000, Write: 20000},
			want:   Warm{Read: 12000, Write: 20000},
			detail: "20000 writes/s, 12000 reads/s (writes: app-votes-2026-11's; reads: the floor): has 20000 writes/s, 12000 reads/s already"},
		{name: "next exists above: never lowered", floor: floor, current: Warm{Read: 12000, Write: 20000}, next: &Warm{Read: 30000, Write: 35000},
			want:   Warm{Read: 30000, Write: 35000},
			detail: "20000 writes/s, 12000 reads/s (writes: app-votes-2026-11's; reads: the floor): has 35000 writes/s, 30000 reads/s already"},
		{name: "next exists, reads below, writes above: only reads raised", floor: Warm{Read: 20000, Write: 4000}, current: Warm{Read: 12000, Write: 20000},
			next: &Warm{Read: 12000, Write: 30000}, want: Warm{Read: 20000, Write: 30000},
			calls:  []string{"raise app-votes-2026-11 warm 20000 reads/s", "raise app-votes-2026-12 warm 20000 reads/s"},
			detail: "20000 writes/s, 20000 reads/s (writes: app-votes-2026-11's; reads: the floor): raised from 30000 writes/s, 12000 reads/s", warmed: true},
		{name: "no warm throughput on the server: noted, the run goes on", floor: Warm{Read: 12000, Write: 10000}, noWarm: true,
			calls:  []string{"create app-votes-2026-12"},
			detail: "10000 writes/s, 12000 reads/s (the floor): asked at creation; the server reports no warm throughput"},
		{name: "the raise fails: an error of the run", floor: floor, current: Warm{Read: 12000, Write: 20000}, next: &DefaultWarm,
			fail: errors.New("throttled"), want: DefaultWarm,
			detail: "20000 writes/s, 12000 reads/s (writes: app-votes-2026-11's; reads: the floor): raising it from 4000 writes/s, 12000 reads/s failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			w.noWarm = tt.noWarm
			ctx := context.Background()
			months := []string{"app-votes-2026-11"}
			if tt.next != nil {
				months = append(months, "app-votes-2026-12")
			}
			for _, name := range months {
				if _, _, err := (memTables{w}).Ensure(ctx, Spec{Name: name}); err != nil {
					t.Fatal(err)
				}
			}
			if !tt.noWarm {
				cur := tt.current
				w.tables["app-votes-2026-11"].Warm = &cur
			}
			if tt.next != nil {
				next := *tt.next
				w.tables["app-votes-2026-12"].Warm = &next
			}
			w.calls, w.fail["warm"] = nil, tt.fail
			r := w.rotator(date(2026, 11, 20, 10))
			r.Policy.WarmFloor, r.Policy.WarmCeiling = tt.floor, ceiling
			var detail string
			r.OnStep = func(table string, s StepResult) {
				if table == "app-votes-2026-12" && s.Step == StepWarm {
					detail = s.Detail
				}
			}
			rep := r.Run(ctx)
			if err := rep.Err(); (err != nil) != (tt.fail != nil) || tt.fail != nil && !errors.Is(err, tt.fail) {
				t.Fatalf("run: %v, want %v", err, tt.fail)
			}
			var calls []string
			for _, c := range w.calls {
				if !strings.HasPrefix(c, "subscribe") {
					calls = append(calls, c)
				}
			}
			if !slices.Equal(calls, tt.calls) {
				t.Errorf("calls %q, want %q", calls, tt.calls)
			}
			if got := w.table("app-votes-2026-12").Warm; !tt.noWarm && (got == nil || *got != tt.want) {
				t.Errorf("December's warm throughput %v, want %v", got, tt.want)
			}
			if detail != tt.detail {
				t.Errorf("warm step says %q,\nwant %q", detail, tt.detail)
			}
			if warmed := slices.Contains(rep.Warmed, "app-votes-2026-12"); warmed != tt.warmed {
				t.Errorf("warmed %v, want December %v", rep.Warmed, tt.warmed)
			}
			// A run again asks nothing more.
			w.calls = nil
			again := r.Run(ctx)
			if tt.fail == nil && (len(w.calls) != 0 || len(again.Warmed) != 0) {
				t.Errorf("second run: calls %q, warmed %v; want none", w.calls, again.Warmed)
			}
		})
	}
}

// At the month turn the run after midnight finds the month that ended
// (in its grace) warmer than the month that began, created a month ago at
// a new table's default: the new month is raised to the old one's, and
// the month after is created from it.
func TestWarmAtTheMonthTurn(t *testing.T) {
	w := newWorld()
	ctx := context.Background()
	for _, name := range []string{"app-votes-2026-11", "app-votes-2026-12"} {
		if _, _, err := (memTables{w}).Ensure(ctx, Spec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	w.tables["app-votes-2026-11"].Warm = &Warm{Read: 12000, Write: 22000}
	w.calls = nil
	rep := w.rotator(time.Date(2026, 12, 1, 0, 15, 0, 0, time.UTC)).Run(ctx)
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"raise app-votes-2026-12 warm 22000 writes/s", "create app-votes-2027-01", "create app-votes-2027-01 warm 22000 writes/s"}
	var calls []string
	for _, c := range w.calls {
		if !strings.HasPrefix(c, "subscribe") {
			calls = append(calls, c)
		}
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if want := []string{"app-votes-2026-12", "app-votes-2027-01"}; !slices.Equal(rep.Warmed, want) {
		t.Errorf("warmed %v, want %v", rep.Warmed, want)
	}
}
