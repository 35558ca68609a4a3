package archive

import (
	"context"
	"errors"
	"fmt"
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
	ret   Retirement
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
func (r *Rotator) Retire(ctx context.Context, t Table) Retirement {
	rt, ok := r.startRetirement(ctx, t)
	if !ok {
		return rt.ret
	}
	for _, s := range rt.steps() {
		if s.when != nil && !s.when() {
			continue
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
// table: the policy owns it, the archive can be read, and the month is not
// retired already while its table takes writes again. ok is false when
// the retirement ends there; rt.ret says why.
func (r *Rotator) startRetirement(ctx context.Context, t Table) (rt *retirement, ok bool) {
	pol := r.Policy.withDefaults()
	month, owned := pol.Owns(t.Name)
	rt = &retirement{r: r, pol: pol, t: t, p: Partition{Table: pol.Prefix, Month: month}, now: r.now}
	rt.ret = Retirement{Table: t.Name, Partition: rt.p}
	if !owned {
		// Nothing is touched: not the stream, not the protection, not the table.
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s is not one of the %s-YYYY-MM tables; left alone", t.Name, pol.Prefix)
		return rt, false
	}
	c, err := r.Archive.Read(ctx, rt.p)
	if err != nil {
		// Whether the month was retired is unknown: nothing is touched,
		// and the next run looks again.
		rt.ret.Outcome, rt.ret.Err = Failed, fmt.Errorf("archive: %s: read the archive of %s before retiring: %w; left alone", t.Name, rt.p.Prefix(), err)
		r.log().Error("rotation: the archive could not be read; table left alone", "table", t.Name, "err", err)
		return rt, false
	}
	// A month verified, compacted and retired whose table exists again with
	// its stream on: a writer created it anew (a retirement turns the stream
	// off before it verifies, and a kept table stays so). It holds late
	// writes, not the month: verifying it against the archive, and writing
	// the difference as a snapshot, would remove the month's items from
	// the archive. It is left alone, for an operator.
	if c.AlreadyRetired() && t.StreamEnabled {
		v := c.Manifest.Verification
		rt.ret.Outcome = Alarm
		rt.ret.Err = fmt.Errorf("archive: %s exists again (created %s, stream on) although its month was verified archived (%d items) at %s: left alone; its items are late writes, not in the archive",
			t.Name, t.CreatedAt.Format(time.RFC3339), v.ArchivedItems, v.At.Format(time.RFC3339))
		r.log().Error("rotation alarm: a retired month's table was created again; left alone", "table", t.Name, "err", rt.ret.Err)
		return rt, false
	}
	return rt, true
}

// retiredMeanwhile turns a step that failed on the table being gone into
// Retired when the month's archive says it was retired: another run (the
// scheduled rotator and an operator's, say) took the same month through
// its steps and deleted the table first. The failed step stays in the
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
	rt.ret.Outcome, rt.ret.Err = Retired, nil
}

// run runs one step and records it; false when it failed (the retirement
// then stops, Failed, and the next run resumes: every step is idempotent).
func (rt *retirement) run(ctx context.Context, s retireStep) bool {
	start := time.Now()
	detail, err := s.run(ctx)
	res := StepResult{Step: s.step, Detail: detail, Took: time.Since(start), Err: err}
	rt.ret.Steps = append(rt.ret.Steps, res)
	rt.r.step(rt.t.Name, res)
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
