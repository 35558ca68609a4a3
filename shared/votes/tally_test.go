package votes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// memTally is a TallyStore in memory with DynamoDB's semantics for what the
// tally relies on: a commit applies all its increments and its checkpoint,
// or nothing, and only while the checkpoint is the one it was planned from.
type memTally struct {
	pollSet
	mu       sync.Mutex
	ckpt     map[StreamShard]string
	counts   map[[3]string]int64 // poll, option, shard
	commits  int
	throttle int // the next n commits are throttled
	// afterCommit runs after each successful commit (a crash, a rival).
	afterCommit func()
}

var _ TallyStore = (*memTally)(nil)

func newMemTally(polls ...Poll) *memTally {
	return &memTally{pollSet: newPollSet(polls...), ckpt: map[StreamShard]string{}, counts: map[[3]string]int64{}}
}

func (m *memTally) Checkpoint(_ context.Context, s StreamShard) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ckpt[s], nil
}

func (m *memTally) CommitTally(_ context.Context, s StreamShard, from string, c TallyCommit) error {
	m.mu.Lock()
	if m.throttle > 0 {
		m.throttle--
		m.mu.Unlock()
		return fmt.Errorf("commit: %w", ErrThrottled)
	}
	if len(c.Increments)+1 > MaxTransactionActions {
		m.mu.Unlock()
		return fmt.Errorf("commit of %d actions: over the transaction limit", len(c.Increments)+1)
	}
	if m.ckpt[s] != from {
		m.mu.Unlock()
		return ErrCheckpointMoved
	}
	m.ckpt[s] = c.Seq
	for _, inc := range c.Increments {
		m.counts[[3]string{inc.PollID, inc.OptionID, fmt.Sprint(inc.Shard)}] += inc.N
	}
	m.commits++
	after := m.afterCommit
	m.mu.Unlock()
	if after != nil {
		after()
	}
	return nil
}

func (m *memTally) total(poll string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k, v := range m.counts {
		if k[0] == poll {
			n += v
		}
	}
	return n
}

// records are n votes for poll p over the given options, with sequence
// numbers from first on (21 digits, as DynamoDB's are at least).
func records(first, n int, p string, options ...string) []LedgerRecord {
	out := make([]LedgerRecord, n)
	for i := range out {
		out[i] = LedgerRecord{Seq: fmt.Sprintf("%021d", first+i), Vote: true, PollID: p, OptionID: options[i%len(options)],
			WrittenAt: now.Add(-time.Second)}
	}
	return out
}

func newTally(s TallyStore) *Tally {
	return &Tally{Store: s, Now: func() time.Time { return now }, Backoff: retry.Backoff{Base: time.Nanosecond, Max: time.Nanosecond}}
}

var shard = StreamShard{Table: "ddbpipe-votes-2026-11", Shard: "shardId-0001"}

func TestTallyCountsEachRecordOnce(t *testing.T) {
	opts := []string{"a", "b", "c"}
	recs := records(100, 60, "p", opts...)
	tests := []struct {
		name string
		// deliveries are the batches Lambda delivers, in order.
		deliveries [][]LedgerRecord
	}{
		{"one batch", [][]LedgerRecord{recs}},
		{"the batch redelivered", [][]LedgerRecord{recs, recs}},
		{"bisected after a failure: the halves, then the whole again", [][]LedgerRecord{recs[:30], recs[30:], recs}},
		{"overlapping batches", [][]LedgerRecord{recs[:40], recs[20:]}},
		{"an old batch after a newer one", [][]LedgerRecord{recs, recs[:10]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newMemTally(Poll{ID: "p", Options: opts, Shards: 4})
			ta := newTally(store)
			for i, d := range tt.deliveries {
				if res := ta.Count(context.Background(), shard, d); res.RetryFrom != "" {
					t.Fatalf("delivery %d: RetryFrom %q", i, res.RetryFrom)
				}
			}
			if got, want := store.total("p"), int64(len(recs)); got != want {
				t.Fatalf("counted %d, want %d", got, want)
			}
			if got, want := store.ckpt[shard], recs[len(recs)-1].Seq; got != want {
				t.Fatalf("checkpoint %s, want %s", got, want)
			}
		})
	}
}

