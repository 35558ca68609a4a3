package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// RotationPolicy is how the rotator treats the ledger tables.
type RotationPolicy struct {
	// Prefix names the tables: <Prefix>-YYYY-MM.
	Prefix string
	// GraceDays after a month's end during which the counter still takes
	// the month's late votes (at least 1; the counter's fence uses the same).
	GraceDays int
	// FenceMargin is how long after the grace a month still waits before
	// it is cold (default 1 hour): longer than a counter invocation that
	// passed the fence can go on writing (Lambda's 15 minutes at most),
	// plus clock error, so no vote lands after the verification.
	FenceMargin time.Duration
	// Ahead is how many months after the current one exist ahead of time
	// (default 1: next month's table).
	Ahead int
	// DrainWait bounds the wait for the archive to catch up with a cold
	// table's stream (default 5 minutes); DrainPoll is the first pause
	// between checks (default 2 s, doubling to 30 s).
	DrainWait, DrainPoll time.Duration
	// Capacity makes new tables provisioned; nil is on-demand.
	Capacity *Capacity
	// ColdCapacity is what a provisioned table is lowered to once cold
	// (default 1 read, 1 write unit). On-demand tables are left alone.
	ColdCapacity Capacity
	// Compaction is the small-file policy (DefaultCompactionPolicy
	// when zero).
	Compaction CompactionPolicy
	// Tags are put on every table created or kept.
	Tags map[string]string
	// WarmFloor and WarmCeiling bound the warm throughput each month's
	// table is given (WarmFor), read and write each: at least WarmFloor
	// (default DefaultWarm: no more than a new table has) and at most
	// WarmCeiling (default DefaultWarmCeiling; never below the floor).
	WarmFloor, WarmCeiling Warm
	// LeaseFor is how long a month's lease lasts unless renewed (default
	// DefaultLeaseFor): how long after a run stopped another may resume
	// the month's retirement.
	LeaseFor time.Duration
}

// DefaultWarmCeiling is the most warm throughput a month's table is given
// unless the policy says otherwise: DynamoDB's default quota of an
// on-demand table, 40,000 read and 40,000 write units per second.
var DefaultWarmCeiling = Warm{Read: 40000, Write: 40000}

func (p RotationPolicy) withDefaults() RotationPolicy {
	if p.Ahead <= 0 {
		p.Ahead = 1
	}
	if p.GraceDays < 1 {
		p.GraceDays = 1
	}
	if p.FenceMargin <= 0 {
		p.FenceMargin = time.Hour
	}
	if p.DrainWait <= 0 {
		p.DrainWait = 5 * time.Minute
	}
	if p.DrainPoll <= 0 {
		p.DrainPoll = 2 * time.Second
	}
	if p.LeaseFor <= 0 {
		p.LeaseFor = DefaultLeaseFor
	}
	if p.ColdCapacity.Read <= 0 || p.ColdCapacity.Write <= 0 {
		p.ColdCapacity = Capacity{Read: 1, Write: 1}
	}
	if p.Compaction.TargetBytes <= 0 {
		p.Compaction = DefaultCompactionPolicy
	}
	if p.WarmFloor.Read <= 0 {
		p.WarmFloor.Read = DefaultWarm.Read
	}
	if p.WarmFloor.Write <= 0 {
		p.WarmFloor.Write = DefaultWarm.Write
	}
	if p.WarmCeiling.Read <= 0 {
		p.WarmCeiling.Read = DefaultWarmCeiling.Read
	}
	if p.WarmCeiling.Write <= 0 {
		p.WarmCeiling.Write = DefaultWarmCeiling.Write
	}
	p.WarmCeiling.Read = max(p.WarmCeiling.Read, p.WarmFloor.Read)
	p.WarmCeiling.Write = max(p.WarmCeiling.Write, p.WarmFloor.Write)
	return p
}

// WarmPlan is the warm throughput a month's table should have, and why.
type WarmPlan struct {
	Target Warm
	// Why says where the figures come from: the month before's table, the
	// floor or the ceiling.
	Why string
}

