package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// The goals of the stream shards benchmark (issue 26).
const (
	goalConflictShare = 0.01 // tally commits cancelled by a conflict, K = 16
)

// shardRun is one flood through the deployed pipeline on a stack whose
// ledger stream has k shards.
type shardRun struct {
	k         int
	pick      string
	n         int
	counted   int64
	caughtUp  time.Duration // from the last vote queued to every vote counted
	shards    int           // the ledger stream's shards at the end (splits included)
	txs       int64         // TransactWriteItems the proxy saw
	cancelled int64         // … cancelled with TransactionConflict
	lags      []float64     // TallyLag of each tally batch: ledger write → commit, seconds
}

// benchShards sends the same flood through the whole pipeline (queue,
// counter, ledger, its stream, the tally) on fresh stacks whose streams
// have 1, 4 and 16 shards, with DynamoDB's transaction conflicts on, and at
// 16 shards once more with the random pick the tally used before.
func benchShards(ctx context.Context, _ *stack.Env, scale float64) (*section, error) {
	n := max(int(6000*scale), 1000)
	s := &section{title: "Votes at AWS's shape: many stream shards, transaction conflicts"}
	s.printf("Each row is a fresh local stack with DynamoDB's transaction conflicts on (a transaction touching an item another\n"+
		"request is writing is cancelled) and every stream presented as K shards that split after %d records, read one batch\n"+
		"per shard at a time as Lambda does. %d votes of a ten-option poll with 8 counter shards go into the votes queue at\n"+
		"once; the stack's counter writes them to the ledger and one tally per stream shard counts them. \"Caught up\" runs\n"+
		"from the last vote queued to the first read showing all of them. The pick is how the tally chooses counter shards:\n"+
		"`stream` (derived from its stream shard, the default) or `random` (a shard per option, as before). The tally's lag\n"+
		"is each batch's `TallyLag`: from the ledger write of its last vote to the commit that counted it.\n\n"+
		"| K | pick | votes | counted | stream shards at the end | tally transactions | cancelled by a conflict | tally lag p50 / p99 | caught up |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
		shardSplitAfter(n), n)
	var runs []shardRun
	for _, c := range []struct {
		k    int
		pick string
	}{{1, "stream"}, {4, "stream"}, {16, "stream"}, {16, "random"}} {
		r, err := floodShards(ctx, c.k, c.pick, n)
		if err != nil {
			return nil, fmt.Errorf("K=%d %s: %w", c.k, c.pick, err)
		}
		runs = append(runs, r)
		s.printf("| %d | %s | %d | %d | %d | %d | %d (%.2f %%) | %.2f / %.2f s | %.1f s |\n", r.k, r.pick, r.n, r.counted, r.shards, r.txs,
			r.cancelled, 100*share(r.cancelled, r.txs), percentile(r.lags, 50), percentile(r.lags, 99), r.caughtUp.Seconds())
	}
	s.printf("\nGoals (K = 16, conflicts on, the default pick; the random pick's row is the comparison):\n\n")
	for _, r := range runs {
		if r.k != 16 || r.pick != "stream" {
			continue
		}
		s.printf("- 0 votes lost or doubled: %s (%d of %d)\n", metIf(r.counted == int64(r.n)), r.counted, r.n)
		s.printf("- commits cancelled by a conflict ≤ %.0f %%: %s (%.2f %%; random pick %.2f %%)\n", 100*goalConflictShare,
			metIf(share(r.cancelled, r.txs) <= goalConflictShare), 100*share(r.cancelled, r.txs), 100*share(runs[len(runs)-1].cancelled, runs[len(runs)-1].txs))
		s.printf("- counters caught up ≤ %.0f s (p99) after a vote's ledger write: %s (%.2f s)\n", goalCaughtUp,
			metIf(percentile(r.lags, 99) <= goalCaughtUp), percentile(r.lags, 99))
	}
	s.printf("\nA cancelled commit is retried after a jittered pause and counts nothing twice (its checkpoint moves with it);\n" +
		"what a conflict costs is that pause and a second transaction's write units.\n\n")
	return s, nil
}