// A crash between the commit and Lambda's acknowledgement: the batch comes
// again, and nothing is added twice.
func TestTallyCrashAfterCommitCountsNothingTwice(t *testing.T) {
	store := newMemTally(Poll{ID: "p", Options: []string{"a"}, Shards: 2})
	recs := records(1, 25, "p", "a")
	res := newTally(store).Count(context.Background(), shard, recs)
	// Lambda never saw the answer: a cold instance (no cache) gets the batch again.
	again := newTally(store).Count(context.Background(), shard, recs)
	if res.Counted != 25 || again.Counted != 0 || again.Replayed != 25 {
		t.Fatalf("first counted %d, again counted %d replayed %d; want 25, 0, 25", res.Counted, again.Counted, again.Replayed)
	}
	if got := store.total("p"); got != 25 {
		t.Fatalf("total %d, want 25", got)
	}
}

// More counters than one transaction holds: the batch is split in
// sequence order, each part moving the checkpoint, and a failure after the
// first part resumes at the second.
func TestTallySplitsWideBatches(t *testing.T) {
	var opts []string
	for i := range 250 {
		opts = append(opts, fmt.Sprintf("o%03d", i))
	}
	store := newMemTally(Poll{ID: "p", Options: opts, Shards: 3})
	recs := records(1000, 500, "p", opts...)
	parts := Split(recs, MaxTransactionActions-1)
	// In sequence order the options cycle twice: every record brings a new
	// counter to its part, so 500 records make ⌈500/99⌉ parts.
	if len(parts) != 6 {
		t.Fatalf("%d parts, want 6 (99 counters a part)", len(parts))
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n != len(recs) {
		t.Fatalf("parts hold %d records, want %d", n, len(recs))
	}
	// The second part is throttled until the deadline: the first stays
	// committed and the batch resumes at the second part's first record.
	store.afterCommit = func() { store.throttle = 1 << 30 }
	ta := newTally(store)
	ta.Now = time.Now
	// 2 s: the first part commits well before the deadline's margin (a
	// quarter), however slow the machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res := ta.Count(ctx, shard, recs)
	if res.RetryFrom != parts[1][0].Seq || res.Counted != len(parts[0]) || res.Throttles == 0 {
		t.Fatalf("RetryFrom %q counted %d throttles %d; want %q, %d, >0", res.RetryFrom, res.Counted, res.Throttles, parts[1][0].Seq, len(parts[0]))
	}
	store.afterCommit, store.throttle = nil, 0
	rest := newTally(store).Count(context.Background(), shard, recs[len(parts[0]):])
	if rest.RetryFrom != "" || store.total("p") != int64(len(recs)) {
		t.Fatalf("after the retry: RetryFrom %q, total %d; want \"\", %d", rest.RetryFrom, store.total("p"), len(recs))
	}
}

// Another invocation commits the same records meanwhile (a timed-out
// invocation's commit landing late): the checkpoint moved, the tally reads
// it again and adds only what is left.
func TestTallyCheckpointMoved(t *testing.T) {
	store := newMemTally(Poll{ID: "p", Options: []string{"a", "b"}, Shards: 2})
	recs := records(1, 40, "p", "a", "b")
	rival := newTally(store)
	var once sync.Once
	ta := newTally(&racingStore{memTally: store, before: func() {
		once.Do(func() { rival.Count(context.Background(), shard, recs[:15]) })
	}})
	res := ta.Count(context.Background(), shard, recs)
	if res.Moved != 1 || res.RetryFrom != "" {
		t.Fatalf("moved %d RetryFrom %q; want 1, \"\"", res.Moved, res.RetryFrom)
	}
	if got := store.total("p"); got != 40 {
		t.Fatalf("total %d, want 40", got)
	}
}

// racingStore runs before ahead of each commit.
type racingStore struct {
	*memTally
	before func()
}

func (r *racingStore) CommitTally(ctx context.Context, s StreamShard, from string, c TallyCommit) error {
	r.before()
	return r.memTally.CommitTally(ctx, s, from, c)
}

// Records that are not votes count nothing, but the checkpoint passes them.
func TestTallySkipsRecordsThatAreNotVotes(t *testing.T) {
	store := newMemTally(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	recs := append(records(1, 3, "p", "a"), LedgerRecord{Seq: fmt.Sprintf("%021d", 9)}, LedgerRecord{Seq: fmt.Sprintf("%021d", 10), Vote: true, PollID: "gone", OptionID: "x"})
	res := newTally(store).Count(context.Background(), shard, recs)
	if res.Counted != 4 || res.Ignored != 1 || store.ckpt[shard] != recs[4].Seq {
		t.Fatalf("counted %d ignored %d checkpoint %s; want 4, 1, %s", res.Counted, res.Ignored, store.ckpt[shard], recs[4].Seq)
	}
}

func TestTallyGivesUpOnOtherErrors(t *testing.T) {
	store := &failingTally{memTally: newMemTally(Poll{ID: "p", Options: []string{"a"}, Shards: 1})}
	ta := newTally(store)
	ta.MaxAttempts = 3
	recs := records(5, 4, "p", "a")
	res := ta.Count(context.Background(), shard, recs)
	if res.RetryFrom != recs[0].Seq || store.calls != 3 {
		t.Fatalf("RetryFrom %q after %d calls; want %q after 3", res.RetryFrom, store.calls, recs[0].Seq)
	}
}

type failingTally struct {
	*memTally
	calls int
}

func (f *failingTally) CommitTally(context.Context, StreamShard, string, TallyCommit) error {
	f.calls++
	return errors.New("internal server error")
}

func TestFence(t *testing.T) {
	f := Fence{Grace: 48 * time.Hour}
	tests := []struct {
		name   string
		castAt string
		now    string
		want   Reason
	}{
		{"this month", "2026-11-20T10:00:00Z", "2026-11-25T00:00:00Z", ""},
		{"last month in its grace", "2026-10-31T23:59:00Z", "2026-11-02T23:59:59Z", ""},
		{"last month after its grace", "2026-10-31T23:59:00Z", "2026-11-03T00:00:00Z", ReasonMonthClosed},
		{"1970", "1970-01-01T00:00:00Z", "2026-11-25T00:00:00Z", ReasonMonthClosed},
		{"year 1", "0001-01-01T00:00:00Z", "2026-11-25T00:00:00Z", ReasonMonthClosed},
		{"two years back", "2024-11-25T00:00:00Z", "2026-11-25T00:00:00Z", ReasonMonthClosed},
		{"next month, within the clock skew", "2026-12-01T00:30:00Z", "2026-11-30T23:50:00Z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := time.Parse(time.RFC3339, tt.castAt)
			n, _ := time.Parse(time.RFC3339, tt.now)
			if got := ReasonOf(f.Accepts(c, n)); got != tt.want {
				t.Fatalf("reason %q, want %q", got, tt.want)
			}
		})
	}
	closes, err := f.ClosesAt("2026-02")
	if err != nil || !closes.Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("ClosesAt(2026-02) = %s, %v", closes, err)
	}
}

