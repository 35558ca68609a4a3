package votes

import "sync"

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
