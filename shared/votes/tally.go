package votes

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// LedgerRecord is one record of a ledger table's stream, as the tally
// reads it.
type LedgerRecord struct {
	// Seq is the record's sequence number in its stream shard.
	Seq string
	// Vote is true for the INSERT of a ledger item: a vote written. Other
	// records (a MODIFY or REMOVE by hand, an item that is not a vote)
	// count nothing, but the checkpoint moves past them.
	Vote     bool
	PollID   string
	OptionID string
	// WrittenAt is when the counter wrote the item (its countedAt), for
	// the lag from ledger to counters; zero when unknown.
	WrittenAt time.Time
}

// StreamShard names a checkpoint: one shard of a ledger table's stream.
type StreamShard struct {
	Table string // the ledger table, <prefix>-YYYY-MM
	Shard string // the stream shard id
}

// ErrCheckpointMoved is a tally commit refused because the shard's
// checkpoint is no longer the one the commit was planned from: another
// invocation counted those records meanwhile.
var ErrCheckpointMoved = errors.New("votes: the stream shard's checkpoint moved")

// ErrConflict is a tally commit DynamoDB cancelled because another
// request was writing one of its items (TransactionConflict): retried
// after a jittered pause until the deadline.
var ErrConflict = errors.New("votes: transaction conflict")

// TallyCommit is one transaction of the tally: the increments that count
// a run of a shard's records, and the checkpoint after them.
type TallyCommit struct {
	Increments []Increment
	// Seq is the sequence number of the last record the commit covers.
	Seq string
	// Votes is how many votes the increments add; LastWrittenAt is the
	// latest WrittenAt among them (the checkpoint keeps both, for the
	// staleness results report).
	Votes         int
	LastWrittenAt time.Time
}

// TallyStore is what the tally needs from the database.
type TallyStore interface {
	// Polls returns the polls with the given ids that exist.
	Polls(ctx context.Context, ids []string) (map[string]Poll, error)
	// Checkpoint reads the shard's checkpoint: the sequence number of the
	// last record counted ("" when none).
	Checkpoint(ctx context.Context, s StreamShard) (string, error)
	// CommitTally adds c's increments and moves the shard's checkpoint
	// from `from` ("" for none) to c.Seq, in one transaction conditioned
	// on the checkpoint still being `from` (ErrCheckpointMoved if not).
	CommitTally(ctx context.Context, s StreamShard, from string, c TallyCommit) error
}

// TallyResult is what the tally did with one batch of a shard's records.
type TallyResult struct {
	// RetryFrom is the sequence number of the first record not counted,
	// to be delivered again (the batch item failure); "" when the whole
	// batch is counted.
	RetryFrom string
	Counted   int // votes added to the counters by this batch
	Replayed  int // records at or below the checkpoint: counted before
	Ignored   int // records that are not votes
	Commits   int
	Moved     int // commits refused because the checkpoint had moved
	Throttles int
	// Conflicts counts commits cancelled by a TransactionConflict.
	Conflicts int
	Deadline  bool
	// Lags are, per commit, the time from the last vote's ledger write to
	// the commit that counted it.
	Lags []time.Duration
}

// Tally folds a ledger stream shard's records into per (poll, option,
// shard) increments and commits them with the shard's checkpoint in one
// transaction: a record at or below the checkpoint was counted and is
// skipped, so redelivery, bisection and a crash between the commit and
// Lambda's acknowledgement count nothing twice.
type Tally struct {
	Store TallyStore
	// Pick places each increment on one of its poll's counter shards
	// (default StreamPick: derived from the stream shard).
	Pick CounterPick
	// Now is the tally's clock (lags); Wall the real one, which the
	// invocation's deadline is on (both time.Now by default).
	Now  func() time.Time
	Wall func() time.Time
	// Backoff paces the retries (default: 20 ms doubling to 1 s, equal
	// jitter); a conflict waits on the same steps with full jitter, so two
	// tallies that collided do not collide again in step.
	Backoff retry.Backoff
	// MaxAttempts bounds retries of errors other than throttling, a
	// conflict and a moved checkpoint (default 8); throttling and
	// conflicts are retried until the deadline margin.
	MaxAttempts int
	// Margin is the time left before the deadline at which the tally
	// stops (at most 5 s, never more than a quarter of the invocation).
	Margin time.Duration
	Log    *slog.Logger

	once   sync.Once
	mu     sync.Mutex
	shards map[string]int // a poll's shard count never changes: cached
}

func (t *Tally) defaults() {
	t.once.Do(func() {
		if t.Pick == nil {
			t.Pick = StreamPick(time.Second)
		}
		if t.Now == nil {
			t.Now = time.Now
		}
		if t.Wall == nil {
			t.Wall = time.Now
		}
		if t.Backoff.Base <= 0 {
			t.Backoff = retry.Backoff{Base: 20 * time.Millisecond, Max: time.Second}
		}
		if t.MaxAttempts <= 0 {
			t.MaxAttempts = 8
		}
		if t.Margin <= 0 {
			t.Margin = 5 * time.Second
		}
		if t.Log == nil {
			t.Log = slog.New(slog.DiscardHandler)
		}
		t.shards = map[string]int{}
	})
}