// WarmFor plans the warm throughput of a month's table from the table of
// the month before (prevTable, whose warm throughput is prev; nil when it
// does not exist or reports none): prev's, at least the floor and at most
// the ceiling, read and write each. A new month then starts able to take at
// once what the month before took at its peak (DynamoDB raises a table's
// warm throughput with its traffic), where a new table would throttle
// above 4,000 writes a second.
func (p RotationPolicy) WarmFor(prevTable string, prev *Warm) WarmPlan {
	p = p.withDefaults()
	units := func(prev *int64, floor, ceiling int64) (int64, string) {
		switch {
		case prev == nil || *prev <= floor:
			return floor, "the floor"
		case *prev > ceiling:
			return ceiling, fmt.Sprintf("the ceiling (%s has %d/s)", prevTable, *prev)
		default:
			return *prev, prevTable + "'s"
		}
	}
	var pr, pw *int64
	if prev != nil {
		pr, pw = &prev.Read, &prev.Write
	}
	var wp WarmPlan
	var whyRead, whyWrite string
	wp.Target.Read, whyRead = units(pr, p.WarmFloor.Read, p.WarmCeiling.Read)
	wp.Target.Write, whyWrite = units(pw, p.WarmFloor.Write, p.WarmCeiling.Write)
	wp.Why = whyWrite
	if whyRead != whyWrite {
		wp.Why = "writes: " + whyWrite + "; reads: " + whyRead
	}
	return wp
}

// Owns reports whether name is one of the policy's monthly tables, exactly
// <Prefix>-YYYY-MM, and its month. Names that merely look alike are not:
// another stack's whose prefix extends this one (<Prefix>-staging-YYYY-MM),
// a copy (<Prefix>-YYYY-MM-old), a month that does not exist (<Prefix>-2026-13).
// The rotator changes and deletes only tables it owns.
func (p RotationPolicy) Owns(name string) (month string, ok bool) {
	if p.Prefix == "" {
		return "", false
	}
	base, month, ok := ledger.SplitTable(name)
	if !ok || base != p.Prefix {
		return "", false
	}
	return month, true
}

// ColdAt is when month m is cold: its end, plus the grace in which the
// counter takes its late votes, plus the fence margin.
func (p RotationPolicy) ColdAt(m string) (time.Time, error) {
	p = p.withDefaults()
	t, err := ledger.ColdAt(m, time.Duration(p.GraceDays)*ledger.Day, p.FenceMargin)
	if err != nil {
		return time.Time{}, fmt.Errorf("archive: %w", err)
	}
	return t, nil
}

// RotationPlan is what a run should do at a given time, decided from the table
// names alone.
type RotationPlan struct {
	Now time.Time
	// Ensure: the current month and the months ahead, in order.
	Ensure []string
	// Keep: existing monthly tables that are not cold (past months in
	// their grace period, or months further ahead): kept subscribed.
	Keep []string
	// Retire: existing tables whose month is cold, oldest first.
	Retire []string
}

// Plan decides which tables must exist and which are cold at now, given
// the names of the existing tables (others' tables and names that are not
// <Prefix>-YYYY-MM are ignored).
func (p RotationPolicy) Plan(now time.Time, existing []string) RotationPlan {
	p = p.withDefaults()
	pl := RotationPlan{Now: now.UTC()}
	cur := ledger.MonthOf(now)
	want := map[string]bool{}
	for i := 0; i <= p.Ahead; i++ {
		m, _ := ledger.Add(cur, i) // cur is well formed
		name := ledger.TableName(p.Prefix, m)
		pl.Ensure = append(pl.Ensure, name)
		want[name] = true
	}
	for _, name := range existing {
		m, ok := p.Owns(name)
		if !ok || want[name] {
			continue // not one of ours: <prefix>-something-else
		}
		cold, err := p.ColdAt(m)
		if err != nil {
			continue
		}
		if !now.Before(cold) {
			pl.Retire = append(pl.Retire, name)
		} else {
			pl.Keep = append(pl.Keep, name)
		}
	}
	sort.Strings(pl.Retire)
	sort.Strings(pl.Keep)
	return pl
}

