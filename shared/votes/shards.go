package votes

import (
	"hash/fnv"
	"io"
	"math/rand/v2"
	"strconv"
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
	// Slot, when set, is the writer's own part of the option's count on
	// the shard: an item of its own (sort key <option>#<slot>), which no
	// other tally writes. Reads sum an option's slots.
	Slot string
	N    int64
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

// Place is where a tally commit puts a poll's increments: a counter
// shard in [0, n) (the partition key) and a slot in the item's sort key
// ("" for none).
type Place struct {
	Shard int
	Slot  string
}

// CounterPick places the increments of one tally commit of stream shard s
// on one of a poll's n counter shards at time now.
type CounterPick func(s StreamShard, pollID string, n int, now time.Time) Place

// SlotsPerShard is the number of slots StreamPick spreads stream shards
// over, in each counter shard's sort keys.
const SlotsPerShard = 4096

// StreamPick derives a commit's place from the stream shard, so that
// tallies running at once (one per stream shard) never contend for the
// same counter items: the item's sort key holds a slot of the stream
// shard's own (one of SlotsPerShard, by a hash of table and shard: two of
// 16 stream shards share one with odds of 1 in 34), so its count of an
// option is an item no other tally writes. The counter shard (the
// partition key) moves on by one each period from a start of the stream
// shard's own, so that over a few periods each tally spreads its writes
// over all n shards evenly, even when the stream has one shard. The price
// is on reads: a shard holds an item per option and slot written, not
// per option.
func StreamPick(period time.Duration) CounterPick {
	if period <= 0 {
		period = time.Second
	}
	return func(s StreamShard, pollID string, n int, now time.Time) Place {
		h := fnv.New64a()
		_, _ = io.WriteString(h, s.Table+"\x00"+s.Shard)
		x := h.Sum64()
		x ^= x >> 31
		x *= 0x9e3779b97f4a7c15
		x ^= x >> 29
		place := Place{Slot: strconv.FormatUint(x%SlotsPerShard, 36)}
		if n > 1 {
			h.Reset()
			_, _ = io.WriteString(h, s.Table+"\x00"+s.Shard+"\x00"+pollID)
			step := uint64(now.UnixNano()/int64(period)) % uint64(n)
			place.Shard = int((h.Sum64()%uint64(n) + step) % uint64(n))
		}
		return place
	}
}

// RandomPick places each (poll, option) of a commit on a shard dealt by a
// DeckPicker, whatever the stream shard, with no slot: the seeds' random
// suffixes, as the tally did before StreamPick. Two tallies committing at
// once on one poll share an item with probability 1 - (1-1/n)^options; the
// bench keeps it as the comparison.
func RandomPick() CounterPick {
	deck := DeckPicker(rand.IntN)
	return func(_ StreamShard, _ string, n int, _ time.Time) Place { return Place{Shard: deck(n)} }
}
