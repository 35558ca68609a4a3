package votes

import (
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// FirstRetryDelay is how long a vote failed back for the first time waits
// before it is delivered again; each later delivery waits twice as long,
// up to the queue's visibility timeout.
const FirstRetryDelay = 10 * time.Second

// RetryDelay is the wait before the next delivery of a vote the counter
// gave back on its receives-th delivery: FirstRetryDelay doubling, at most
// most, without jitter (the figures below, and Retry's budget, are stated
// on it). A backlog the store could not take then comes back soon (the
// store may serve again in seconds), and a store down for long spends the
// message's receives slowly: with most = 360 s, 20 receives last about
// 95 minutes before the dead-letter queue.
func RetryDelay(receives int, most time.Duration) time.Duration {
	return retry.Backoff{Base: FirstRetryDelay, Max: most, Jitter: retry.NoJitter}.Delay(receives)
}

// RetryBudget is how long a vote given back stays deliverable at least,
// counted from when it was sent, whatever spacing its deliveries had: a
// cold month's table throttles for 30 to 60 minutes.
const RetryBudget = time.Hour

// MinRetryDelay is the shortest wait before a vote given back comes again.
const MinRetryDelay = time.Second

// Retry sets when a vote the counter gave back is delivered again.
type Retry struct {
	// Most is the longest wait: the queue's visibility timeout.
	Most time.Duration
	// MaxReceives is the queue's maxReceiveCount, the deliveries before the
	// dead-letter queue; 0 when unknown (no budget is kept).
	MaxReceives int
	// Budget is RetryBudget unless set.
	Budget time.Duration
}

// Failed is the wait for a vote given back for a cause (a write failed, no
// ledger yet, the poll unread): RetryDelay's doubling, kept to the budget.
func (r Retry) Failed(receives int, age time.Duration) time.Duration {
	return r.keep(RetryDelay(receives, r.Most), receives, age)
}

// Late is the wait for a vote the counter did not reach before its
// deadline while the store took rate votes a second: ahead late votes of
// the same batch come first, so it comes back when the store, at that
// rate, would reach it. The queue then brings the backlog back about as
// fast as the store takes it, instead of all of it after one delay while
// the store idles. A batch that wrote nothing (rate 0) waits as Failed.
func (r Retry) Late(receives int, age time.Duration, ahead int, rate float64) time.Duration {
	if rate <= 0 {
		return r.Failed(receives, age)
	}
	d := time.Duration(float64(ahead+1) / rate * float64(time.Second))
	return r.keep(min(max(d, MinRetryDelay), r.Most), receives, age)
}

// keep lengthens d so that the vote, on its receives-th delivery and age
// old, stays deliverable for the budget even if every later delivery
// waits Most: age + d + (MaxReceives − receives) × Most ≥ Budget. The wait
// is never longer than Most.
func (r Retry) keep(d time.Duration, receives int, age time.Duration) time.Duration {
	if r.MaxReceives <= 0 || r.Most <= 0 {
		return d
	}
	budget := r.Budget
	if budget <= 0 {
		budget = RetryBudget
	}
	floor := budget - age - time.Duration(max(r.MaxReceives-receives, 0))*r.Most
	return min(max(d, floor), r.Most)
}