// coldByTheCounters keeps the months the counters' clock (r.Clock) does
// not yet find cold, whatever the run's time (r.Now, which `tables rotate
// -now` moves) says: the counters still take their votes.
func (r *Rotator) coldByTheCounters(cold []string, now time.Time) (retire []string, kept []Held) {
	pol := r.Policy.withDefaults()
	counters := r.clock().UTC()
	for _, name := range cold {
		m, _ := pol.Owns(name)
		coldAt, _ := pol.ColdAt(m)
		if !counters.Before(coldAt) {
			retire = append(retire, name)
			continue
		}
		closes, _ := ledger.ClosesAt(m, time.Duration(pol.GraceDays)*ledger.Day)
		why := fmt.Sprintf("cold by the run's time (%s), but the counters' clock reads %s: they take %s's votes until %s, and it retires from %s; kept",
			now.Format(time.RFC3339), counters.Format(time.RFC3339), m, closes.Format(time.RFC3339), coldAt.Format(time.RFC3339))
		r.step(name, StepResult{Step: StepEnsure, Detail: why})
		kept = append(kept, Held{Table: name, Reason: why})
	}
	return retire, kept
}

// notAheadOfTheCounters drops the months after the counters' next month
// from the tables to ensure: a run planned ahead (`tables rotate -now`)
// creates no table the live stack would not have by its own clock.
func (r *Rotator) notAheadOfTheCounters(ensure []string) (keep []string, deferred []Held) {
	pol := r.Policy.withDefaults()
	counters := r.clock().UTC()
	next, _ := ledger.Add(ledger.MonthOf(counters), pol.Ahead)
	for _, name := range ensure {
		if m, ok := pol.Owns(name); ok && m > next {
			why := fmt.Sprintf("not created: the counters' clock reads %s, and the rotator creates no month after %s",
				counters.Format(time.RFC3339), next)
			r.step(name, StepResult{Step: StepCreate, Detail: why})
			deferred = append(deferred, Held{Table: name, Reason: why})
			continue
		}
		keep = append(keep, name)
	}
	return keep, deferred
}

// Rotator runs the plan against the adapters.
type Rotator struct {
	Policy        RotationPolicy
	Tables        Tables
	Streams       Streams
	Subscriptions Subscriptions
	// Counted, when set, is the tally's progress: the drain waits for it.
	Counted Counted
	Archive Partitions
	// Leases holds each month's retirement for one run at a time: a run
	// that finds another's lease live leaves the month to it (Held).
	Leases Leases
	// Holder says who runs, in words, in the leases it takes (another run
	// that finds one held prints it); RunID is the run's id, unique (random
	// when empty: set by the first Run or Retire).
	Holder, RunID string
	// LeaseClock is the time leases are taken and lapse by (time.Now when
	// nil): elapsed time, the same for every run, not Now or Clock, which
	// `tables rotate -now` and `local clock` move.
	LeaseClock func() time.Time
	// Now is the run's time: which months to ensure and which are cold.
	Now func() time.Time
	// Clock is the time the counters fence months by (time.Now, or Now
	// when nil). A month is retired only once it is cold by Clock as well,
	// so a run given a later Now (`tables rotate -now`) never retires a
	// month the counters still write.
	Clock func() time.Time
	// Sleep pauses between drain checks (retry.Sleep, honouring ctx, by default).
	Sleep func(ctx context.Context, d time.Duration) error
	Log   *slog.Logger
	// OnStep, when set, hears of each step as it ends (the CLI's progress).
	OnStep func(table string, s StepResult)
}

// Step is one step of a table's life.
type Step string

