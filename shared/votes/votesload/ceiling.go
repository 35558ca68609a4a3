package votesload

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Putter puts one vote into its month's ledger with the counter's
// condition. *votesddb.Votes satisfies it.
type Putter interface {
	PutVote(ctx context.Context, e votes.Entry) error
}

// Ceiling measures what the store serves of the counter's own writes: a
// plain loader, with no queue and no function in between, putting votes of
// one poll straight into the ledger as the counter puts them, Writers at
// once. The bench sets the counter's steady rate beside it, and the soak
// sizes its load from it.
type Ceiling struct {
	Store   Putter
	PollID  string
	Options []string // the options the votes go to in turn (default one, "a")
	Writers int      // puts in flight (default 16)
	// Now is the castAt of each vote, so the month of its ledger table
	// (default time.Now).
	Now func() time.Time

	seq     atomic.Int64
	written atomic.Int64 // puts that succeeded, over every Run
}

// Run puts for d with all the writers and returns the puts that succeeded
// a second. It fails only when none did.
func (c *Ceiling) Run(ctx context.Context, d time.Duration) (float64, error) {
	writers := cmp.Or(c.Writers, 16)
	options := c.Options
	if len(options) == 0 {
		options = []string{"a"}
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	var ok atomic.Int64
	var mu sync.Mutex
	var firstErr error
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				i := c.seq.Add(1)
				e := votes.Entry{Vote: votes.Vote{VoteID: fmt.Sprint("c", i), PollID: c.PollID, OptionID: options[int(i)%len(options)],
					VoterID: fmt.Sprint("u", i), CastAt: now().UTC()}}
				if err := c.Store.PutVote(ctx, e); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					continue
				}
				ok.Add(1)
				c.written.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() == 0 {
		return 0, fmt.Errorf("votesload: ceiling: no put succeeded: %w", cmp.Or(firstErr, ctx.Err()))
	}
	return float64(ok.Load()) / d.Seconds(), nil
}

// Written is the puts that succeeded over every Run: the votes of the poll
// in the ledger.
func (c *Ceiling) Written() int64 { return c.written.Load() }
