package votes

import (
	"hash/fnv"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// MaxTransactionActions is DynamoDB's limit of actions per TransactWriteItems.
const MaxTransactionActions = 100

// Increment adds N votes to one option on one shard of a poll.
type Increment struct {
	PollID   string
	OptionID string
	Shard    int
	N        int64
}

// ShardPicker returns a shard in [0, n): the seeds' random-suffix sharding.
// The default is a DeckPicker; tests and benchmarks pin it.
type ShardPicker func(n int) int

// DeckPicker deals shards like cards from a shuffled deck, reshuffled when
// empty: each pick is a uniformly random shard, and any N consecutive picks
// of one picker cover all N shards, so even a short run spreads its writes
// evenly. It is safe for concurrent use.
func DeckPicker(rng func(n int) int) ShardPicker {
	var mu sync.Mutex
	decks := map[int][]int{}
	return func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		d := decks[n]
		if len(d) == 0 {
			d = make([]int, n)
			for i := range d {
				d[i] = i
			}
			for i := n - 1; i > 0; i-- {
				j := rng(i + 1)
				d[i], d[j] = d[j], d[i]
			}
		}
		decks[n] = d[1:]
		return d[0]
	}
}

// CounterPick places the increments of one tally commit: the counter
// shard, in [0, n), that the tally of stream shard s writes a poll's
// votes to at time now.
type CounterPick func(s StreamShard, pollID string, n int, now time.Time) int

// StreamPick derives the counter shard from the stream shard, so that
// tallies running at once (one per stream shard) do not contend for the
// same counter items: each stream shard holds its own slot among the
// poll's shards, and every slot moves on by one each period, so that over
// a few periods each tally spreads its writes over all n shards evenly,
// even when the stream has one shard. Two tallies share items only when
// their slots are equal, which happens for about (K-1)/n of K stream
// shards, against every pair of concurrent commits sharing some of their
// items with a pick per option (RandomPick); a commit writes all its
// options to one shard.
func StreamPick(period time.Duration) CounterPick {
	if period <= 0 {
		period = time.Second
	}
	return func(s StreamShard, pollID string, n int, now time.Time) int {
		if n <= 1 {
			return 0
		}
		h := fnv.New64a()
		_, _ = io.WriteString(h, s.Table+"\x00"+s.Shard+"\x00"+pollID)
		slot := h.Sum64() % uint64(n)
		step := uint64(now.UnixNano()/int64(period)) % uint64(n)
		return int((slot + step) % uint64(n))
	}
}

// RandomPick places each (poll, option) of a commit on a shard dealt by a
// DeckPicker, whatever the stream shard: the seeds' random suffixes. Two
// tallies committing at once on one poll share an item with probability
// 1 - (1-1/n)^options; the bench keeps it as the comparison.
func RandomPick() CounterPick {
	deck := DeckPicker(rand.IntN)
	return func(_ StreamShard, _ string, n int, _ time.Time) int { return deck(n) }
}
