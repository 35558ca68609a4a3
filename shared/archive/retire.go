package archive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AlreadyRetired reports whether the archive records its month as retired:
// a manifest whose verification passed, which only a retirement writes
// (it compacts the month once the table is verified archived). A month
// retired is retired for good, whatever the clock says.
func (c Contents) AlreadyRetired() bool {
	return c.Manifest != nil && c.Manifest.Verification != nil && c.Manifest.Verification.OK
}

// retirement is one cold table on its way out: what the steps learnt so
// far, and the report they fill in. Each step is a method that returns
// its detail and its error; a step may also end the walk (stop) with an
// outcome that is not a failure.
type retirement struct {
	r   *Rotator
	pol RotationPolicy
	t   Table
	p   Partition
	// now is the retirement's one clock: the lag, the verification's time
	// and the snapshot's are read from it. Step timings are elapsed time.
	now func() time.Time

	contents     Contents // the archive, as the drain last read it
	report       Report   // the first verification
	verification Verification
	stop         Outcome
	// alarm, when set, is logged once the step that raised it is recorded.
	alarm func()
	// hold is the month's lease, once taken.
	hold *holding
	ret  Retirement
}

// retireStep is one step of the list Retire walks; when, if set, says
// whether it applies to this retirement.
type retireStep struct {
	step Step
	when func() bool
	run  func(context.Context) (string, error)
}

// steps are the retirement's steps in their safety order: the month is
// verified archived (and the counters checked against it) before it is
// compacted, compacted before its protection is lifted, and only then is
// the table deleted. A month the archive misses items of gets a snapshot
// and a second verification instead, and stops at an alarm.
func (rt *retirement) steps() []retireStep {
	counted := func() bool { return rt.report.OK() && rt.r.Counted != nil }
	unverified := func() bool { return !rt.report.OK() }
	return []retireStep{
		{StepEnsure, nil, rt.ensure},
		{StepDrain, nil, rt.drain},
		{StepVerify, nil, rt.verify},
		{StepCounters, counted, rt.counters},
		{StepSnapshot, unverified, rt.snapshot},
		{StepReverify, unverified, rt.reverify},
		{StepCompact, nil, rt.compact},
		{StepUnsubscribe, nil, rt.unsubscribe},
		{StepUnprotect, nil, rt.unprotect},
		{StepDelete, nil, rt.delete},
	}
}

// Retire takes one cold table through the retirement steps (see the package
// documentation) as far as it safely can. Only a table the policy owns
// (Owns) is touched, and its deletion protection is lifted only once the
// month is verified archived and compacted, right before the delete.
//
// The month is held by one run at a time: Retire takes the month's lease
// first, renews it before each step (and, while a step works, every third
// of the lease), and releases it at the end. A month whose lease another
// run holds is left to it (HeldByAnother); a lapsed lease, a run that stopped, is
// taken over, and the steps resume from the table as it is: each step
// another run did already is done, and says so.
func (r *Rotator) Retire(ctx context.Context, t Table) Retirement {
	rt, ok := r.startRetirement(ctx, t)
	if rt.hold != nil {
		defer rt.releaseLease(ctx)
		beat, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); rt.hold.heartbeat(beat, rt.pol.LeaseFor/3) }()
		defer wg.Wait()
		defer stop()
	}
	if !ok {
		return rt.ret
	}
	for _, s := range rt.steps() {
		if s.when != nil && !s.when() {
			continue
		}
		if !rt.renew(ctx, s.step) {
			return rt.ret
		}
		if !rt.run(ctx, s) {
			rt.retiredMeanwhile(ctx)
			return rt.ret
		}
		if rt.stop != "" {
			rt.ret.Outcome = rt.stop
			return rt.ret
		}
	}
	rt.ret.Outcome = Retired
	return rt.ret
}