// The steps, in order (see the package documentation).
const (
	// StepLease is the month's lease: taken, taken over from a run that
	// stopped, or found held by another run (which the run leaves it to).
	StepLease       Step = "lease"
	StepCreate      Step = "create"
	StepWarm        Step = "warm"
	StepSubscribe   Step = "subscribe"
	StepEnsure      Step = "ensure"
	StepDrain       Step = "drain"
	StepVerify      Step = "verify"
	StepSnapshot    Step = "snapshot"
	StepReverify    Step = "reverify"
	StepCounters    Step = "counters"
	StepCompact     Step = "compact"
	StepUnsubscribe Step = "unsubscribe"
	StepUnprotect   Step = "unprotect"
	StepDelete      Step = "delete"
)

// StepResult is a step that ran.
type StepResult struct {
	Step   Step
	Detail string
	Took   time.Duration
	Err    error
}

// Outcome is where a retirement stopped.
type Outcome string

const (
	// Retired: verified, compacted and deleted.
	Retired Outcome = "retired"
	// NotDrained: the archive had not caught up with the stream within
	// DrainWait; the next run tries again.
	NotDrained Outcome = "not-drained"
	// Alarm: verification failed; the snapshot export ran; the table is
	// kept (a later run that verifies it retires it).
	Alarm Outcome = "alarm"
	// Failed: a step failed; the next run resumes (every step is idempotent).
	Failed Outcome = "failed"
	// HeldByAnother: another run holds the month's lease and is retiring
	// it; this run touched nothing of the month. Not a failure.
	HeldByAnother Outcome = "held-by-another-run"
	// RetiredByAnother: another run retired the month before this one got
	// to it (the table gone, the archive verified). Not a failure.
	RetiredByAnother Outcome = "retired-by-another-run"
)

// Retirement is what happened to one cold table.
type Retirement struct {
	Table     string
	Partition Partition
	Outcome   Outcome
	Steps     []StepResult
	// Verification is the first check; Reverification the one after a
	// snapshot export (nil when none ran).
	Verification   *Report
	Reverification *Report
	Compaction     *Compaction
	// LagSeconds is the age of the oldest stream record not yet archived at
	// the last drain check (0 once drained).
	LagSeconds  float64
	VerifyTook  time.Duration
	ScanTook    time.Duration
	ArchiveRows int64
	// Snapshot counts the rows the snapshot step wrote, by kind (the
	// difference between the table and the archive; zero when none ran).
	Snapshot Backfill
	// Counters compares what the stream's other reader counted of the
	// month with the items verified archived (nil when not compared).
	Counters *CountersCheck
	// Lease is the month's lease as this run last held it (zero when it
	// took none); HeldBy, when HeldByAnother, is the lease of the run that holds
	// the month; TookOver is a stopped run's lapsed lease this run took
	// over, resuming where it stopped (zero when none).
	Lease, HeldBy, TookOver Lease
	Err                     error
}

// CountersCheck is a verified month's items against the votes the tally
// counted from its stream: each item is one vote, counted once, so the two
// are equal unless the counters went wrong (or an item was changed by hand).
type CountersCheck struct {
	Tallied int64 // Counted.Tallied
	Items   int64 // the table's items, verified equal to the archive
}

// Differ is how many votes more the counters hold than the archive
// (negative: fewer); 0 when they agree.
func (c CountersCheck) Differ() int64 { return c.Tallied - c.Items }

func (c CountersCheck) String() string {
	if d := c.Differ(); d != 0 {
		return fmt.Sprintf("the counters differ from the archive by %+d: the tally counted %d votes of the month, the table (verified archived) holds %d; `ddbpipe votes audit` names the polls and options", d, c.Tallied, c.Items)
	}
	return fmt.Sprintf("the counters agree with the archive: the tally counted %d votes of the month, as many as the table holds", c.Tallied)
}

