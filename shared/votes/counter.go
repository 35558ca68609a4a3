package votes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// ErrThrottled marks a store error caused by throttling (after the SDK's
// own retries); the counter backs off and retries until its deadline.
var ErrThrottled = errors.New("votes: throttled")

// ErrNoLedger is a write into a month whose ledger table does not exist.
// Only the rotator creates ledger tables (the current and the next month,
// ahead of time), and it never creates a month it retired again. So a
// month the rotator retired (Counter.Retirements) rejects the vote
// month-closed; any other has not been created yet: the vote is failed
// back and delivered again, never dropped.
var ErrNoLedger = errors.New("votes: the month's ledger table does not exist")

// ExistsError is a conditional write refused because the key is taken:
// the vote was written already (a redelivery), or, in a one-vote-per-voter
// poll, the voter voted already. StoredVoteID is the vote that holds it.
type ExistsError struct{ StoredVoteID string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("votes: the ledger holds vote %q under this key already", e.StoredVoteID)
}

// Store is what the counter needs from the database.
type Store interface {
	// Polls returns the polls with the given ids that exist.
	Polls(ctx context.Context, ids []string) (map[string]Poll, error)
	// PutVote writes the entry into its month's ledger unless its key
	// exists (*ExistsError). ErrNoLedger when the month has no table.
	PutVote(ctx context.Context, e Entry) error
	// ClaimVoter records, once and for good, that a one-vote-per-voter
	// poll's voter voted with voteID; *ExistsError names the vote that
	// claimed the voter first (the same vote on a redelivery).
	ClaimVoter(ctx context.Context, e Entry) error
}

// Retirements is the rotator's record of the months it retired.
type Retirements interface {
	// Retired reports whether month m (YYYY-MM) was retired, and when its
	// archive was verified.
	Retired(ctx context.Context, m string) (at time.Time, retired bool, err error)
}

// Rejected is a message that will never be counted, with its reason.
type Rejected struct {
	MessageID string
	SentAt    time.Time
	Body      []byte
	Reason    Reason
	Detail    string
	// PollID, VoteID and OptionID are the ids the body names, each as far
	// as it can be read ("" when it cannot: see named).
	PollID, VoteID, OptionID string
}

// RejectStore keeps rejected messages with their reasons.
type RejectStore interface {
	Reject(ctx context.Context, r []Rejected) error
}

// Message is one queue message: its id, when it was sent (the same on
// every delivery) and its body.
type Message struct {
	ID     string
	SentAt time.Time
	Body   []byte
}

// Result is what the counter did with a batch.
type Result struct {
	// Failed lists the messages to deliver again (batch item failures).
	Failed []string
	// Late lists those of Failed that the counter gave back only for
	// lack of time: not reached, or throttled until, its deadline margin.
	// WriteTime is how long the batch's writes took, and Accepted plus
	// Duplicates over it the rate at which the store took them: what a
	// late vote's next delivery is spaced by (Retry.Late).
	Late       []string
	WriteTime  time.Duration
	Accepted   int
	Duplicates int
	Rejected   map[Reason]int
	// Recorded counts the rejects kept under their poll (Counter.Record),
	// redeliveries of recorded ones included.
	Recorded int
	// Puts counts ledger writes sent (retries included); Retries the
	// writes sent again, Throttles those refused for throttling.
	Puts      int
	Retries   int
	Throttles int
	// Deadline is true when the counter stopped early to finish before the
	// invocation's deadline.
	Deadline bool
	// LastError is the last ledger or claim write that failed (retried or
	// given back), "" when none did: what a batch that failed messages back
	// or stopped for its deadline was waiting on.
	LastError string
	// Parallel is the bound on puts in flight when the batch ended: below
	// Counter.Parallel while the store is shed load.
	Parallel int
}

// DefaultParallel is how many puts one counter invocation keeps in flight
// unless Counter.Parallel says otherwise.
const DefaultParallel = 16

