package archive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// Lease is one run's hold on a month's retirement: only the run that holds
// a live lease takes the month's table through its steps, so two rotations
// at once (the daily schedule and an operator's `tables rotate`) never
// work on the same month together.
type Lease struct {
	// Table is the ledger table being retired.
	Table string
	// Holder says who holds it, in words: "ddbpipe tables rotate (alice@host,
	// pid 4242)", "RotatorFunction (request 8f2c…)".
	Holder string
	// Run is the run's id, unique: what the conditional writes compare.
	Run string
	// Since is when the run took the lease.
	Since time.Time
	// Step is the step the run was at when it last renewed the lease.
	Step Step
	// Expires is when the lease lapses unless renewed: a crashed run's
	// lease lapses, and the next run takes it over and resumes.
	Expires time.Time
}

// IsZero reports whether l is no lease.
func (l Lease) IsZero() bool { return l.Run == "" }

// String says who holds the lease, since when, where it is and until when.
func (l Lease) String() string {
	step := ""
	if l.Step != "" {
		step = ", at step " + string(l.Step)
	}
	return fmt.Sprintf("%s since %s%s, until %s", l.Holder, l.Since.UTC().Format(time.RFC3339), step, l.Expires.UTC().Format(time.RFC3339))
}

// Leases keeps the months' leases, one per ledger table, written with
// conditions so that at most one run holds a month's at a time.
type Leases interface {
	// Take gives l to its run unless another run's lease of l.Table is live
	// at now (expires after it). taken is false when one is: other is that
	// lease, left as it is. When taken, other is the lapsed lease of another
	// run it replaced (zero when there was none, or it was the run's own).
	Take(ctx context.Context, l Lease, now time.Time) (other Lease, taken bool, err error)
	// Renew writes l's expiry and step while l.Run holds the lease. kept is
	// false when it does not any more: other is whoever holds it now (zero
	// when nobody does).
	Renew(ctx context.Context, l Lease) (other Lease, kept bool, err error)
	// Release removes l while l.Run holds it; a lease gone or another's is
	// left as it is, without an error.
	Release(ctx context.Context, l Lease) error
}

// DefaultLeaseFor is how long a lease lasts unless renewed: a run renews
// it at each step and every third of it while a step works, so only a run
// that stopped lets it lapse. The rotator function's timeout is 15 minutes.
const DefaultLeaseFor = 15 * time.Minute

// newRunID returns a random id for a run.
func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// holding is a lease a retirement holds: renewed at each step and, while a
// step works, every third of the lease (the heartbeat), until released.
// Its methods are safe for concurrent use (the heartbeat renews from its
// own goroutine).
type holding struct {
	leases Leases
	clock  func() time.Time
	dur    time.Duration

	mu    sync.Mutex
	lease Lease
	// lost is set once a renewal found the lease another run's (or gone):
	// the retirement stops at its next step. other is that run's lease.
	lost  bool
	other Lease
}

// renew extends the lease, recording step; kept is false when the lease
// is lost (now or by an earlier renewal, the heartbeat's).
func (h *holding) renew(ctx context.Context, step Step) (other Lease, kept bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost {
		return h.other, false, nil
	}
	l := h.lease
	if step != "" {
		l.Step = step
	}
	l.Expires = h.clock().Add(h.dur)
	other, kept, err = h.leases.Renew(ctx, l)
	switch {
	case err != nil:
		return Lease{}, true, err
	case !kept:
		h.lost, h.other = true, other
		return other, false, nil
	}
	h.lease = l
	return Lease{}, true, nil
}

// heartbeat renews the lease every third of its duration until ctx ends;
// a failed renewal is left to the next (the step's renewal reports a lost
// lease). It returns at once when every is zero or less.
func (h *holding) heartbeat(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _, _ = h.renew(ctx, "")
		}
	}
}

// release gives the lease up; lost leases are not another's to remove.
func (h *holding) release(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost {
		return nil
	}
	return h.leases.Release(ctx, h.lease)
}

// held returns the lease as last written.
func (h *holding) held() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}
