package votes

import (
	"hash/fnv"
	"sort"
	"strconv"
	"sync"
)

// LedgerSuffixes is M: ledger partition keys are <pollId>#<hash(voterId) mod M>,
// a calculated suffix, so one poll's ledger spreads over M partitions and a
// voter's entries are found in exactly one of them.
const LedgerSuffixes = 16

// MaxTransactionActions is DynamoDB's limit of actions per TransactWriteItems.
const MaxTransactionActions = 100

// Entry is an accepted vote on its way to the ledger.
type Entry struct {
	Vote
	OneVotePerVoter bool
	// MessageID is the queue message the vote came in.
	MessageID string
	shards    int
}

// LedgerSuffix is the vote's ledger partition suffix in [0, LedgerSuffixes).
func LedgerSuffix(voterID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(voterID))
	return int(h.Sum32() % LedgerSuffixes)
}

// LedgerKey returns the ledger item's keys: the partition key
// <pollId>#<suffix> and the sort key <voterId>#<voteId>, or <voterId> alone
// for one-vote-per-voter polls (so a second vote collides). Ids never hold '#'.
func (e Entry) LedgerKey() (pk, sk string) {
	pk = e.PollID + "#" + strconv.Itoa(LedgerSuffix(e.VoterID))
	if e.OneVotePerVoter {
		return pk, e.VoterID
	}
	return pk, e.VoterID + "#" + e.VoteID
}

// Month is the ledger table's month of the vote: YYYY-MM of castAt (UTC).
func (e Entry) Month() string { return MonthOf(e.CastAt) }

// Increment adds N votes to one option on one shard of a poll.
type Increment struct {
	PollID   string
	OptionID string
	Shard    int
	N        int64
}

// Group is what commits together: ledger entries and the increments that
// count exactly them. In exactly-once mode a group is one transaction, so it
// never holds more than MaxTransactionActions actions: besides a put per
// entry and an update per increment, one check per month of its entries
// that the month's ledger is still open (the rotator closes a month before
// it verifies its archive; see the store's Commit).
type Group struct {
	Entries    []Entry
	Increments []Increment
}

// Months are the ledger months of the group's entries, in order.
func (g Group) Months() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range g.Entries {
		if m := e.Month(); !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// Actions is the number of transaction actions the group needs.
func (g Group) Actions() int { return len(g.Entries) + len(g.Increments) + len(g.Months()) }

// ShardPicker returns a shard in [0, n): the seeds' random-suffix sharding.
// The default is a DeckPicker; tests and benchmarks pin it.
type ShardPicker func(n int) int

// Coalesce sums entries per (poll, option) into increments, each on a shard
// chosen by pick among the poll's shards.
func Coalesce(entries []Entry, shards map[string]int, pick ShardPicker) []Increment {
	type key struct{ poll, option string }
	sums := map[key]int64{}
	var order []key
	for _, e := range entries {
		k := key{e.PollID, e.OptionID}
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k]++
	}
	out := make([]Increment, 0, len(order))
	for _, k := range order {
		out = append(out, Increment{PollID: k.poll, OptionID: k.option, Shard: pick(max(shards[k.poll], 1)), N: sums[k]})
	}
	return out
}

// Plan splits accepted entries into groups of at most MaxTransactionActions
// actions (ledger puts plus the increments that count them). A group holds
// one month's entries only, so its transaction writes one ledger table
// (around a month's turn a batch holds late votes of the month before:
// DynamoDB Local all but stops, on lock timeouts, when concurrent
// transactions span two ledger tables and the counters). Within a month,
// entries are ordered by poll and option, so a group holds few distinct
// counters and each increment carries many votes.
func Plan(entries []Entry, shards map[string]int, pick ShardPicker) []Group {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if mi, mj := sorted[i].Month(), sorted[j].Month(); mi != mj {
			return mi < mj
		}
		if sorted[i].PollID != sorted[j].PollID {
			return sorted[i].PollID < sorted[j].PollID
		}
		return sorted[i].OptionID < sorted[j].OptionID
	})
	var groups []Group
	var cur []Entry
	var month string
	counters := map[[2]string]bool{}
	flush := func() {
		if len(cur) > 0 {
			groups = append(groups, Group{Entries: cur, Increments: Coalesce(cur, shards, pick)})
		}
		cur, counters = nil, map[[2]string]bool{}
	}
	for _, e := range sorted {
		k := [2]string{e.PollID, e.OptionID}
		need := 1
		if !counters[k] {
			need++ // the first entry of a counter also brings its increment
		}
		// A group's actions: its puts, its increments and its month's check.
		if len(cur) > 0 && (e.Month() != month || len(cur)+len(counters)+1+need > MaxTransactionActions) {
			flush()
			need = 2
		}
		cur = append(cur, e)
		counters[k], month = true, e.Month()
	}
	flush()
	return groups
}

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