// Counter validates batches of vote messages and writes each valid vote
// once into its month's ledger: one conditional PutItem per vote, so a
// redelivered vote finds its key taken and is not written (or counted)
// again. Counting is the tally's, from the ledger's stream.
type Counter struct {
	Store   Store
	Rejects RejectStore
	// Record, when set, keeps the rejects that name an existing poll for
	// that poll's producers, before they go to Rejects.
	Record RejectRecorder
	// Fence says which months take votes (the grace after a month's end).
	Fence Fence
	// Retirements, when set, tells a month the rotator retired (its table
	// deleted for good) from one not created yet: a vote of a retired month
	// is rejected month-closed, whatever Now says. It is asked afresh for
	// each such vote (a backlog's late votes: rare), not remembered: a
	// local stack's rehearsal may reopen a month (ddbpipe local clock
	// -reopen), and a vote rejected stays rejected.
	Retirements Retirements
	// Now is the counter's clock: castAt's checks and the fence. A
	// rehearsal may move it (lambdafn's clock file).
	Now func() time.Time
	// Wall is the real clock, the one the invocation's deadline is on
	// (time.Now by default): the deadline margin is measured with it.
	Wall func() time.Time
	// Parallel bounds the puts in flight at once (default DefaultParallel). The counter
	// sheds below it while its puts are throttled or fail, and grows back
	// as they succeed (shedding.go); Result.Parallel is the bound it ended at.
	Parallel int
	// MaxAttempts bounds the writes of one vote that fail for another
	// reason than throttling (default 8); a throttled write is retried,
	// with backoff, until the invocation's deadline margin.
	MaxAttempts int
	// Backoff is the pause before retry n (default: 20 ms doubling to 1 s, with jitter).
	Backoff func(attempt int) time.Duration
	// Margin is the time left before the deadline at which the counter
	// stops writing: at most 5 s by default, and never more than a quarter
	// of the time the invocation had when it started.
	Margin time.Duration
	Log    *slog.Logger

	once sync.Once
	shed *shedder
}

// defaults fills unset fields once; Count runs concurrently.
func (c *Counter) defaults() { c.once.Do(c.setDefaults) }

func (c *Counter) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Wall == nil {
		c.Wall = time.Now
	}
	if c.Parallel <= 0 {
		c.Parallel = DefaultParallel
	}
	c.shed = newShedder(c.Parallel)
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
}

// Count validates and writes a batch. Every message ends in exactly one of:
// accepted (written to the ledger now), duplicate (written before;
// acknowledged), rejected (in the reject store, with its reason, and
// recorded under the poll it names when that poll exists), or Failed (to be
// delivered again).
func (c *Counter) Count(ctx context.Context, msgs []Message) Result {
	c.defaults()
	now := c.Now()
	// Reads and writes end a margin before the deadline, in flight or not:
	// the margin is for the reject store and the answer.
	wctx, cancel := workWindow(ctx, c.Wall, c.Margin)
	defer cancel()
	res := Result{Rejected: map[Reason]int{}}
	var rejects []Rejected
	var valid []Entry
	byID := make(map[string]Message, len(msgs))
	for _, m := range msgs {
		byID[m.ID] = m
		v, err := Parse(m.Body, now)
		if err == nil {
			err = c.Fence.Accepts(v.CastAt, now)
		}
		if err != nil {
			rejects = append(rejects, rejected(m, err))
			continue
		}
		valid = append(valid, Entry{Vote: v, MessageID: m.ID})
	}

	polls, err := c.polls(wctx, valid, rejects)
	if err != nil {
		c.Log.WarnContext(ctx, "poll lookup failed; the batch's valid votes and the rejects naming a poll will be retried", "err", err)
		for _, e := range valid {
			res.Failed = append(res.Failed, e.MessageID)
		}
		valid, rejects = nil, c.unnamed(rejects, &res)
	}
	entries, dups, pollRejects := c.admit(valid, polls, byID)
	res.Duplicates += dups
	rejects = append(rejects, pollRejects...)
	started := c.Wall()
	rejects = append(rejects, c.write(wctx, entries, byID, &res)...)
	res.WriteTime = c.Wall().Sub(started)

	c.keep(ctx, rejects, polls, &res)
	sort.Strings(res.Failed)
	sort.Strings(res.Late)
	res.Parallel = c.shed.bound()
	return res
}