// Count counts one batch of a shard's records, in the order the stream
// holds them.
func (t *Tally) Count(ctx context.Context, s StreamShard, recs []LedgerRecord) TallyResult {
	t.defaults()
	var res TallyResult
	if len(recs) == 0 {
		return res
	}
	ctx, cancel := workWindow(ctx, t.Wall, t.Margin)
	defer cancel()
	var ckpt string
	readCheckpoint := true
	for attempt := 1; ; attempt++ {
		if !timeLeft(ctx, t.Wall) {
			res.Deadline = true
			res.RetryFrom = firstAfter(recs, ckpt)
			return res
		}
		var err error
		if readCheckpoint {
			if ckpt, err = t.Store.Checkpoint(ctx, s); err == nil {
				readCheckpoint = false
			}
		}
		var pending []LedgerRecord
		if err == nil {
			pending = after(recs, ckpt)
			res.Replayed = len(recs) - len(pending)
			if len(pending) == 0 {
				return res
			}
			err = t.countFrom(ctx, s, &ckpt, pending, &res)
		}
		if err == nil {
			return res
		}
		if errors.Is(err, ErrCheckpointMoved) {
			res.Moved++
			readCheckpoint = true
			continue // counted meanwhile by another invocation: read it again
		}
		throttled := errors.Is(err, ErrThrottled)
		conflict := errors.Is(err, ErrConflict)
		if throttled {
			res.Throttles++
		}
		if conflict {
			res.Conflicts++
		}
		_, bounded := ctx.Deadline()
		if attempt >= t.MaxAttempts && !((throttled || conflict) && bounded) || ctx.Err() != nil {
			t.Log.WarnContext(ctx, "tally commit failed; the shard's records will be delivered again", "err", err,
				"table", s.Table, "shard", s.Shard, "attempts", attempt)
			res.RetryFrom = firstAfter(recs, ckpt)
			return res
		}
		b := t.Backoff
		if conflict {
			b.Jitter = retry.FullJitter
		}
		_ = b.Wait(ctx, attempt) // the deadline check above reports a cut-off
	}
}

// countFrom commits pending in parts, each moving the checkpoint (*ckpt)
// on; it stops at the first part that fails.
func (t *Tally) countFrom(ctx context.Context, s StreamShard, ckpt *string, pending []LedgerRecord, res *TallyResult) error {
	shards, err := t.pollShards(ctx, pending)
	if err != nil {
		return err
	}
	for _, part := range Split(pending, MaxTransactionActions-1) {
		if !timeLeft(ctx, t.Wall) {
			return context.DeadlineExceeded
		}
		c := t.fold(s, part, shards)
		if err := t.Store.CommitTally(ctx, s, *ckpt, c); err != nil {
			return err
		}
		*ckpt = c.Seq
		res.Commits++
		res.Counted += c.Votes
		for _, r := range part {
			if !r.Vote {
				res.Ignored++
			}
		}
		if !c.LastWrittenAt.IsZero() {
			res.Lags = append(res.Lags, t.Now().Sub(c.LastWrittenAt))
		}
	}
	return nil
}

// Split cuts records, in order, into runs that each hold at most maxKeys
// distinct (poll, option) counters, so each run's increments and the
// checkpoint fit one transaction. Every record is in exactly one run.
func Split(recs []LedgerRecord, maxKeys int) [][]LedgerRecord {
	var parts [][]LedgerRecord
	start := 0
	keys := map[[2]string]bool{}
	for i, r := range recs {
		k := [2]string{r.PollID, r.OptionID}
		if r.Vote && !keys[k] && len(keys) == maxKeys {
			parts = append(parts, recs[start:i])
			start, keys = i, map[[2]string]bool{}
		}
		if r.Vote {
			keys[k] = true
		}
	}
	return append(parts, recs[start:])
}

// fold sums a run's votes per (poll, option) into increments, each on a
// shard picked among the poll's shards.
func (t *Tally) fold(s StreamShard, part []LedgerRecord, shards map[string]int) TallyCommit {
	now := t.Now()
	c := TallyCommit{Seq: part[len(part)-1].Seq}
	idx := map[[2]string]int{}
	for _, r := range part {
		if !r.Vote {
			continue
		}
		c.Votes++
		if r.WrittenAt.After(c.LastWrittenAt) {
			c.LastWrittenAt = r.WrittenAt
		}
		k := [2]string{r.PollID, r.OptionID}
		i, ok := idx[k]
		if !ok {
			i = len(c.Increments)
			idx[k] = i
			pl := t.Pick(s, r.PollID, max(shards[r.PollID], 1), now)
			c.Increments = append(c.Increments, Increment{PollID: r.PollID, OptionID: r.OptionID, Shard: pl.Shard, Slot: pl.Slot})
		}
		c.Increments[i].N++
	}
	return c
}

// pollShards returns the shard count of every poll the records name. A
// poll that does not exist (its votes could not have been written; an
// item put by hand) counts on shard 0.
func (t *Tally) pollShards(ctx context.Context, recs []LedgerRecord) (map[string]int, error) {
	t.mu.Lock()
	out := map[string]int{}
	var missing []string
	for _, r := range recs {
		if _, done := out[r.PollID]; done || !r.Vote {
			continue
		}
		n, ok := t.shards[r.PollID]
		out[r.PollID] = n
		if !ok {
			missing = append(missing, r.PollID)
		}
	}
	t.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	polls, err := t.Store.Polls(ctx, missing)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range missing {
		if p, ok := polls[id]; ok {
			t.shards[id] = p.Shards
			out[id] = p.Shards
		} else {
			out[id] = 1
		}
	}
	return out, nil
}

// after returns the records past the checkpoint.
func after(recs []LedgerRecord, ckpt string) []LedgerRecord {
	if ckpt == "" {
		return recs
	}
	for i, r := range recs {
		if ledger.SeqLess(ckpt, r.Seq) {
			return recs[i:]
		}
	}
	return nil
}

// firstAfter is the sequence number of the first record past the
// checkpoint ("" when there is none).
func firstAfter(recs []LedgerRecord, ckpt string) string {
	if p := after(recs, ckpt); len(p) > 0 {
		return p[0].Seq
	}
	return ""
}
