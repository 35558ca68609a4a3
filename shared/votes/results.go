package votes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNoPoll is returned for a poll that does not exist.
var ErrNoPoll = errors.New("votes: no such poll")

// ErrPollExists is returned when creating a poll whose id is taken.
var ErrPollExists = errors.New("votes: poll already exists")

// CountReader reads polls and their shards' counts.
type CountReader interface {
	Poll(ctx context.Context, id string) (Poll, error) // ErrNoPoll when missing
	ShardCounts(ctx context.Context, pollID string, shard int) (map[string]int64, error)
	// RejectCounts sums the poll's rejected votes by reason (RejectReader).
	RejectCounts(ctx context.Context, pollID string) (map[Reason]int64, error)
	// Staleness says how far the counters are behind the ledger at now.
	Staleness(ctx context.Context, now time.Time) (Staleness, error)
}

// Staleness is how far the counters are behind the ledger: votes are
// written to the ledger first and counted from its stream by the tally.
type Staleness struct {
	// CountedAt is the tally's latest commit into the counters (zero when
	// it has committed nothing for the open months).
	CountedAt time.Time `json:"countedAt,omitzero"`
	// LagSeconds is, at the latest commits, the time from a vote's ledger
	// write to its counting.
	LagSeconds float64 `json:"lagSeconds"`
}

// Totals are a poll's results.
type Totals struct {
	PollID string           `json:"pollId"`
	Totals map[string]int64 `json:"totals"`
	Total  int64            `json:"total"`
	Shards int              `json:"shards"`
	// Rejected counts the poll's rejected votes by reason: those whose
	// message named the poll (see RejectRecorder).
	Rejected map[Reason]int64 `json:"rejected"`
	// ReadAt is when the shards were read; Source is "shards" for a read
	// made now, "cache" for a materialized copy AgeSeconds old.
	ReadAt     time.Time `json:"readAt"`
	Source     string    `json:"source"`
	AgeSeconds float64   `json:"ageSeconds"`
	// Counters is how far the counters were behind the ledger when read.
	Counters Staleness `json:"counters"`
}

// Results reads every shard of a poll in parallel (scatter) and sums them
// (gather). Every option of the poll appears, with 0 if it has no votes.
func Results(ctx context.Context, r CountReader, pollID string, now func() time.Time) (Totals, error) {
	p, err := r.Poll(ctx, pollID)
	if err != nil {
		return Totals{}, err
	}
	t := Totals{PollID: p.ID, Totals: map[string]int64{}, Shards: p.Shards}
	for _, o := range p.Options {
		t.Totals[o] = 0
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	wg.Go(func() {
		rejected, err := r.RejectCounts(ctx, p.ID)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("rejects: %w", err))
		}
		t.Rejected = rejected
	})
	for shard := 0; shard < p.Shards; shard++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts, err := r.ShardCounts(ctx, p.ID, shard)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", shard, err))
				return
			}
			for o, n := range counts {
				t.Totals[o] += n
				t.Total += n
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return Totals{}, fmt.Errorf("votes: results of %s: %w", pollID, errors.Join(errs...))
	}
	t.ReadAt = now().UTC()
	t.Source = "shards"
	if t.Counters, err = r.Staleness(ctx, t.ReadAt); err != nil {
		return Totals{}, fmt.Errorf("votes: results of %s: %w", pollID, err)
	}
	return t, nil
}

// TotalsCache keeps a materialized copy of a poll's totals, so a hot read
// is one GetItem instead of N shard queries.
type TotalsCache interface {
	// CachedTotals returns the stored totals; ok is false when there are none.
	CachedTotals(ctx context.Context, pollID string) (t Totals, ok bool, err error)
	// PutTotals stores totals unless newer ones are already there.
	PutTotals(ctx context.Context, t Totals) error
}

// CachedResults serves a poll's totals from the cache when they are at most
// maxAge old, and otherwise reads the shards and refreshes the cache. The
// returned Totals say where they came from and how old they are.
func CachedResults(ctx context.Context, r CountReader, c TotalsCache, pollID string, maxAge time.Duration, now func() time.Time) (Totals, error) {
	if maxAge > 0 {
		t, ok, err := c.CachedTotals(ctx, pollID)
		if err != nil {
			return Totals{}, err
		}
		if ok {
			if age := now().Sub(t.ReadAt); age <= maxAge && age >= 0 {
				t.Source, t.AgeSeconds = "cache", age.Seconds()
				return t, nil
			}
		}
	}
	t, err := Results(ctx, r, pollID, now)
	if err != nil {
		return Totals{}, err
	}
	if err := c.PutTotals(ctx, t); err != nil {
		return Totals{}, err
	}
	return t, nil
}
