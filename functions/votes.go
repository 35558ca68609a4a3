package functions

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/dynamostore"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/sqsqueue"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/voteslambda"
)

// VotesAPI serves polls and results over the HTTP API.
func VotesAPI(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("COUNTERS_TABLE")
	shards := v.Int("COUNTER_SHARDS", 1, 1000)
	prefix := v.String("LEDGER_TABLE_PREFIX")
	if err := v.Err(); err != nil {
		return nil, err
	}
	store := dynamostore.New(awsenv.DynamoDB(env.AWS), table, prefix)
	h := &voteslambda.HTTP{Store: store, DefaultShards: shards, Now: time.Now, Log: env.Log}
	return h.Handle, nil
}

// Counter counts the votes queue into sharded counters and the ledger.
func Counter(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("COUNTERS_TABLE")
	prefix := v.String("LEDGER_TABLE_PREFIX")
	mode := v.OneOf("COUNTING_MODE", string(votes.ExactlyOnce), string(votes.AtLeastOnce))
	rejectsURL := v.String("REJECTS_QUEUE_URL")
	if err := v.Err(); err != nil {
		return nil, err
	}
	counter := &votes.Counter{
		Store:   dynamostore.New(awsenv.DynamoDB(env.AWS), table, prefix),
		Rejects: sqsqueue.NewRejects(sqs.NewFromConfig(env.AWS), rejectsURL),
		Mode:    votes.Mode(mode),
		Log:     env.Log,
	}
	metrics := newMetrics(env, "counter")
	h := &voteslambda.SQS{Counter: counter, Metrics: metrics, Log: env.Log}
	return h.Handle, nil
}
