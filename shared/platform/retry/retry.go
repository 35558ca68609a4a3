// Package retry is the one backoff and context-aware sleep of ddbpipe: the
// pause before retrying throttled, unprocessed or conflicting AWS requests,
// the spacing of a vote's redeliveries, the CLI's waits, and the sleeps of
// the local runner and fault proxy. It imports no AWS package, so domain
// code may use it too.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential backoff: the step before retry n (1 for
// the first retry) is min(Base·2^(n-1), Max), and Jitter says how the pause
// is drawn from it.
type Backoff struct {
	Base   time.Duration // first step; must be > 0
	Max    time.Duration // cap on a step; must be >= Base
	Jitter Jitter        // EqualJitter unless set
}

// Jitter is how a Backoff's pause is drawn from its step.
type Jitter int

const (
	// EqualJitter draws from the upper half of the step: retries of many
	// callers spread out while each still waits at least half its step.
	EqualJitter Jitter = iota
	// FullJitter draws from the whole step, from nothing up: callers that
	// collided on one item (a transaction conflict) do not collide again
	// in step.
	FullJitter
	// NoJitter pauses for the step itself: a schedule stated in figures
	// (a vote's redeliveries), or a lone caller with nobody to spread from
	// (the CLI waiting on the pipeline).
	NoJitter
)

// Delay is the pause before retry n. n < 1 counts as 1.
func (b Backoff) Delay(n int) time.Duration {
	step := b.Base
	for i := 1; i < n && step < b.Max; i++ {
		step *= 2
	}
	step = min(step, b.Max)
	if step <= 0 {
		return 0
	}
	switch b.Jitter {
	case FullJitter:
		return rand.N(step + 1)
	case NoJitter:
		return step
	}
	return step/2 + rand.N(step/2+1)
}

// Wait sleeps Delay(n), or returns ctx's error when ctx ends first.
func (b Backoff) Wait(ctx context.Context, n int) error { return Sleep(ctx, b.Delay(n)) }

// Sleep pauses for d, or returns ctx's error when ctx ends first. A d <= 0
// returns at once (with ctx's error, if any).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
