package votes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// Mode is how votes are committed.
type Mode string

// Counting modes.
const (
	// ExactlyOnce commits each group's ledger puts (conditioned on the
	// entry not existing) and its increments in one transaction: a
	// redelivered vote finds its ledger entry and is not counted again.
	ExactlyOnce Mode = "exactly-once"
	// AtLeastOnce writes increments and ledger entries with plain batched
	// writes: cheaper (no transaction, one write unit per item instead of
	// two), but a batch redelivered after a partial failure is counted again.
	AtLeastOnce Mode = "at-least-once"
)

// ErrThrottled marks a store error caused by throttling (after the SDK's
// own retries); the counter backs off and retries.
var ErrThrottled = errors.New("votes: throttled")

// CancelledError is how Store.Commit reports a transaction that was
// cancelled. Existing names the entries (by index in the group) whose ledger
// item already exists, with the voteId stored there: those are duplicates
// (or, for a one-vote-per-voter poll and another voteId, a second vote).
// Retryable is true when the cancellation was a conflict or throttling.
type CancelledError struct {
	Existing  map[int]string
	Retryable bool
	Throttled bool
	Cause     error
}

func (e *CancelledError) Error() string {
	return fmt.Sprintf("votes: transaction cancelled (%d existing entries, retryable %t): %v", len(e.Existing), e.Retryable, e.Cause)
}

func (e *CancelledError) Unwrap() error { return e.Cause }

// Store is what counting needs from the database.
type Store interface {
	// Polls returns the polls with the given ids that exist.
	Polls(ctx context.Context, ids []string) (map[string]Poll, error)
	// Commit writes a group atomically (exactly-once mode).
	Commit(ctx context.Context, g Group) error
	// PutEntries and AddCounts are at-least-once mode's plain writes.
	PutEntries(ctx context.Context, entries []Entry) error
	AddCounts(ctx context.Context, incs []Increment) error
}

// Rejected is a message that will never be counted, with its reason.
type Rejected struct {
	MessageID string
	Body      []byte
	Reason    Reason
	Detail    string
}

// RejectStore keeps rejected messages with their reasons.
type RejectStore interface {
	Reject(ctx context.Context, r []Rejected) error
}

// Message is one queue message: its id and body.
type Message struct {
	ID   string
	Body []byte
}

// Result is what counting a batch did.
type Result struct {
	// Failed lists the messages to deliver again (batch item failures).
	Failed     []string
	Accepted   int
	Duplicates int
	Rejected   map[Reason]int
	// CounterWrites counts increments written; Commits the write requests
	// that carried them (transactions, or UpdateItem calls).
	CounterWrites int
	Commits       int
	TxRetries     int
	Throttles     int
	// Deadline is true when the counter stopped early to finish before the
	// invocation's deadline.
	Deadline bool
}

// Counter counts batches of vote messages.
type Counter struct {
	Store   Store
	Rejects RejectStore
	Mode    Mode
	Now     func() time.Time
	Pick    ShardPicker
	// Parallel is how many groups of a batch commit at once (default 4).
	// Their increments land on different shards (the deck picker), so
	// they rarely conflict.
	Parallel int
	// MaxAttempts bounds the commits of one group (default 8); a group
	// that still fails is reported as failed messages and redelivered. A
	// group refused for throttling is retried, with backoff, until the
	// invocation's deadline margin instead (when ctx has a deadline, as a
	// Lambda invocation's does).
	MaxAttempts int
	// Backoff is the pause before retry n (default: 20 ms doubling to 1 s, with jitter).
	Backoff func(attempt int) time.Duration
	// Margin is the time left before the deadline at which the counter
	// stops taking new work: at most 5 s by default, and never more than a
	// quarter of the time the invocation had when it started.
	Margin time.Duration
	Log    *slog.Logger

	once sync.Once
}

// defaults fills unset fields once; Count runs concurrently.
func (c *Counter) defaults() { c.once.Do(c.setDefaults) }

