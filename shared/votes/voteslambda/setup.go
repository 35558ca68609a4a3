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
	if err := v.Err(); err != nil {
		return nil, err
	}
	store := votesddb.New(awsenv.DynamoDB(env.AWS), table, prefix)
	h := &HTTP{Store: store, DefaultShards: shards, Now: time.Now, Log: env.Log}
	return h.Handle, nil
}

// SetupCounter wires the counter function: it counts the votes queue into sharded counters and the ledger.
func SetupCounter(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("COUNTERS_TABLE")
	prefix := v.String("LEDGER_TABLE_PREFIX")
	mode := v.OneOf("COUNTING_MODE", string(votes.ExactlyOnce), string(votes.AtLeastOnce))
	rejectsURL := v.String("REJECTS_QUEUE_URL")
	if err := v.Err(); err != nil {
		return nil, err
	}
	counter := &votes.Counter{
		Store:   votesddb.New(awsenv.DynamoDB(env.AWS), table, prefix),
		Rejects: votessqs.NewRejects(sqs.NewFromConfig(env.AWS), rejectsURL),
		Mode:    votes.Mode(mode),
		Log:     env.Log,
	}
	metrics := lambdafn.NewMetrics(env, "counter")
	h := &SQS{Counter: counter, Metrics: metrics, Log: env.Log}
	return h.Handle, nil
}