// Increments spread over a poll's shards: with either pick no shard takes
// more than about 1.5/N of the poll's counter writes, even from one stream
// shard (the stream pick moves on each second; here a batch a second).
func TestTallySpreadsOverShards(t *testing.T) {
	const shards = 8
	opts := []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}
	seed := uint64(1)
	picks := map[string]CounterPick{
		"random": func(StreamShard, string, int, time.Time) Place {
			seed = seed*6364136223846793005 + 1442695040888963407
			return Place{Shard: int(seed>>33) % shards}
		},
		"stream": StreamPick(time.Second),
	}
	for name, pick := range picks {
		t.Run(name, func(t *testing.T) {
			store := newMemTally(Poll{ID: "p", Options: opts, Shards: shards})
			writes := map[string]int{}
			tl := newTally(&countingTally{memTally: store, writes: writes})
			tl.Pick = pick
			clock := now
			tl.Now = func() time.Time { return clock }
			for b := 0; b < 400; b++ {
				clock = clock.Add(time.Second)
				if res := tl.Count(context.Background(), shard, records(b*100, 100, "p", opts...)); res.RetryFrom != "" {
					t.Fatalf("batch %d: %+v", b, res)
				}
			}
			total := 0
			for _, n := range writes {
				total += n
			}
			for k, n := range writes {
				if share := float64(n) / float64(total); share > 1.5/shards {
					t.Errorf("shard %s took %.3f of %d writes, above 1.5/%d", k, share, total, shards)
				}
			}
			if len(writes) != shards || store.total("p") != 40000 {
				t.Errorf("%d shards written, %d counted: want %d and 40000", len(writes), store.total("p"), shards)
			}
		})
	}
}