func (c *Counter) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Pick == nil {
		c.Pick = DeckPicker(rand.IntN)
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.Backoff == nil {
		c.Backoff = retry.Backoff{Base: 20 * time.Millisecond, Max: time.Second}.Delay
	}
	if c.Margin <= 0 {
		c.Margin = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Mode == "" {
		c.Mode = ExactlyOnce
	}
}

// Count validates, coalesces and commits a batch. Every message ends in
// exactly one of: accepted, duplicate (acknowledged, not counted), rejected
// (in the reject store), or Failed (to be delivered again).
func (c *Counter) Count(ctx context.Context, msgs []Message) Result {
	c.defaults()
	now := c.Now()
	margin := c.Margin
	if d, ok := ctx.Deadline(); ok {
		margin = min(margin, d.Sub(now)/4)
	}
	res := Result{Rejected: map[Reason]int{}}
	var rejects []Rejected
	var valid []Entry
	bodies := map[string][]byte{}
	for _, m := range msgs {
		v, err := Parse(m.Body, now)
		if err != nil {
			rejects = append(rejects, rejected(m.ID, m.Body, err))
			continue
		}
		bodies[m.ID] = m.Body
		valid = append(valid, Entry{Vote: v, MessageID: m.ID})
	}

	entries, dups, pollRejects, err := c.admit(ctx, valid, bodies)
	if err != nil {
		c.Log.WarnContext(ctx, "poll lookup failed; the batch's valid votes will be retried", "err", err)
		for _, e := range valid {
			res.Failed = append(res.Failed, e.MessageID)
		}
		entries, dups = nil, 0
	}
	res.Duplicates += dups
	rejects = append(rejects, pollRejects...)

	shards := map[string]int{}
	for _, e := range entries {
		shards[e.PollID] = e.shards
	}
	var late []Rejected
	switch c.Mode {
	case AtLeastOnce:
		late = c.countAtLeastOnce(ctx, entries, shards, bodies, margin, &res)
	default:
		late = c.countExactlyOnce(ctx, entries, shards, bodies, margin, &res)
	}
	rejects = append(rejects, late...)

	if len(rejects) > 0 {
		if err := c.Rejects.Reject(ctx, rejects); err != nil {
			// Never drop a rejected message: it comes back and is rejected again.
			c.Log.WarnContext(ctx, "reject store failed; rejected messages will be retried", "err", err, "messages", len(rejects))
			for _, r := range rejects {
				res.Failed = append(res.Failed, r.MessageID)
			}
		} else {
			for _, r := range rejects {
				res.Rejected[r.Reason]++
			}
		}
	}
	sort.Strings(res.Failed)
	return res
}

func rejected(id string, body []byte, err error) Rejected {
	var re *RejectError
	if errors.As(err, &re) {
		return Rejected{MessageID: id, Body: body, Reason: re.Reason, Detail: re.Detail}
	}
	return Rejected{MessageID: id, Body: body, Reason: ReasonMalformedJSON, Detail: err.Error()}
}

// admit checks votes against their polls and drops repeats within the batch.
func (c *Counter) admit(ctx context.Context, valid []Entry, bodies map[string][]byte) (entries []Entry, dups int, rejects []Rejected, err error) {
	if len(valid) == 0 {
		return nil, 0, nil, nil
	}
	ids := map[string]bool{}
	var list []string
	for _, e := range valid {
		if !ids[e.PollID] {
			ids[e.PollID] = true
			list = append(list, e.PollID)
		}
	}
	polls, err := c.Store.Polls(ctx, list)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("votes: read polls: %w", err)
	}
	seen := map[[2]string]string{} // ledger key → voteId
	for _, e := range valid {
		p, ok := polls[e.PollID]
		if !ok {
			rejects = append(rejects, rejected(e.MessageID, bodies[e.MessageID], reject(ReasonUnknownPoll, "no poll %q", e.PollID)))
			continue
		}
		if err := p.Accepts(e.Vote); err != nil {
			rejects = append(rejects, rejected(e.MessageID, bodies[e.MessageID], err))
			continue
		}
		e.OneVotePerVoter = p.OneVotePerVoter
		e.shards = p.Shards
		pk, sk := e.LedgerKey()
		if prev, ok := seen[[2]string{pk, sk}]; ok {
			if prev != e.VoteID { // one vote per voter: another vote by the same voter
				rejects = append(rejects, rejected(e.MessageID, bodies[e.MessageID], reject(ReasonDuplicateVoter, "voter %q already voted in poll %s", e.VoterID, e.PollID)))
			} else {
				dups++ // the same vote twice in one batch
			}
			continue
		}
		seen[[2]string{pk, sk}] = e.VoteID
		entries = append(entries, e)
	}
	return entries, dups, rejects, nil
}

// timeLeft reports whether more than margin is left before ctx's deadline
// by the clock now.
func timeLeft(ctx context.Context, now func() time.Time, margin time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || d.Sub(now()) > margin
}

func (c *Counter) countExactlyOnce(ctx context.Context, entries []Entry, shards map[string]int, bodies map[string][]byte, margin time.Duration, res *Result) (late []Rejected) {
	groups := Plan(entries, shards, c.Pick)
	work := make(chan Group)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < min(c.Parallel, len(groups)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range work {
				out := c.commitGroup(ctx, g, shards, bodies, margin)
				mu.Lock()
				res.merge(out)
				late = append(late, out.late...)
				mu.Unlock()
			}
		}()
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	return late
}

// groupOutcome is what committing one group did.
type groupOutcome struct {
	Result
	late []Rejected
}

func (r *Result) merge(o groupOutcome) {
	r.Failed = append(r.Failed, o.Failed...)
	r.Accepted += o.Accepted
	r.Duplicates += o.Duplicates
	r.CounterWrites += o.CounterWrites
	r.Commits += o.Commits
	r.TxRetries += o.TxRetries
	r.Throttles += o.Throttles
	r.Deadline = r.Deadline || o.Deadline
}

