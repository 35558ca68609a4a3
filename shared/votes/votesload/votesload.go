// Package votesload is the load generator for the votes queue: a synthetic
// workload of votes on one poll (skewed over its options, paced, with a share
// of duplicates) sent through the votes producer, for the CLI's `votes send`,
// the demo, the integration tests and the benchmarks.
package votesload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// Sender sends a batch of votes and reports, vote by vote, which were not
// sent. *votessqs.Producer satisfies it.
type Sender interface {
	Send(ctx context.Context, vs []votes.Vote) (votessqs.SendResult, error)
}

var _ Sender = (*votessqs.Producer)(nil)

// ErrBadOptions is an Options that cannot be run.
var ErrBadOptions = errors.New("votesload: bad load options")

// Options is a synthetic workload for Run.
type Options struct {
	PollID  string
	Options []string
	// Skew 0 spreads votes uniformly over Options; Skew s > 0 weighs
	// option i by 1/(i+1)^s (Zipf), so the first options get the most.
	Skew float64
	// Count is the number of distinct votes.
	Count int
	// Rate paces the messages (votes and duplicates) per second with a
	// token bucket; 0 sends as fast as possible.
	Rate float64
	// DupRate is the share of Count sent a second time, with the same
	// voteId and body, picked among the votes already sent: Duplicates()
	// messages more, to exercise the counter's deduplication.
	DupRate float64
	// Voters is the number of distinct voterIds; 0 gives each vote its own.
	Voters int
	// Concurrency is the number of Sends in flight (default 4).
	Concurrency int
	// Seed makes the choices of options, voters and duplicates repeatable;
	// 0 picks a random seed. Vote ids come from NewID.
	Seed uint64
	// NewID makes the voteId of each new vote (default votessqs.NewVoteID);
	// Now is the clock of their castAt (default time.Now).
	NewID func() string
	Now   func() time.Time
	// Progress, when set, is called after each batch, one call at a time:
	// sent counts the messages sent so far (duplicates included), dups the
	// duplicates among them, total the messages planned (Count+Duplicates()).
	Progress func(sent, dups, total int)
}

// Duplicates is the number of duplicate messages the load sends:
// Count×DupRate, rounded.
func (o Options) Duplicates() int { return int(math.Round(float64(o.Count) * o.DupRate)) }

// Validate checks the options.
func (o Options) Validate() error {
	if err := votes.ValidID(o.PollID); err != nil {
		return fmt.Errorf("%w: poll id %q: %w", ErrBadOptions, o.PollID, err)
	}
	if len(o.Options) == 0 || len(o.Options) > votes.MaxOptions {
		return fmt.Errorf("%w: want 1 to %d options, got %d", ErrBadOptions, votes.MaxOptions, len(o.Options))
	}
	seen := map[string]bool{}
	for _, opt := range o.Options {
		if err := votes.ValidID(opt); err != nil {
			return fmt.Errorf("%w: option %q: %w", ErrBadOptions, opt, err)
		}
		if seen[opt] {
			return fmt.Errorf("%w: option %q is listed twice", ErrBadOptions, opt)
		}
		seen[opt] = true
	}
	switch {
	case o.Count < 0:
		return fmt.Errorf("%w: count %d is negative", ErrBadOptions, o.Count)
	case !(o.Rate >= 0) || math.IsInf(o.Rate, 0):
		return fmt.Errorf("%w: rate %v must be 0 (no limit) or a positive number", ErrBadOptions, o.Rate)
	case !(o.DupRate >= 0 && o.DupRate <= 1):
		return fmt.Errorf("%w: dup rate %v is not between 0 and 1", ErrBadOptions, o.DupRate)
	case o.Voters < 0:
		return fmt.Errorf("%w: voters %d is negative", ErrBadOptions, o.Voters)
	case o.Concurrency < 0:
		return fmt.Errorf("%w: concurrency %d is negative", ErrBadOptions, o.Concurrency)
	case !(o.Skew >= 0) || math.IsInf(o.Skew, 0):
		return fmt.Errorf("%w: skew %v must be 0 (uniform) or a positive number", ErrBadOptions, o.Skew)
	}
	return nil
}