// The stream pick keeps concurrent tallies apart: the 16 tallies of 16
// stream shards, writing a poll of 8 counter shards at the same moments,
// never write the same item (the same shard and slot), where a pick per
// option makes nearly every pair share one. Over 8 periods each tally
// visits every shard once, always in its own slot.
func TestStreamPickSeparatesConcurrentTallies(t *testing.T) {
	const k, n = 16, 8
	pick := StreamPick(time.Second)
	for sec := range 60 {
		at := now.Add(time.Duration(sec) * time.Second)
		owner := map[Place]int{}
		for i := range k {
			pl := pick(StreamShard{Table: "ddbpipe-votes-2026-11", Shard: fmt.Sprintf("shardId-%05d-9f3a2c1e", i)}, "p", n, at)
			if j, taken := owner[pl]; taken {
				t.Fatalf("at %s stream shards %d and %d both write %+v", at, j, i, pl)
			}
			owner[pl] = i
			if pl.Shard < 0 || pl.Shard >= n || pl.Slot == "" {
				t.Fatalf("place %+v: want a shard in [0, %d) and a slot", pl, n)
			}
		}
	}
	s := StreamShard{Table: "t", Shard: "shardId-00003"}
	seen := map[int]bool{}
	slot := pick(s, "p", n, now).Slot
	for sec := range n {
		pl := pick(s, "p", n, now.Add(time.Duration(sec)*time.Second))
		seen[pl.Shard] = true
		if pl.Slot != slot {
			t.Errorf("the slot moved from %q to %q", slot, pl.Slot)
		}
	}
	if len(seen) != n {
		t.Errorf("over %d periods one tally wrote %d of the %d shards", n, len(seen), n)
	}
	if got := pick(s, "p", 1, now); got.Shard != 0 {
		t.Errorf("a poll of 1 shard: pick %+v", got)
	}
}

// A commit cancelled by a conflict is retried until it lands, and
// counted once; the conflicts are reported.
func TestTallyRetriesConflicts(t *testing.T) {
	opts := []string{"a", "b"}
	store := newMemTally(Poll{ID: "p", Options: opts, Shards: 4})
	tl := newTally(&conflictingTally{memTally: store, conflicts: 3})
	res := tl.Count(context.Background(), shard, records(1, 50, "p", opts...))
	if res.RetryFrom != "" || res.Counted != 50 || res.Conflicts != 3 {
		t.Errorf("Count = %+v, want 50 counted after 3 conflicts", res)
	}
	if got := store.total("p"); got != 50 {
		t.Errorf("counters hold %d votes, want 50", got)
	}
}

type conflictingTally struct {
	*memTally
	conflicts int
}

func (c *conflictingTally) CommitTally(ctx context.Context, s StreamShard, from string, tc TallyCommit) error {
	if c.conflicts > 0 {
		c.conflicts--
		return fmt.Errorf("commit: %w", ErrConflict)
	}
	return c.memTally.CommitTally(ctx, s, from, tc)
}

// countingTally counts the counter writes per shard key.
type countingTally struct {
	*memTally
	writes map[string]int
}

func (c *countingTally) CommitTally(ctx context.Context, s StreamShard, from string, tc TallyCommit) error {
	err := c.memTally.CommitTally(ctx, s, from, tc)
	if err == nil {
		for _, inc := range tc.Increments {
			c.writes[fmt.Sprint(inc.PollID, "#", inc.Shard)]++
		}
	}
	return err
}

// A shard split: the parent's records, then its two children's. Each
// stream shard has its own checkpoint, so a child whose sequence numbers
// sort below the parent's checkpoint is counted all the same (sequence
// numbers are not comparable across shards), and a parent batch
// redelivered after the children changes nothing.
func TestTallyShardSplit(t *testing.T) {
	opts := []string{"a", "b"}
	store := newMemTally(Poll{ID: "p", Options: opts, Shards: 2})
	ta := newTally(store)
	parent := StreamShard{Table: shard.Table, Shard: "shardId-parent"}
	left := StreamShard{Table: shard.Table, Shard: "shardId-child-1"}
	right := StreamShard{Table: shard.Table, Shard: "shardId-child-2"}
	parentRecs := records(5000, 30, "p", opts...)
	for _, d := range []struct {
		s    StreamShard
		recs []LedgerRecord
	}{
		{parent, parentRecs},
		{left, records(100, 20, "p", opts...)}, // below the parent's checkpoint
		{right, records(7000, 25, "p", opts...)},
		{parent, parentRecs}, // redelivered after the split
		{left, records(100, 20, "p", opts...)},
	} {
		if res := ta.Count(context.Background(), d.s, d.recs); res.RetryFrom != "" {
			t.Fatalf("%s: RetryFrom %q", d.s.Shard, res.RetryFrom)
		}
	}
	if got := store.total("p"); got != 75 {
		t.Errorf("counted %d, want 75 (30 + 20 + 25)", got)
	}
	for s, want := range map[StreamShard]string{parent: parentRecs[29].Seq, left: fmt.Sprintf("%021d", 119), right: fmt.Sprintf("%021d", 7024)} {
		if store.ckpt[s] != want {
			t.Errorf("%s checkpoint %s, want %s", s.Shard, store.ckpt[s], want)
		}
	}
}