func metIf(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func share(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// shardSplitAfter makes each root shard split about once during a flood of
// n votes at K = 4.
func shardSplitAfter(n int) int { return max(n/8, 100) }

func floodShards(ctx context.Context, k int, pick string, n int) (shardRun, error) {
	r := shardRun{k: k, pick: pick, n: n}
	setups := map[string]lambdafn.Setup{}
	for id, f := range registry.All {
		setups[id] = f
	}
	setups["TallyFunction"] = func(ctx context.Context, env lambdafn.Env) (any, error) {
		get := env.Getenv
		env.Getenv = func(name string) string {
			if name == voteslambda.CounterPickVar {
				return pick
			}
			return get(name)
		}
		return voteslambda.SetupTally(ctx, env)
	}
	flog := &functionLog{}
	env, err := awsShaped(ctx, func(o *stack.Options) {
		o.Setups, o.FunctionLog, o.StreamShards, o.StreamSplitAfter = setups, flog, k, shardSplitAfter(n)
	})
	if err != nil {
		return r, err
	}
	defer env.Close()
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	poll := fmt.Sprintf("shards-%d-%s", k, pick)
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: 8}); err != nil {
		return r, err
	}
	start := time.Now()
	load, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"]),
		votesload.Options{PollID: poll, Options: allOptions, Count: n, Concurrency: 8, Seed: 3})
	if err != nil || load.Failed > 0 {
		return r, fmt.Errorf("load: %v (%d failed)", err, load.Failed)
	}
	sent := time.Now()
	deadline := sent.Add(10 * time.Minute)
	for {
		t, err := votes.Results(ctx, store, poll, time.Now)
		if err == nil && t.Total >= int64(n) {
			r.counted = t.Total
			r.caughtUp = time.Since(sent)
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("counted %d of %d votes in 10 minutes", t.Total, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A vote counted twice would show past n a moment later.
	time.Sleep(2 * time.Second)
	if t, err := votes.Results(ctx, store, poll, time.Now); err == nil {
		r.counted = t.Total
	}
	r.lags = flog.waitTally(start, n).lags
	st := env.Proxies[faultproxy.DynamoDB].Stats().ByAction["TransactWriteItems"]
	r.txs, r.cancelled = st.Requests, st.Conflicts
	if r.shards, err = ledgerShards(ctx, env); err != nil {
		return r, err
	}
	return r, nil
}

// ledgerShards counts the shards of this month's ledger stream.
func ledgerShards(ctx context.Context, env *stack.Env) (int, error) {
	out, err := env.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{
		TableName: aws.String(ledgerTable(env, time.Now())),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: out.Table.LatestStreamArn}
	for {
		d, err := env.Streams.DescribeStream(ctx, in)
		if err != nil {
			return 0, err
		}
		n += len(d.StreamDescription.Shards)
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return n, nil
		}
		in.ExclusiveStartShardId = d.StreamDescription.LastEvaluatedShardId
	}
}

// awsShaped starts a local stack of its own for a benchmark, shaped as a
// busy stack on AWS: streams in shards, transaction conflicts, AWS's
// per-key write limit; tune sets the rest. The caller closes it.
func awsShaped(ctx context.Context, tune func(*stack.Options)) (*stack.Env, error) {
	env, err := awsShapedIdle(ctx, tune)
	if err != nil {
		return nil, err
	}
	if err := env.Start(ctx); err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// ledgerTable is the stack's ledger table of t's month.
func ledgerTable(env *stack.Env, t time.Time) string {
	return ledger.TableName(env.Vars["LEDGER_TABLE_PREFIX"], ledger.MonthOf(t))
}

// awsShapedIdle is awsShaped with its event sources not yet started: a
// benchmark can queue a backlog before the functions see it.
func awsShapedIdle(ctx context.Context, tune func(*stack.Options)) (*stack.Env, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	o := stack.Options{Root: root, Setups: registry.All, Progress: io.Discard, FunctionLog: io.Discard,
		KeyWriteLimit: awsKeyLimit(), StreamShards: 4, Conflicts: true}
	tune(&o)
	return stack.Up(ctx, o)
}