// Result is what Run sent. Sent+Duplicates+Failed is always the
// number of messages planned.
type Result struct {
	PollID string `json:"pollId"`
	// Sent counts the distinct votes sent.
	Sent int `json:"sent"`
	// Duplicates counts the duplicate messages sent.
	Duplicates int `json:"duplicates"`
	// Failed counts the messages not sent: refused, failed, or not tried
	// because the context ended or no vote was sent to duplicate.
	Failed int `json:"failed"`
	// PerOption counts the distinct votes sent for each option: what the
	// poll's totals should show once the counter has counted them.
	PerOption map[string]int `json:"perOption"`
	Elapsed   time.Duration  `json:"-"`
}

// MarshalJSON adds elapsedSeconds.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		ElapsedSeconds float64 `json:"elapsedSeconds"`
	}{plain(r), r.Elapsed.Seconds()})
}

// loadMsg is one message of a load: a new vote or a duplicate.
type loadMsg struct {
	vote votes.Vote
	dup  bool
}

// Run sends through s a synthetic workload of o.Count votes on o.PollID,
// plus o.Duplicates() re-sent votes, paced to o.Rate, and reports what was
// sent. It returns an error (with the result so far) when any message was
// not sent or the context ended.
func Run(ctx context.Context, s Sender, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	l := newLoad(s, o)
	l.startWorkers(ctx)
	stopped := l.generate(ctx)
	close(l.jobs)
	l.wg.Wait()
	return l.result(stopped)
}

// load is one Run: what is left to plan, and, shared with the workers
// under mu, what was sent.
type load struct {
	s      Sender
	o      Options
	start  time.Time
	rng    *rand.Rand
	pick   func(*rand.Rand) string
	chunk  int // messages per batch
	bucket tokenBucket
	total  int // messages planned

	// The generator's alone.
	newLeft, dupLeft int

	jobs chan []loadMsg
	wg   sync.WaitGroup

	mu       sync.Mutex
	changed  *sync.Cond   // a batch finished
	pool     []votes.Vote // votes sent, to duplicate
	inflight int
	first    error
	res      Result
}

