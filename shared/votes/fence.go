package votes

import (
	"fmt"
	"time"
)

// MonthLayout is how a ledger month is written: YYYY-MM.
const MonthLayout = "2006-01"

// MonthOf is the ledger month (UTC) of t.
func MonthOf(t time.Time) string { return t.UTC().Format(MonthLayout) }

// monthEnd is the first instant after month m (the month of t).
func monthEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0)
}

// Fence is the month fence: the ledger of month M takes votes until M's
// end plus Grace, by the counter's clock, and never after. The rotator
// starts retiring M only later still (RetireAfter: the grace, plus the
// longest a counter invocation that passed the fence can go on writing,
// plus clock error), so no vote lands in M once its archive is verified,
// and the fence costs no write and no read per vote.
type Fence struct {
	// Grace is how long after its end a month still takes late votes (a
	// producer's queue backed up, a vote cast at 23:59 delivered at 00:01).
	Grace time.Duration
}

// ClosesAt is when month m's ledger stops taking votes: its end plus the
// grace. m is YYYY-MM.
func (f Fence) ClosesAt(m string) (time.Time, error) {
	t, err := time.Parse(MonthLayout, m)
	if err != nil {
		return time.Time{}, fmt.Errorf("votes: month %q is not YYYY-MM", m)
	}
	return monthEnd(t).Add(f.Grace), nil
}

// Accepts rejects a vote whose month no longer takes votes at now (the
// counter's clock): ReasonMonthClosed. A vote early for its month cannot
// pass Parse (at most MaxClockSkew ahead), and the rotator creates the
// next month's table ahead of time.
func (f Fence) Accepts(castAt, now time.Time) error {
	closes := monthEnd(castAt).Add(f.Grace)
	if !now.Before(closes) {
		return reject(ReasonMonthClosed, "castAt %s is in %s, whose ledger stopped taking votes at %s (the month's end plus a grace of %s)",
			castAt.UTC().Format(time.RFC3339), MonthOf(castAt), closes.Format(time.RFC3339), f.Grace)
	}
	return nil
}