// RotationReport is what a run did.
type RotationReport struct {
	Now     time.Time
	Created []string
	// Warmed are tables created with, or raised to, a warm throughput above
	// what they had (a new table's default).
	Warmed     []string
	Subscribed []string
	Ensured    []string
	// Kept are tables cold by the run's time but not by the counters'
	// clock; Deferred are months ahead of the counters' next month, not
	// created. Each with the reason, in words.
	Kept        []Held
	Deferred    []Held
	Retirements []Retirement
	Errors      []error
}

// Held is a table a run left alone although its time said otherwise, and
// why.
type Held struct {
	Table  string
	Reason string
}

// Retired counts the tables deleted.
func (r RotationReport) Retired() int { return r.count(Retired) }

// Alarms counts retirements that alarmed.
func (r RotationReport) Alarms() int { return r.count(Alarm) }

// FailedSteps counts the steps that failed: a table's creation, warming
// or subscription (Errors), and the step each failed retirement stopped at.
func (r RotationReport) FailedSteps() int {
	n := len(r.Errors)
	for _, t := range r.Retirements {
		if t.Err != nil {
			n++
		}
	}
	return n
}

func (r RotationReport) count(o Outcome) int {
	n := 0
	for _, t := range r.Retirements {
		if t.Outcome == o {
			n++
		}
	}
	return n
}

// Err joins every failure of the run.
func (r RotationReport) Err() error {
	errs := append([]error{}, r.Errors...)
	for _, t := range r.Retirements {
		if t.Err != nil {
			errs = append(errs, t.Err)
		}
	}
	return errors.Join(errs...)
}

func (r *Rotator) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

func (r *Rotator) clock() time.Time {
	if r.Clock != nil {
		return r.Clock().UTC()
	}
	return r.now()
}

func (r *Rotator) leaseNow() time.Time {
	if r.LeaseClock != nil {
		return r.LeaseClock().UTC()
	}
	return time.Now().UTC()
}

// runID returns the run's id, making one the first time.
func (r *Rotator) runID() string {
	if r.RunID == "" {
		r.RunID = newRunID()
	}
	return r.RunID
}

func (r *Rotator) holder() string {
	if r.Holder != "" {
		return r.Holder
	}
	return "a rotation run"
}

func (r *Rotator) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

func (r *Rotator) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	return retry.Sleep(ctx, d)
}

