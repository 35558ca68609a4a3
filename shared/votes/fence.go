package votes

import (
	"fmt"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

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
	t, err := ledger.ClosesAt(m, f.Grace)
	if err != nil {
		return time.Time{}, fmt.Errorf("votes: %w", err)
	}
	return t, nil
}

// Accepts rejects a vote whose month no longer takes votes at now (the
// counter's clock): ReasonMonthClosed. A vote early for its month cannot
// pass Parse (at most MaxClockSkew ahead), and the rotator creates the
// next month's table ahead of time.
func (f Fence) Accepts(castAt, now time.Time) error {
	closes := ledger.End(castAt).Add(f.Grace)
	if !now.Before(closes) {
		return reject(ReasonMonthClosed, "castAt %s is in %s, whose ledger stopped taking votes at %s (the month's end plus a grace of %s)",
			castAt.UTC().Format(time.RFC3339), ledger.MonthOf(castAt), closes.Format(time.RFC3339), f.Grace)
	}
	return nil
}
