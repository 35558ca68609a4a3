package votesload

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// memLedger keeps the votes put, and fails every put when told to.
type memLedger struct {
	mu    sync.Mutex
	votes map[string]votes.Vote
	fail  error
}

func (m *memLedger) PutVote(_ context.Context, e votes.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if _, dup := m.votes[e.Vote.VoteID]; dup {
		return errors.New("the vote is already in the ledger")
	}
	m.votes[e.Vote.VoteID] = e.Vote
	return nil
}

func TestCeilingPutsDistinctVotesOfItsPoll(t *testing.T) {
	m := &memLedger{votes: map[string]votes.Vote{}}
	at := time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)
	c := &Ceiling{Store: m, PollID: "probe", Options: []string{"x", "y"}, Writers: 4, Now: func() time.Time { return at }}
	var rates []float64
	for range 2 { // a second run goes on from the first's ids
		rate, err := c.Run(context.Background(), 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		rates = append(rates, rate)
	}
	if c.Written() != int64(len(m.votes)) || len(m.votes) == 0 {
		t.Fatalf("written %d, the ledger holds %d", c.Written(), len(m.votes))
	}
	if rates[0] <= 0 || rates[1] <= 0 {
		t.Errorf("rates %v, want both above 0", rates)
	}
	perOption := map[string]int{}
	for _, v := range m.votes {
		if v.PollID != "probe" || !v.CastAt.Equal(at) {
			t.Fatalf("vote %+v: want poll probe, cast at %s", v, at)
		}
		perOption[v.OptionID]++
	}
	if len(perOption) != 2 || perOption["x"]-perOption["y"] > 1 || perOption["y"]-perOption["x"] > 1 {
		t.Errorf("options %v, want x and y in turn", perOption)
	}
}

func TestCeilingFailsWhenNothingIsPut(t *testing.T) {
	m := &memLedger{votes: map[string]votes.Vote{}, fail: errors.New("no such table")}
	c := &Ceiling{Store: m, PollID: "probe"}
	if _, err := c.Run(context.Background(), 20*time.Millisecond); err == nil || c.Written() != 0 {
		t.Fatalf("err %v, written %d: want an error naming the store's, nothing written", err, c.Written())
	}
}