// polls reads, in one lookup, the polls the valid votes name and, when
// rejects are recorded, those the rejects name.
func (c *Counter) polls(ctx context.Context, valid []Entry, rejects []Rejected) (map[string]Poll, error) {
	ids := map[string]bool{}
	var list []string
	add := func(id string) {
		if id != "" && !ids[id] {
			ids[id] = true
			list = append(list, id)
		}
	}
	for _, e := range valid {
		add(e.PollID)
	}
	if c.Record != nil {
		for _, r := range rejects {
			add(r.PollID)
		}
	}
	if len(list) == 0 {
		return map[string]Poll{}, nil
	}
	polls, err := c.Store.Polls(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("votes: read polls: %w", err)
	}
	return polls, nil
}

// unnamed gives back the rejects that may have to be recorded under a
// poll that could not be read, and returns the others.
func (c *Counter) unnamed(rejects []Rejected, res *Result) []Rejected {
	if c.Record == nil {
		return rejects
	}
	var out []Rejected
	for _, r := range rejects {
		if r.PollID != "" {
			res.Failed = append(res.Failed, r.MessageID)
		} else {
			out = append(out, r)
		}
	}
	return out
}

// keep records the rejects that name an existing poll under it (Record),
// then sends every reject to the reject store. A message that could not be
// kept is given back: it comes back and is rejected again, and recording
// it again counts nothing.
func (c *Counter) keep(ctx context.Context, rejects []Rejected, polls map[string]Poll, res *Result) {
	if len(rejects) == 0 {
		return
	}
	var recordable []Rejected
	if c.Record != nil {
		for _, r := range rejects {
			if _, ok := polls[r.PollID]; ok {
				recordable = append(recordable, r)
			}
		}
	}
	if len(recordable) > 0 {
		if err := c.Record.RecordRejects(ctx, recordable); err != nil {
			c.Log.WarnContext(ctx, "poll reject records failed; those rejected messages will be retried", "err", err, "messages", len(recordable))
			back := make(map[string]bool, len(recordable))
			for _, r := range recordable {
				back[r.MessageID] = true
				res.Failed = append(res.Failed, r.MessageID)
			}
			rejects = slices.DeleteFunc(rejects, func(r Rejected) bool { return back[r.MessageID] })
		} else {
			res.Recorded = len(recordable)
		}
	}
	if len(rejects) == 0 {
		return
	}
	if err := c.Rejects.Reject(ctx, rejects); err != nil {
		// Never drop a rejected message: it comes back and is rejected again.
		c.Log.WarnContext(ctx, "reject store failed; rejected messages will be retried", "err", err, "messages", len(rejects))
		for _, r := range rejects {
			res.Failed = append(res.Failed, r.MessageID)
		}
		return
	}
	for _, r := range rejects {
		res.Rejected[r.Reason]++
	}
}

// rejected is the reject of m for err, with the ids its body names.
func rejected(m Message, err error) Rejected {
	r := rejectOf(m, err)
	r.PollID, r.VoteID, r.OptionID = named(m.Body)
	return r
}

// rejectedVote is the reject for err of m, which holds the valid vote v.
func rejectedVote(m Message, v Vote, err error) Rejected {
	r := rejectOf(m, err)
	r.PollID, r.VoteID, r.OptionID = v.PollID, v.VoteID, v.OptionID
	return r
}

func rejectOf(m Message, err error) Rejected {
	r := Rejected{MessageID: m.ID, SentAt: m.SentAt, Body: m.Body, Reason: ReasonMalformedJSON, Detail: err.Error()}
	var re *RejectError
	if errors.As(err, &re) {
		r.Reason, r.Detail = re.Reason, re.Detail
	}
	return r
}

