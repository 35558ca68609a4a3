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
}

// Totals are a poll's results.
type Totals struct {
	PollID string           `json:"pollId"`
	Totals map[string]int64 `json:"totals"`
	Total  int64            `json:"total"`
	Shards int              `json:"shards"`
	ReadAt time.Time        `json:"readAt"`
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
	return t, nil
}
