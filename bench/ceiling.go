package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
	"github.com/ddbpipe/ddbpipe/tools/votesload"
)

// goalCeilingRatio: the counter's steady rate against the store's ceiling
// for the same puts, in the same run (issue 26).
const goalCeilingRatio = 0.9

// benchCeiling measures the design against the store it runs on. A plain
// loader putting the counter's own ledger items, with the counter's
// condition, as many at once as the counter's invocations can, into a
// table of the ledger's shape (its stream on) gives the store's ceiling.
// The deployed counter's steady rate on a backlog in the votes queue is set
// beside it, with the stream's consumers held (on AWS they do not share the
// table's capacity; here they share two cores with the emulator).
func benchCeiling(ctx context.Context, _ *stack.Env, scale float64) (*section, error) {
	env, err := awsShapedIdle(ctx, func(o *stack.Options) { o.TableWriteScale = 1 })
	if err != nil {
		return nil, err
	}
	defer env.Close()
	d, err := deployed(ctx, env)
	if err != nil {
		return nil, err
	}
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	if err := store.CreatePoll(ctx, votes.Poll{ID: "ceiling", Options: allOptions, Shards: 8}); err != nil {
		return nil, err
	}
	loadFor := time.Duration(max(scale, 0.25) * float64(20*time.Second))
	l := &votesload.Ceiling{Store: store, PollID: "ceiling", Options: allOptions,
		Writers: d.concurrency * counterParallel} // the counter's invocations × its puts in flight each
	// A first load warms DynamoDB Local's JVM; its figure is not kept.
	if _, err := l.Run(ctx, loadFor); err != nil {
		return nil, err
	}
	ceilings := make([]float64, 1, ceilingRounds+1)
	if ceilings[0], err = l.Run(ctx, loadFor/2); err != nil {
		return nil, err
	}

	var releases []func()
	for _, fn := range []string{"TallyFunction", "ArchiverFunction"} {
		release, err := env.Runner.Hold(fn)
		if err != nil {
			return nil, err
		}
		releases = append(releases, release)
	}
	if err := env.Start(ctx); err != nil {
		return nil, err
	}
	// Rounds of a flood between two measures of the ceiling: the
	// emulator slows as the ledger grows, so each flood is set beside
	// the ceiling on either side of it.
	floods := map[string]int{}
	var rounds []ceilingRound
	for i := range ceilingRounds {
		// Long enough that the batching window is at most a tenth of the
		// counter's writing, at the ceiling just measured.
		n := max(int(ceilings[i]*10*d.window.Seconds()*1.2), 2000)
		poll := fmt.Sprint("flood-", i+1)
		held, err := counterFlood(ctx, env, store, poll, n, uint64(9+i))
		if err != nil {
			return nil, err
		}
		after, err := l.Run(ctx, loadFor/2)
		if err != nil {
			return nil, err
		}
		ceilings = append(ceilings, after)
		floods[poll] = n
		rounds = append(rounds, ceilingRound{flood: held, before: ceilings[i], after: after})
	}
	for _, release := range releases {
		release()
	}
	floods["ceiling"] = int(l.Written())
	for poll, want := range floods {
		if err := allCounted(ctx, store, poll, want); err != nil {
			return nil, err
		}
	}
	ratios := make([]float64, len(rounds))
	for i, r := range rounds {
		ratios[i] = r.ratio()
	}
	ratio := median(ratios)

	s := &section{title: "Votes: the counter against the store's ceiling"}
	s.printf("A fresh stack (4 stream shards, conflicts on, IAM enforced). The store's ceiling: %d writers at once (the\n"+
		"counter's %d invocations × %d puts each) putting the counter's own ledger items with its condition into the month's\n"+
		"ledger, its stream on, for %s (after a first load of %s that warms the emulator's JVM). The counter: a backlog of\n"+
		"votes in the votes queue, its steady rate the median of its per-second ledger writes over the middle 80 %% of the\n"+
		"seconds it wrote. %d rounds of a flood between two measures of the ceiling: the emulator slows as the ledger grows,\n"+
		"so each flood is set beside the mean of the ceilings on either side of it, and the figure is the median of the\n"+
		"rounds. The ledger stream's consumers (the tally, the archiver) are held meanwhile (Runner.Hold): on AWS they do\n"+
		"not take the table's capacity, while here they share this machine's %d cores with the emulator, and the counter\n"+
		"then writes about half as fast. They are released after the floods, and every vote of the floods and of the\n"+
		"loader is counted at the end.\n\n",
		l.Writers, d.concurrency, counterParallel, (loadFor / 2).Round(time.Second), loadFor.Round(time.Second), ceilingRounds, runtime.NumCPU())
	s.printf("| round | votes | seconds writing (window %s) | counter's steady rate (ledger writes/s) | ceiling before / after | against the ceiling |\n|---|---:|---:|---:|---:|---:|\n", d.window)
	for i, r := range rounds {
		s.printf("| %d | %d | %d (%.0f %%) | %.0f | %.0f / %.0f | %.2f |\n", i+1, r.flood.votes, r.flood.seconds,
			100*d.window.Seconds()/float64(max(r.flood.seconds, 1)), r.flood.steady, r.before, r.after, r.ratio())
	}
	s.printf("\nGoal: steady counting ≥ %.1f × the store's ceiling (the median of the rounds): %s (%.2f).\n\n", goalCeilingRatio, metIf(ratio >= goalCeilingRatio), ratio)
	return s, nil
}