// admit checks votes against their polls and drops repeats within the batch.
func (c *Counter) admit(valid []Entry, polls map[string]Poll, byID map[string]Message) (entries []Entry, dups int, rejects []Rejected) {
	seen := map[[2]string]string{} // ledger key → voteId
	for _, e := range valid {
		p, ok := polls[e.PollID]
		if !ok {
			rejects = append(rejects, rejectedVote(byID[e.MessageID], e.Vote, reject(ReasonUnknownPoll, "no poll %q", e.PollID)))
			continue
		}
		if err := p.Accepts(e.Vote); err != nil {
			rejects = append(rejects, rejectedVote(byID[e.MessageID], e.Vote, err))
			continue
		}
		e.OneVotePerVoter = p.OneVotePerVoter
		pk, sk := e.LedgerKey()
		if e.OneVotePerVoter {
			pk = "" // one vote per voter across months
		}
		if prev, ok := seen[[2]string{pk, sk}]; ok {
			if prev != e.VoteID { // one vote per voter: another vote by the same voter
				rejects = append(rejects, rejectedVote(byID[e.MessageID], e.Vote, duplicateVoter(e)))
			} else {
				dups++ // the same vote twice in one batch
			}
			continue
		}
		seen[[2]string{pk, sk}] = e.VoteID
		entries = append(entries, e)
	}
	return entries, dups, rejects
}

func duplicateVoter(e Entry) *RejectError {
	return reject(ReasonDuplicateVoter, "voter %q already voted in poll %s", e.VoterID, e.PollID)
}

// workWindow is the part of an invocation that reads and writes may take:
// ctx, ended margin before its deadline, where margin is at most a quarter
// of the time left by the wall clock (the deadline's own clock).
func workWindow(ctx context.Context, wall func() time.Time, margin time.Duration) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	margin = min(margin, d.Sub(wall())/4)
	return context.WithDeadline(ctx, d.Add(-margin))
}

// timeLeft reports whether the work window (workWindow) is still open by
// the wall clock.
func timeLeft(ctx context.Context, wall func() time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || d.After(wall())
}

// outcome is what writing one entry came to.
type outcome int

const (
	written outcome = iota
	duplicate
	refused // rejected, with a reason
	failed  // to be delivered again
)