func newLoad(s Sender, o Options) *load {
	if o.NewID == nil {
		o.NewID = votessqs.NewVoteID
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &load{s: s, o: o, start: time.Now(), jobs: make(chan []loadMsg)}
	l.changed = sync.NewCond(&l.mu)
	l.res = Result{PollID: o.PollID, PerOption: make(map[string]int, len(o.Options))}
	for _, opt := range o.Options {
		l.res.PerOption[opt] = 0
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	l.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	l.pick = optionPicker(o.Options, o.Skew)
	l.newLeft, l.dupLeft = o.Count, o.Duplicates()
	l.total = l.newLeft + l.dupLeft
	l.chunk = votessqs.MaxBatchEntries
	if o.Rate > 0 {
		l.chunk = min(max(int(o.Rate/20), 1), votessqs.MaxBatchEntries) // about 20 batches a second, or more
	}
	l.bucket = tokenBucket{rate: o.Rate, burst: float64(l.chunk)}
	return l
}

// startWorkers starts o.Concurrency (default 4) senders of the jobs.
func (l *load) startWorkers(ctx context.Context) {
	workers := l.o.Concurrency
	if workers == 0 {
		workers = 4
	}
	for range workers {
		l.wg.Go(func() {
			for job := range l.jobs {
				l.send(ctx, job)
			}
		})
	}
}

// send sends one job and counts what became of each of its messages.
func (l *load) send(ctx context.Context, job []loadMsg) {
	vs := make([]votes.Vote, len(job))
	for i, m := range job {
		vs[i] = m.vote
	}
	sr, err := l.s.Send(ctx, vs)
	failed := make(map[int]bool, len(sr.Failed))
	for _, f := range sr.Failed {
		failed[f.Index] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && l.first == nil {
		l.first = err
	}
	for i, m := range job {
		switch {
		case failed[i] || err != nil && len(sr.Failed) == 0: // not sent at all
			l.res.Failed++
		case m.dup:
			l.res.Duplicates++
		default:
			l.res.Sent++
			l.res.PerOption[m.vote.OptionID]++
			l.pool = append(l.pool, m.vote)
		}
	}
	l.inflight--
	if l.o.Progress != nil {
		l.o.Progress(l.res.Sent+l.res.Duplicates, l.res.Duplicates, l.total)
	}
	l.changed.Broadcast()
}

// generate plans the messages, a job at a time, paced, until none is left,
// the context ends (its error) or nothing can be duplicated.
func (l *load) generate(ctx context.Context) error {
	for l.newLeft+l.dupLeft > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		job, ok := l.nextJob()
		if !ok {
			return nil // nothing was sent, so nothing can be duplicated
		}
		if l.o.Rate > 0 {
			if err := retry.Sleep(ctx, l.bucket.take(time.Now(), float64(len(job)))); err != nil {
				l.newLeft, l.dupLeft = l.newLeft+countNew(job), l.dupLeft+len(job)-countNew(job)
				return err
			}
		}
		l.mu.Lock()
		l.inflight++
		l.mu.Unlock()
		l.jobs <- job
	}
	return nil
}

// nextJob is up to chunk messages, new votes and duplicates mixed in the
// proportion left; false when there is nothing to send and nothing sent
// to duplicate.
func (l *load) nextJob() ([]loadMsg, bool) {
	job := make([]loadMsg, 0, l.chunk)
	for len(job) < l.chunk && l.newLeft+l.dupLeft > 0 {
		l.mu.Lock()
		for l.newLeft == 0 && len(l.pool) == 0 && len(job) == 0 && l.inflight > 0 {
			l.changed.Wait() // only duplicates are left: wait for something to duplicate
		}
		dup, n := votes.Vote{}, len(l.pool)
		useDup := l.dupLeft > 0 && n > 0 && (l.newLeft == 0 || l.rng.Float64()*float64(l.newLeft+l.dupLeft) < float64(l.dupLeft))
		if useDup {
			dup = l.pool[l.rng.IntN(n)]
		}
		l.mu.Unlock()
		switch {
		case useDup:
			job = append(job, loadMsg{vote: dup, dup: true})
			l.dupLeft--
		case l.newLeft > 0:
			job = append(job, loadMsg{vote: newVote(l.o, l.rng, l.pick)})
			l.newLeft--
		case len(job) > 0:
			return job, true // send these; the duplicates wait for a vote to be sent
		default:
			return nil, false
		}
	}
	return job, true
}

// result is the Result once the workers are done, and its error.
func (l *load) result(stopped error) (Result, error) {
	res := l.res
	res.Failed += l.newLeft + l.dupLeft // planned, never tried
	res.Elapsed = time.Since(l.start)
	switch {
	case stopped != nil:
		return res, fmt.Errorf("votesload: stopped with %d of %d messages sent: %w", res.Sent+res.Duplicates, l.total, stopped)
	case l.first != nil:
		return res, fmt.Errorf("votesload: %d of %d messages not sent; first: %w", res.Failed, l.total, l.first)
	case res.Failed > 0:
		return res, fmt.Errorf("votesload: %d of %d messages not sent", res.Failed, l.total)
	}
	return res, nil
}

func countNew(job []loadMsg) int {
	n := 0
	for _, m := range job {
		if !m.dup {
			n++
		}
	}
	return n
}

// newVote makes a new vote of a load.
func newVote(o Options, rng *rand.Rand, pick func(*rand.Rand) string) votes.Vote {
	id := o.NewID()
	voter := "voter-" + id
	if o.Voters > 0 {
		voter = "voter-" + strconv.Itoa(rng.IntN(o.Voters))
	}
	return votes.Vote{VoteID: id, PollID: o.PollID, OptionID: pick(rng), VoterID: voter, CastAt: o.Now().UTC()}
}

// optionPicker draws options uniformly (skew 0) or by Zipf weights.
func optionPicker(options []string, skew float64) func(*rand.Rand) string {
	if skew == 0 {
		return func(r *rand.Rand) string { return options[r.IntN(len(options))] }
	}
	cum := make([]float64, len(options))
	sum := 0.0
	for i := range options {
		sum += 1 / math.Pow(float64(i+1), skew)
		cum[i] = sum
	}
	return func(r *rand.Rand) string {
		x := r.Float64() * sum
		return options[min(sort.SearchFloat64s(cum, x), len(options)-1)]
	}
}

// tokenBucket paces a load: rate tokens a second, at most burst saved.
type tokenBucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// take reserves n tokens at now and returns how long to wait before using
// them (the bucket may go into debt; later takes wait for it to refill).
func (b *tokenBucket) take(now time.Time, n float64) time.Duration {
	if b.last.IsZero() {
		b.tokens, b.last = b.burst, now
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}
