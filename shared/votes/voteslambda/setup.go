package voteslambda

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// SetupVotesAPI wires the votes-api function: it serves polls and results over the HTTP API.
func SetupVotesAPI(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("COUNTERS_TABLE")
	shards := v.Int("COUNTER_SHARDS", 1, 1000)
	prefix := v.String("LEDGER_TABLE_PREFIX")
	now := v.Clock()
	if err := v.Err(); err != nil {
		return nil, err
	}
	store := votesddb.New(awsenv.DynamoDB(env.AWS), table, prefix)
	store.SetClock(now)
	h := &HTTP{Store: store, DefaultShards: shards, Now: now, Log: env.Log}
	return h.Handle, nil
}

// SetupCounter wires the counter function: it validates the votes queue's
// messages and writes each valid vote once into its month's ledger.
func SetupCounter(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("COUNTERS_TABLE")
	prefix := v.String("LEDGER_TABLE_PREFIX")
	grace := v.Int("ARCHIVE_GRACE_DAYS", 1, 27)
	rejectsURL := v.String("REJECTS_QUEUE_URL")
	now := v.Clock()
	if err := v.Err(); err != nil {
		return nil, err
	}
	store := votesddb.New(awsenv.DynamoDB(env.AWS), table, prefix)
	store.SetClock(now)
	counter := &votes.Counter{
		Store:   store,
		Rejects: votessqs.NewRejects(sqs.NewFromConfig(env.AWS), rejectsURL),
		Fence:   votes.Fence{Grace: time.Duration(grace) * 24 * time.Hour},
		Now:     now,
		Log:     env.Log,
	}
	metrics := lambdafn.NewMetrics(env, "counter")
	h := &SQS{Counter: counter, Metrics: metrics, Log: env.Log}
	return h.Handle, nil
}

// SetupTally wires the tally function: subscribed to every ledger table's
// stream, it adds each vote written to the poll's sharded counters.
func SetupTally(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("COUNTERS_TABLE")
	prefix := v.String("LEDGER_TABLE_PREFIX")
	now := v.Clock()
	if err := v.Err(); err != nil {
		return nil, err
	}
	store := votesddb.New(awsenv.DynamoDB(env.AWS), table, prefix)
	store.SetClock(now)
	tally := &votes.Tally{Store: store, Now: now, Log: env.Log}
	h := &Stream{Tally: tally, Metrics: lambdafn.NewMetrics(env, "tally"), Log: env.Log}
	return h.Handle, nil
}