// commitGroup commits one group as a transaction, dropping the entries that
// already exist and retrying conflicts and throttling with backoff.
func (c *Counter) commitGroup(ctx context.Context, g Group, shards map[string]int, bodies map[string][]byte, margin time.Duration) (out groupOutcome) {
	fail := func() {
		for _, e := range g.Entries {
			out.Failed = append(out.Failed, e.MessageID)
		}
	}
	for attempt := 1; len(g.Entries) > 0; attempt++ {
		if !timeLeft(ctx, c.Now, margin) {
			// Stop before the deadline: the group goes back to the queue
			// instead of being cut off mid-write.
			out.Deadline = true
			fail()
			return out
		}
		err := c.Store.Commit(ctx, g)
		out.Commits++
		if err == nil {
			out.Accepted += len(g.Entries)
			out.CounterWrites += len(g.Increments)
			return out
		}
		var ce *CancelledError
		if errors.As(err, &ce) && len(ce.Existing) > 0 {
			var keep []Entry
			for i, e := range g.Entries {
				stored, exists := ce.Existing[i]
				switch {
				case !exists:
					keep = append(keep, e)
				case e.OneVotePerVoter && stored != e.VoteID:
					out.late = append(out.late, rejected(e.MessageID, bodies[e.MessageID], reject(ReasonDuplicateVoter, "voter %q already voted in poll %s", e.VoterID, e.PollID)))
				default:
					out.Duplicates++
				}
			}
			g = Group{Entries: keep, Increments: Coalesce(keep, shards, c.Pick)}
			continue // the rest is retried at once: nothing conflicted
		}
		if keep, closed := closedMonth(err, g.Entries, bodies); closed != nil {
			out.late = append(out.late, closed...)
			g = Group{Entries: keep, Increments: Coalesce(keep, shards, c.Pick)}
			continue
		}
		out.TxRetries++
		throttled := errors.Is(err, ErrThrottled) || ce != nil && ce.Throttled
		if throttled {
			out.Throttles++
		}
		// A throttled group waits here, within the invocation's deadline:
		// given back, its messages would wait out the queue's visibility
		// timeout (six times the function's) before anyone tried again.
		_, bounded := ctx.Deadline()
		if attempt >= c.MaxAttempts && !(throttled && bounded) {
			c.Log.WarnContext(ctx, "commit failed; the group's messages will be retried", "err", err, "votes", len(g.Entries), "attempts", attempt)
			fail()
			return out
		}
		if retry.Sleep(ctx, c.Backoff(attempt)) != nil {
			continue // the deadline check above reports the group
		}
		// A conflict may come from another invocation adding to the same
		// shard: pick the shards again.
		g.Increments = Coalesce(g.Entries, shards, c.Pick)
	}
	return out
}

// closedMonth splits entries when err is a *MonthClosedError: those of the
// closed month become rejects (ReasonMonthClosed), the others are kept.
// closed is nil when err is something else.
func closedMonth(err error, entries []Entry, bodies map[string][]byte) (keep []Entry, closed []Rejected) {
	var mc *MonthClosedError
	if !errors.As(err, &mc) {
		return entries, nil
	}
	closed = []Rejected{}
	for _, e := range entries {
		if e.Month() == mc.Month {
			closed = append(closed, rejected(e.MessageID, bodies[e.MessageID], reject(ReasonMonthClosed,
				"castAt %s is in %s, a month whose ledger is closed (being retired or retired)", e.CastAt.Format(time.RFC3339), mc.Month)))
			continue
		}
		keep = append(keep, e)
	}
	return keep, closed
}

func (c *Counter) countAtLeastOnce(ctx context.Context, entries []Entry, shards map[string]int, bodies map[string][]byte, margin time.Duration, res *Result) (late []Rejected) {
	if len(entries) == 0 {
		return nil
	}
	fail := func(err error) {
		c.Log.WarnContext(ctx, "at-least-once write failed; the batch's votes will be retried (and may be counted twice)", "err", err)
		for _, e := range entries {
			res.Failed = append(res.Failed, e.MessageID)
		}
		if errors.Is(err, ErrThrottled) {
			res.Throttles++
		}
	}
	if !timeLeft(ctx, c.Now, margin) {
		res.Deadline = true
		fail(context.DeadlineExceeded)
		return
	}
	err := c.Store.PutEntries(ctx, entries)
	if keep, closed := closedMonth(err, entries, bodies); closed != nil {
		// The closed month's votes are rejected; the others go again.
		return append(closed, c.countAtLeastOnce(ctx, keep, shards, bodies, margin, res)...)
	}
	if err != nil {
		fail(err)
		return
	}
	incs := Coalesce(entries, shards, c.Pick)
	if err := c.Store.AddCounts(ctx, incs); err != nil {
		fail(err)
		return
	}
	res.Accepted += len(entries)
	res.CounterWrites += len(incs)
	res.Commits += len(incs)
	return nil
}