// write puts the entries into the ledger, at most Parallel at once.
func (c *Counter) write(ctx context.Context, entries []Entry, byID map[string]Message, res *Result) (rejects []Rejected) {
	var mu sync.Mutex
	work := make(chan Entry)
	var wg sync.WaitGroup
	for range min(c.Parallel, len(entries)) {
		wg.Go(func() {
			for e := range work {
				var st putStats
				o, rej := c.put(ctx, e, &st)
				mu.Lock()
				res.Puts += st.puts
				res.Retries += st.retries
				res.Throttles += st.throttles
				res.Deadline = res.Deadline || st.deadline
				if st.lastErr != nil {
					res.LastError = st.lastErr.Error()
				}
				switch o {
				case written:
					res.Accepted++
				case duplicate:
					res.Duplicates++
				case refused:
					rejects = append(rejects, rejectedVote(byID[e.MessageID], e.Vote, rej))
				case failed:
					res.Failed = append(res.Failed, e.MessageID)
					if st.deadline {
						res.Late = append(res.Late, e.MessageID)
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, e := range entries {
		work <- e
	}
	close(work)
	wg.Wait()
	return rejects
}

type putStats struct {
	puts, retries, throttles int
	deadline                 bool
	lastErr                  error
}

// writeEndOf is what a write's end says of the store: DynamoDB tells a
// load it cannot take by throttling, so a throttled or failed write sheds
// and one that was answered grows the bound, however long it took. One
// cut off by the counter's own deadline says nothing (counted as a
// failure, every batch that ends with writes in flight would halve the
// bound).
func writeEndOf(ctx context.Context, err error) writeEnd {
	var ex *ExistsError
	switch {
	case err != nil && ctx.Err() != nil:
		return cutOff
	case err == nil || errors.As(err, &ex) || errors.Is(err, ErrNoLedger):
		return landed
	}
	return overload
}

// put writes one entry: the voter's claim first for a one-vote-per-voter
// poll, then the ledger item.
func (c *Counter) put(ctx context.Context, e Entry, st *putStats) (outcome, error) {
	if e.OneVotePerVoter {
		if o, err := c.attempt(ctx, e, claimWrite, st); o != written {
			return o, err
		}
	}
	return c.attempt(ctx, e, ledgerWrite, st)
}

// write is one of the two writes a vote may take.
type write int

const (
	claimWrite  write = iota // Store.ClaimVoter: a one-vote-per-voter poll's voter, once
	ledgerWrite              // Store.PutVote: the vote into its month's ledger
)

// send makes the write w of e once.
func (c *Counter) send(ctx context.Context, w write, e Entry) error {
	if w == claimWrite {
		return c.Store.ClaimVoter(ctx, e)
	}
	return c.Store.PutVote(ctx, e)
}

// attempt makes the write w of e until it lands. Throttling is retried
// until the deadline margin (given back, the message would wait out the
// queue's visibility timeout), anything else MaxAttempts times.
func (c *Counter) attempt(ctx context.Context, e Entry, w write, st *putStats) (outcome, error) {
	for attempt := 1; ; attempt++ {
		if !timeLeft(ctx, c.Wall) {
			st.deadline = true
			return failed, nil
		}
		if c.shed.acquire(ctx) != nil {
			st.deadline = true
			return failed, nil
		}
		err := c.send(ctx, w, e)
		c.shed.release(writeEndOf(ctx, err))
		var ex *ExistsError
		st.puts++
		switch {
		case err == nil:
			return written, nil
		case errors.As(err, &ex) && w == claimWrite:
			if ex.StoredVoteID != e.VoteID {
				return refused, duplicateVoter(e)
			}
			return written, nil // this vote's own claim, from an earlier delivery
		case errors.As(err, &ex):
			if e.OneVotePerVoter && ex.StoredVoteID != e.VoteID {
				return refused, duplicateVoter(e)
			}
			return duplicate, nil
		case errors.Is(err, ErrNoLedger):
			return c.noLedger(ctx, e)
		}
		st.lastErr = err
		throttled := errors.Is(err, ErrThrottled)
		if throttled {
			st.throttles++
		}
		_, bounded := ctx.Deadline()
		if attempt >= c.MaxAttempts && !(throttled && bounded) {
			c.Log.WarnContext(ctx, "ledger write failed; the vote will be retried", "err", err, "voteId", e.VoteID, "attempts", attempt)
			return failed, nil
		}
		st.retries++
		_ = retry.Sleep(ctx, c.Backoff(attempt)) // the deadline check above reports a cut-off
	}
}

// noLedger is what a vote whose month has no ledger table comes to: a
// month the rotator retired takes no vote again, whatever the counter's
// clock says (month-closed); any other is not created yet, and the vote is
// given back until the rotator creates it.
func (c *Counter) noLedger(ctx context.Context, e Entry) (outcome, error) {
	m := e.Month()
	var at time.Time
	var retired bool
	var err error
	if c.Retirements != nil {
		at, retired, err = c.Retirements.Retired(ctx, m)
	}
	switch {
	case err != nil:
		c.Log.WarnContext(ctx, "no ledger table for the vote's month, and its retirement could not be read; the vote will be retried",
			"month", m, "voteId", e.VoteID, "err", err)
		return failed, nil
	case retired:
		return refused, monthRetired(e, at)
	}
	c.Log.WarnContext(ctx, "no ledger table for the vote's month (the rotator creates it); the vote will be retried",
		"month", m, "voteId", e.VoteID)
	return failed, nil
}

func monthRetired(e Entry, at time.Time) *RejectError {
	return reject(ReasonMonthClosed, "castAt %s is in %s, which was retired (archived, verified and its ledger table deleted; archive verified %s): it takes no more votes",
		e.CastAt.Format(time.RFC3339), e.Month(), at.UTC().Format(time.RFC3339))
}