// Run does one rotation: the current and coming months' tables exist and
// are subscribed, tables in their grace period stay subscribed, and cold
// tables are retired one after the other. A failure with one table does not
// stop the others; the report holds every outcome.
func (r *Rotator) Run(ctx context.Context) RotationReport {
	pol := r.Policy.withDefaults()
	now := r.now()
	r.runID()
	rep := RotationReport{Now: now}
	tables, err := r.Tables.List(ctx, pol.Prefix)
	if err != nil {
		rep.Errors = append(rep.Errors, err)
		return rep
	}
	byName := map[string]Table{}
	names := make([]string, 0, len(tables))
	for _, t := range tables {
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	plan := pol.Plan(now, names)
	plan.Retire, rep.Kept = r.coldByTheCounters(plan.Retire, now)
	plan.Ensure, rep.Deferred = r.notAheadOfTheCounters(plan.Ensure)
	for _, name := range plan.Ensure {
		m, _ := strings.CutPrefix(name, pol.Prefix+"-")
		spec := Spec{Name: name, Month: m, Capacity: pol.Capacity, Tags: tagsFor(pol.Tags, m)}
		wp := warmPlan(pol, m, byName)
		if up, ok := wp.Target.Above(DefaultWarm); ok {
			spec.Warm = &up
		}
		start := time.Now()
		if _, exists := byName[name]; !exists {
			// A month retired is retired for good: its archive's manifest
			// (verified) is the durable record, whatever the clock says.
			// A read failure refuses the creation too: whether the month
			// was retired is unknown.
			if c, err := r.Archive.Read(ctx, Partition{Table: pol.Prefix, Month: m}); err != nil || c.AlreadyRetired() {
				if err == nil {
					err = fmt.Errorf("archive: %s was retired (archive verified %s); not created again", name, c.Manifest.Verification.At.Format(time.RFC3339))
				}
				r.step(name, StepResult{Step: StepCreate, Err: err, Took: time.Since(start)})
				rep.Errors = append(rep.Errors, err)
				continue
			}
		}
		t, created, err := r.Tables.Ensure(ctx, spec)
		if err != nil {
			r.step(name, StepResult{Step: StepCreate, Err: err, Took: time.Since(start)})
			rep.Errors = append(rep.Errors, err)
			continue
		}
		detail := "exists"
		if created {
			detail = "created"
			rep.Created = append(rep.Created, name)
		}
		rep.Ensured = append(rep.Ensured, name)
		r.step(name, StepResult{Step: StepCreate, Detail: detail, Took: time.Since(start)})
		res, warmed := r.warm(ctx, &t, created, spec.Warm, wp)
		byName[name] = t // with its warm throughput raised: the next month plans from it
		r.step(name, res)
		if res.Err != nil {
			rep.Errors = append(rep.Errors, res.Err)
		}
		if warmed {
			rep.Warmed = append(rep.Warmed, name)
		}
	}
	for _, name := range append(append([]string{}, plan.Ensure...), plan.Keep...) {
		t, ok := byName[name]
		if !ok || t.StreamARN == "" || !t.StreamEnabled {
			continue
		}
		start := time.Now()
		created, err := r.Subscriptions.Ensure(ctx, t.StreamARN)
		res := StepResult{Step: StepSubscribe, Detail: "subscribed already", Took: time.Since(start), Err: err}
		if created {
			res.Detail = "subscribed the stream's readers"
			rep.Subscribed = append(rep.Subscribed, name)
		}
		r.step(name, res)
		if err != nil {
			rep.Errors = append(rep.Errors, err)
		}
	}
	for _, name := range plan.Retire {
		if ctx.Err() != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("archive: %s not retired: %w", name, ctx.Err()))
			continue
		}
		rep.Retirements = append(rep.Retirements, r.Retire(ctx, byName[name]))
	}
	return rep
}

// warmPlan plans month's warm throughput from the table of the month
// before, if it exists (byName holds the tables listed and those ensured
// so far, in order).
func warmPlan(pol RotationPolicy, month string, byName map[string]Table) WarmPlan {
	pm, err := ledger.Add(month, -1)
	if err != nil {
		return pol.WarmFor("", nil)
	}
	prev, ok := byName[ledger.TableName(pol.Prefix, pm)]
	if !ok {
		return pol.WarmFor("", nil)
	}
	return pol.WarmFor(prev.Name, prev.Warm)
}

// warm is the step that gives an ensured table its planned warm
// throughput. A table just created was asked for it (asked: the figures
// above a new table's default, nil when none); one that exists and has
// less is raised, by the figures it lacks only: DynamoDB refuses a value
// below the table's, and bills each raise once. warmed says the table now
// has more than it had; t.Warm is updated to it.
func (r *Rotator) warm(ctx context.Context, t *Table, created bool, asked *Warm, wp WarmPlan) (res StepResult, warmed bool) {
	start := time.Now()
	res = StepResult{Step: StepWarm}
	say := func(format string, a ...any) {
		res.Detail = fmt.Sprintf("%s (%s): ", wp.Target, wp.Why) + fmt.Sprintf(format, a...)
		res.Took = time.Since(start)
	}
	switch {
	case created && asked == nil:
		say("a new table's default")
		return res, false
	case created && t.Warm == nil:
		say("asked at creation; the server reports no warm throughput")
		return res, false
	case created:
		say("created with it")
		return res, true
	}
	cur, reported := DefaultWarm, t.Warm != nil
	if reported {
		cur = *t.Warm
	}
	up, below := wp.Target.Above(cur)
	switch {
	case !below && reported:
		say("has %s already", cur)
		return res, false
	case !below:
		say("a new table's default; the server reports none")
		return res, false
	case t.WarmUpdating:
		say("a raise is under way (%s so far); the next run looks again", cur)
		return res, false
	}
	raised, err := r.Tables.RaiseWarm(ctx, t.Name, up)
	switch {
	case err != nil:
		say("raising it from %s failed", cur)
		res.Err = fmt.Errorf("archive: %s: warm throughput: %w", t.Name, err)
		return res, false
	case !raised:
		say("the server has no warm throughput: skipped")
		return res, false
	}
	say("raised from %s", cur)
	t.Warm = &Warm{Read: max(cur.Read, up.Read), Write: max(cur.Write, up.Write)}
	return res, true
}

