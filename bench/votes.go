package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// scaledKeyLimit is the per-key write limit (write units per second) of the
// scaled runs; 0 skips them. Set by bench's -key-limit flag.
var scaledKeyLimit float64 = 100

// The goals for the votes flow.
const (
	goalUnitsPerVote  = 1.1  // ledger + counters + checkpoints
	goalUSDPerMillion = 0.80 // modelled, see votesCost
	goalCostRatio     = 1.05 // ddbpipe ÷ naive, Lambda at AWS's latencies (issue 26)
	goalHotRatio      = 12.0 // ddbpipe ÷ naive, end to end, hot flood
	goalHotKeyLimit   = 100  // … at this many write units per second per key
	goalHotRuns       = 5    // … in this many consecutive runs, none failing a message back
	goalCaughtUp      = 2.0  // seconds, p99, last vote written → counted
)

// warmUpVotes is the size of the unreported first pass of each consumer.
const warmUpVotes = 2000

// debugVotes prints each run's progress every 5 s (DDBPIPE_BENCH_DEBUG=1).
var debugVotes = os.Getenv("DDBPIPE_BENCH_DEBUG") != ""

// awsKeyLimit is AWS's per-partition write limit the scale is taken from.
func awsKeyLimit() float64 { return faultproxy.DefaultKeyWriteLimit }

// benchVotes: the same votes through the naive consumer and through
// ddbpipe, on the local stack at AWS's partition limit and at scaled
// limits; the staleness of the counters, the cost per million votes and
// the goals.
func benchVotes(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	since := time.Now()
	d, err := deployed(ctx, env)
	if err != nil {
		return nil, err
	}
	s := &section{title: "Votes: a naive counter against the ledger and its tally"}
	votesIntro(s, d)

	spread := flood{label: "ten-option spread", options: allOptions, seed: 1}
	// DynamoDB Local's JVM compiles its hot paths during the first thousands
	// of writes: a pass of each consumer, not reported, keeps that out of
	// the first measured run.
	for _, c := range []consumer{naive(env), ours(env, d)} {
		if _, err := runVotes(ctx, env, d, c, spread, warmUpVotes); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	// The scaled runs, which the goals judge, go first.
	var sc *scaledRuns
	if scaledKeyLimit > 0 {
		if sc, err = runScaled(ctx, env, d, scale); err != nil {
			return nil, err
		}
	}
	atAWS, err := pair(ctx, env, d, spread, max(int(20000*scale), 1000))
	if err != nil {
		return nil, err
	}
	reportAtAWS(s, atAWS, spread)
	everyRun := atAWS[:]
	if sc != nil {
		scaledReport(s, sc, d)
		everyRun = append(everyRun, sc.runs()...)
	}
	var oursRuns []runStats
	for _, r := range everyRun {
		if r.consumer == oursLabel {
			oursRuns = append(oursRuns, r)
		}
	}
	staleness(s, oursRuns)
	local, awsPaced := votesCost(s, env, d, atAWS)
	votesGoals(s, oursRuns, local[1], awsPaced, sc)
	anomalies(s, since, everyRun)
	if err := objectsCost(ctx, s, env, scale); err != nil {
		return nil, err
	}
	return s, nil
}

// votesIntro says what the two consumers are and what the figures measure.
func votesIntro(s *section, d deployment) {
	s.printf("Two consumers of the same votes, each on a queue of its own with the counter's mapping from template.yaml\n"+
		"(BatchSize %d, a %.0f s batching window, %d concurrent invocations, a %d s visibility timeout):\n\n"+
		"- **naive**: what public samples do, one UpdateItem ADD per vote on one item. It gets its best case: throttled writes\n"+
		"  are retried, up to 1 s apart, until they pass, so it never fails a message back to the queue.\n"+
		"- **ddbpipe**: the counter as deployed (`voteslambda.SetupCounter` with CounterFunction's environment and its %.0f s\n"+
		"  timeout), which writes each vote with one conditional PutItem (1 write unit) into its month's ledger, spread over\n"+
		"  %d partition keys per poll; the stack's own TallyFunction counts them from the ledger's stream into the poll's\n"+
		"  %d counter shards, with a checkpoint per stream shard, 2 units per item of each transaction. A vote is counted\n"+
		"  when `votes.Results` shows it.\n\n"+
		"\"End to end\" runs from the consumer's start to the first read (every 100 ms) that shows every vote; \"counting\"\n"+
		"from the first invocation's start, leaving out the wait for the first batch (the pollers split the queued flood and\n"+
		"each waits out its batching window for a batch that will not fill): a fixed cost of a finite flood that a continuous\n"+
		"one does not pay. Write units are the ones the DynamoDB proxy admitted (throttled requests are not billed): on the\n"+
		"poll's ledger keys, its counter keys, and the tally's checkpoint keys while the run lasted. A pass of %d votes\n"+
		"through each consumer, not reported, warms DynamoDB Local up first. The scaled runs, which the goals judge, come\n"+
		"next and the run at AWS's limit last.\n\n",
		d.batch, d.window.Seconds(), d.concurrency, d.visibility, d.timeout.Seconds(), votes.LedgerSuffixes, d.shards, warmUpVotes)
}

// pair runs the naive consumer, then ddbpipe, on the same flood.
func pair(ctx context.Context, env *stack.Env, d deployment, fl flood, n int) ([2]runStats, error) {
	var p [2]runStats
	for i, c := range []consumer{naive(env), ours(env, d)} {
		rs, err := runVotes(ctx, env, d, c, fl, n)
		if err != nil {
			return p, err
		}
		p[i] = rs
	}
	return p, nil
}

// scaledRuns are the runs at scaledKeyLimit: pairs (naive, ddbpipe) of
// the hot flood, then one pair of the spread.
type scaledRuns struct {
	limit  float64
	n      int
	hot    [][2]runStats
	spread [2]runStats
}

func (sc *scaledRuns) runs() []runStats {
	var out []runStats
	for _, p := range sc.hot {
		out = append(out, p[:]...)
	}
	return append(out, sc.spread[:]...)
}

func ratio(p [2]runStats) float64         { return p[1].vps() / p[0].vps() }
func countingRatio(p [2]runStats) float64 { return p[1].cvps() / p[0].cvps() }

// runScaled runs the two consumers on a hot flood (every vote for one
// option) goalHotRuns times and on the spread once, with the proxy's
// per-key write limit scaled down to scaledKeyLimit, so that the
// partitions, not DynamoDB Local's own speed, bound them.
func runScaled(ctx context.Context, env *stack.Env, d deployment, scale float64) (*scaledRuns, error) {
	proxy := env.Proxies[faultproxy.DynamoDB]
	prev := proxy.KeyWriteLimit()
	if err := proxy.SetKeyWriteLimit(scaledKeyLimit); err != nil {
		return nil, err
	}
	defer func() { _ = proxy.SetKeyWriteLimit(prev) }()

	sc := &scaledRuns{limit: scaledKeyLimit, n: max(int(4000*scale), 1000)}
	hot := flood{label: "one hot option", options: []string{"o0"}, seed: 2}
	spread := flood{label: "ten-option spread", options: allOptions, seed: 3}
	for range goalHotRuns {
		p, err := pair(ctx, env, d, hot, sc.n)
		if err != nil {
			return nil, fmt.Errorf("scaled: %w", err)
		}
		sc.hot = append(sc.hot, p)
	}
	var err error
	if sc.spread, err = pair(ctx, env, d, spread, sc.n); err != nil {
		return nil, fmt.Errorf("scaled: %w", err)
	}
	return sc, nil
}