// startRetirement checks what must hold before any step touches the
// table: the policy owns it, the run holds the month's lease, the table
// still exists (its description read anew, under the lease), the archive
// can be read, and the month is not retired already while its table takes
// writes again. ok is false when the retirement ends there; rt.ret says
// why. rt.hold is set once the lease is taken, ok or not.
func (r *Rotator) startRetirement(ctx context.Context, t Table) (rt *retirement, ok bool) {
	pol := r.Policy.withDefaults()
	month, owned := pol.Owns(t.Name)
	rt = &retirement{r: r, pol: pol, t: t, p: Partition{Table: pol.Prefix, Month: month}, now: r.now}
	rt.ret = Retirement{Table: t.Name, Partition: rt.p}
	if !owned {
		// Nothing is touched: not the lease, the stream, the protection, the table.
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s is not one of the %s-YYYY-MM tables; left alone", t.Name, pol.Prefix)
		return rt, false
	}
	start := time.Now()
	lease := rt.lease(ctx, start)
	if !lease.ok {
		return rt, false
	}
	// The listing may be older than another run's work: the steps start
	// from the table as it is now.
	fresh, err := r.Tables.Describe(ctx, t.Name)
	gone := errors.Is(err, ErrNotFound) || err == nil && fresh.Status == "DELETING"
	if err != nil && !gone {
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: describe before retiring: %w; left alone", t.Name, err)
		lease.record(rt, "")
		return rt, false
	}
	c, err := r.Archive.Read(ctx, rt.p)
	if err != nil {
		// Whether the month was retired is unknown: nothing is touched,
		// and the next run looks again.
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: read the archive of %s before retiring: %w; left alone", t.Name, rt.p.Prefix(), err)
		r.log().Error("rotation: the archive could not be read; table left alone", "table", t.Name, "err", err)
		lease.record(rt, "")
		return rt, false
	}
	if gone {
		if !c.AlreadyRetired() {
			rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s is gone, but the archive of %s records no retirement", t.Name, rt.p.Prefix())
			lease.record(rt, "")
			return rt, false
		}
		rt.ret.Outcome = RetiredByAnother
		lease.record(rt, fmt.Sprintf("the table is gone: another run retired the month (archive verified %s)", c.Manifest.Verification.At.Format(time.RFC3339)))
		return rt, false
	}
	rt.t = fresh
	lease.record(rt, "")
	// A month verified, compacted and retired whose table exists again with
	// its stream on: a writer created it anew (a retirement turns the stream
	// off before it verifies, and a kept table stays so). It holds late
	// writes, not the month: verifying it against the archive, and writing
	// the difference as a snapshot, would remove the month's items from
	// the archive. It is left alone, for an operator.
	if c.AlreadyRetired() && rt.t.StreamEnabled {
		v := c.Manifest.Verification
		rt.ret.Outcome = Alarm
		rt.ret.Err = fmt.Errorf("archive: %s exists again (created %s, stream on) although its month was verified archived (%d items) at %s: left alone; its items are late writes, not in the archive",
			t.Name, rt.t.CreatedAt.Format(time.RFC3339), v.ArchivedItems, v.At.Format(time.RFC3339))
		r.log().Error("rotation alarm: a retired month's table was created again; left alone", "table", t.Name, "err", rt.ret.Err)
		return rt, false
	}
	return rt, true
}

// leaseTaken is the outcome of taking a month's lease, recorded as the
// retirement's first step once the table is read anew (record).
type leaseTaken struct {
	ok     bool
	start  time.Time
	detail string
}

// lease takes the month's lease. A lease another run holds ends the
// retirement, Held, with who holds it and since when; a lapsed one is
// taken over.
func (rt *retirement) lease(ctx context.Context, start time.Time) leaseTaken {
	r := rt.r
	if r.Leases == nil {
		// Without leases two runs could work on one month together.
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: no lease store: not retired", rt.t.Name)
		r.step(rt.t.Name, StepResult{Step: StepLease, Err: rt.ret.Err})
		return leaseTaken{}
	}
	now := r.leaseNow()
	l := Lease{Table: rt.t.Name, Holder: r.holder(), Run: r.runID(), Since: now, Step: StepLease, Expires: now.Add(rt.pol.LeaseFor)}
	other, taken, err := r.Leases.Take(ctx, l, now)
	switch {
	case err != nil:
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: take the lease: %w; left alone", rt.t.Name, err)
		rt.recordStep(StepResult{Step: StepLease, Err: rt.ret.Err, Took: time.Since(start)})
		return leaseTaken{}
	case !taken:
		rt.ret.Outcome, rt.ret.HeldBy = HeldByAnother, other
		rt.recordStep(StepResult{Step: StepLease, Detail: "held by " + other.String() + ": left to it", Took: time.Since(start)})
		r.log().Info("rotation: the month's lease is held by another run; left to it", "table", rt.t.Name, "holder", other.Holder, "since", other.Since, "step", string(other.Step), "expires", other.Expires)
		return leaseTaken{}
	}
	rt.hold = &holding{leases: r.Leases, clock: r.leaseNow, dur: rt.pol.LeaseFor, lease: l}
	rt.ret.Lease = l
	detail := "taken until " + l.Expires.Format(time.RFC3339)
	if !other.IsZero() {
		rt.ret.TookOver = other
		detail += "; took over from " + other.Holder + ", which stopped at step " + string(other.Step) + " (its lease lapsed at " + other.Expires.UTC().Format(time.RFC3339) + "): resuming"
	}
	return leaseTaken{ok: true, start: start, detail: detail}
}