func tagsFor(base map[string]string, month string) map[string]string {
	tags := map[string]string{"app": "ddbpipe", "ledger-month": month}
	for k, v := range base {
		tags[k] = v
	}
	return tags
}

func (r *Rotator) step(table string, s StepResult) {
	log := r.log().With("table", table, "step", string(s.Step), "ms", s.Took.Milliseconds())
	if s.Err != nil {
		log.Error("rotation step failed", "detail", s.Detail, "err", s.Err)
	} else {
		log.Info("rotation step", "detail", s.Detail)
	}
	if r.OnStep != nil {
		r.OnStep(table, s)
	}
}

// Unarchived returns the records of the shards the archive has not caught
// up with. A shard is caught up once its last record is archived: the event
// source mapping delivers a shard's batches in order, one after the other,
// so every record before it was delivered too (archived, or sent to the
// on-failure destination after its retries). A record delivered and then
// lost — a deleted file, a poison record — does not hold the drain up;
// the verification finds it.
func Unarchived(recs []StreamRecord, c Contents) []StreamRecord {
	last := map[string]StreamRecord{}
	for _, rec := range recs {
		last[rec.Shard] = rec
	}
	var out []StreamRecord
	for _, rec := range recs {
		if !c.Has(last[rec.Shard].SequenceNumber) && !c.Has(rec.SequenceNumber) {
			out = append(out, rec)
		}
	}
	return out
}

// Lag is the age of the oldest record in recs at now (0 for none).
func Lag(recs []StreamRecord, now time.Time) float64 {
	var lag float64
	for _, rec := range recs {
		if !rec.CreatedAt.IsZero() {
			lag = max(lag, now.Sub(rec.CreatedAt).Seconds())
		}
	}
	return lag
}

// StreamLag is how far the readers of one live monthly table's stream are
// behind: the records its stream holds that the archive lacks (Unarchived)
// and that Counted has not counted (Uncounted).
type StreamLag struct {
	Table                 string
	Unarchived, Uncounted int
}

// StreamLags reads the stream of every monthly table the policy owns whose
// stream is on, and says for each that holds records how many the archive
// (when archived) and Counted (when counted and set) have not caught up
// with. A table deleted meanwhile has none.
func (r *Rotator) StreamLags(ctx context.Context, archived, counted bool) ([]StreamLag, error) {
	pol := r.Policy.withDefaults()
	tables, err := r.Tables.List(ctx, pol.Prefix)
	if err != nil {
		return nil, err
	}
	var lags []StreamLag
	for _, t := range tables {
		month, ok := pol.Owns(t.Name)
		if !ok || t.StreamARN == "" || !t.StreamEnabled {
			continue
		}
		recs, err := r.Streams.Records(ctx, t.StreamARN)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if len(recs) == 0 {
			continue
		}
		l := StreamLag{Table: t.Name}
		if archived {
			contents, err := r.Archive.Read(ctx, Partition{Table: pol.Prefix, Month: month})
			if err != nil {
				return nil, err
			}
			l.Unarchived = len(Unarchived(recs, contents))
		}
		if counted && r.Counted != nil {
			pending, err := r.Counted.Uncounted(ctx, t.Name, recs)
			if err != nil {
				return nil, err
			}
			l.Uncounted = len(pending)
		}
		lags = append(lags, l)
	}
	return lags, nil
}
