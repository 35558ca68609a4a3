package functions

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbpipe/ddbpipe/shared/dynamostore"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
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
	store := dynamostore.New(dynamodb.NewFromConfig(env.AWS), table, prefix)
	h := &voteslambda.HTTP{Store: store, DefaultShards: shards, Now: time.Now, Log: env.Log}
	return h.Handle, nil
}