// record reports the lease step, taken, with what the start found (more).
// An error that ended the start is the retirement's (rt.ret.Err), not the
// lease's: the step says the lease was taken, and it was.
func (lt leaseTaken) record(rt *retirement, more string) {
	d := lt.detail
	if more != "" {
		d += "; " + more
	}
	rt.recordStep(StepResult{Step: StepLease, Detail: d, Took: time.Since(lt.start)})
}

// renew renews the lease before step; false when the retirement ends
// there: the lease was lost to another run (HeldByAnother: it took the month over
// after this run's lease lapsed) or could not be renewed (Failed).
func (rt *retirement) renew(ctx context.Context, step Step) bool {
	start := time.Now()
	other, kept, err := rt.hold.renew(ctx, step)
	switch {
	case err != nil:
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: renew the lease before %s: %w", rt.t.Name, step, err)
		rt.recordStep(StepResult{Step: StepLease, Err: rt.ret.Err, Took: time.Since(start)})
		return false
	case !kept:
		rt.ret.Outcome, rt.ret.HeldBy = HeldByAnother, other
		who := "nobody holds it now"
		if !other.IsZero() {
			who = "held by " + other.String()
		}
		rt.recordStep(StepResult{Step: StepLease, Detail: "lost before " + string(step) + " (it lapsed): " + who + "; left to it", Took: time.Since(start)})
		return false
	}
	rt.ret.Lease = rt.hold.held()
	return true
}

// releaseLease gives the month's lease up, even when ctx is done (the run
// timed out): the next run need not wait for it to lapse.
func (rt *retirement) releaseLease(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := rt.hold.release(ctx); err != nil {
		rt.r.log().Warn("rotation: the month's lease was not released; it lapses", "table", rt.t.Name, "expires", rt.hold.held().Expires, "err", err)
		return
	}
	rt.r.log().Info("rotation: lease released", "table", rt.t.Name)
}

// retiredMeanwhile turns a step that failed on the table being gone into
// RetiredByAnother when the month's archive says it was retired: another
// run took the same month through its steps and deleted the table first
// (the leases keep runs apart; this covers a run whose lease lapsed while
// a step worked, or a table deleted by hand). The failed step stays in the
// report.
func (rt *retirement) retiredMeanwhile(ctx context.Context) {
	if !errors.Is(rt.ret.Err, ErrNotFound) {
		return
	}
	c, err := rt.r.Archive.Read(ctx, rt.p)
	if err != nil || !c.AlreadyRetired() {
		return
	}
	rt.r.log().Info("rotation: the table is gone and its month retired, by another run", "table", rt.t.Name, "err", rt.ret.Err)
	rt.ret.Outcome, rt.ret.Err = RetiredByAnother, nil
}

// recordStep adds a step to the report and tells Rotator.OnStep.
func (rt *retirement) recordStep(res StepResult) {
	rt.ret.Steps = append(rt.ret.Steps, res)
	rt.r.step(rt.t.Name, res)
}

// run runs one step and records it; false when it failed (the retirement
// then stops, Failed, and the next run resumes: every step is idempotent).
func (rt *retirement) run(ctx context.Context, s retireStep) bool {
	start := time.Now()
	detail, err := s.run(ctx)
	rt.recordStep(StepResult{Step: s.step, Detail: detail, Took: time.Since(start), Err: err})
	if rt.alarm != nil {
		rt.alarm()
		rt.alarm = nil
	}
	if err != nil {
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: %s: %w", rt.t.Name, s.step, err)
		return false
	}
	return true
}