// ceilingRounds is the number of floods set beside the store's ceiling.
const ceilingRounds = 3

// ceilingRound is one flood and the ceilings measured either side of it.
type ceilingRound struct {
	flood         floodResult
	before, after float64
}

func (r ceilingRound) ratio() float64 { return r.flood.steady / ((r.before + r.after) / 2) }

// allCounted waits until a poll's results count want votes.
func allCounted(ctx context.Context, store *votesddb.Votes, poll string, want int) error {
	deadline := time.Now().Add(15 * time.Minute)
	for {
		t, err := votes.Results(ctx, store, poll, time.Now)
		if err == nil && t.Total == int64(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("poll %s: %d of %d votes counted in 15 minutes (%v)", poll, t.Total, want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// floodResult is what one flood of the votes queue came to.
type floodResult struct {
	votes   int
	seconds int     // seconds the counter wrote
	steady  float64 // ledger writes a second, the median of the middle 80 % of those seconds
}

// counterFlood queues n votes on a new poll with the counter held, so the rate
// measured is the counter's and not the producer's, then lets the counter
// at them and samples the month's ledger's admitted writes each second
// until the queue is empty.
func counterFlood(ctx context.Context, env *stack.Env, store *votesddb.Votes, poll string, n int, seed uint64) (floodResult, error) {
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: 8}); err != nil {
		return floodResult{}, err
	}
	release, err := env.Runner.Hold("CounterFunction")
	if err != nil {
		return floodResult{}, err
	}
	res, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"]),
		votesload.Options{PollID: poll, Options: allOptions, Count: n, Concurrency: 8, Seed: seed})
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("%d votes not sent", res.Failed)
	}
	if err != nil {
		release()
		return floodResult{}, fmt.Errorf("flood %s: %w", poll, err)
	}
	proxy := env.Proxies[faultproxy.DynamoDB]
	ledger := ledgerTable(env, time.Now())
	admitted := func() float64 {
		for _, t := range proxy.TableStats() {
			if t.Table == ledger {
				return t.AdmittedUnits
			}
		}
		return 0
	}
	last, lastAt := admitted(), time.Now()
	start := last
	release()
	var perSecond []float64
	deadline := time.Now().Add(15 * time.Minute)
	for {
		if time.Now().After(deadline) {
			return floodResult{}, fmt.Errorf("flood %s: the counter wrote %.0f of %d votes in 15 minutes", poll, last-start, n)
		}
		time.Sleep(time.Second)
		now, at := admitted(), time.Now()
		if now > start { // from the first write on
			perSecond = append(perSecond, (now-last)/at.Sub(lastAt).Seconds())
		}
		last, lastAt = now, at
		if debugVotes {
			st := proxy.Stats()
			c := functionStats(env.Runner, "CounterFunction")
			fmt.Printf("flood %s: %.0f written, %.0f/s req %d thr %d key %d conf %d tab %d 5xx %d up %d; counter inv %d inflight %d rec %d\n", poll, now-start, perSecond[len(perSecond)-1],
				st.Requests, st.Throttled, st.KeyThrottled, st.Conflicts, st.TableThrottled, st.ServerErrors, st.UpstreamErrors, c.Invocations, c.InFlight, c.Records)
		}
		depth, err := queueDepth(ctx, env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"])
		if err != nil {
			return floodResult{}, err
		}
		if depth == 0 && now > start {
			break
		}
	}
	// The seconds it wrote: until 99 % of its writes (the votes it failed
	// back come again after a retry delay, a tail of idle seconds).
	total, sum := 0.0, 0.0
	for _, x := range perSecond {
		total += x
	}
	for i, x := range perSecond {
		if sum += x; sum >= 0.99*total {
			perSecond = perSecond[:i+1]
			break
		}
	}
	writing := len(perSecond)
	cut := perSecond[writing/10 : max(writing-writing/10, writing/10+1)]
	return floodResult{votes: n, seconds: writing, steady: median(cut)}, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
