package voteslambda

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votess3"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// storeVars are what every votes function reads to reach its tables: the
// counters table, the ledger tables' prefix, and the clock.
type storeVars struct {
	table, prefix string
	now           func() time.Time
}

func readStoreVars(v *lambdafn.Vars) storeVars {
	return storeVars{table: v.String("COUNTERS_TABLE"), prefix: v.String("LEDGER_TABLE_PREFIX"), now: v.Clock()}
}

// store is the votes store over those tables, on that clock.
func (c storeVars) store(env lambdafn.Env) *votesddb.Votes {
	s := votesddb.New(awsenv.DynamoDB(env.AWS), c.table, c.prefix)
	s.SetClock(c.now)
	return s
}

// SetupVotesAPI wires the votes-api function: it serves polls and results over the HTTP API.
func SetupVotesAPI(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	sv := readStoreVars(v)
	shards := v.Int("COUNTER_SHARDS", 1, 1000)
	if err := v.Err(); err != nil {
		return nil, err
	}
	h := &HTTP{Store: sv.store(env), DefaultShards: shards, Now: sv.now, Log: env.Log}
	return h.Handle, nil
}

// SetupCounter wires the counter function: it validates the votes queue's
// messages and writes each valid vote once into its month's ledger.
func SetupCounter(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	sv := readStoreVars(v)
	grace := v.Int("ARCHIVE_GRACE_DAYS", 1, 27)
	rejectsURL := v.String("REJECTS_QUEUE_URL")
	archiveBucket := v.String("ARCHIVE_BUCKET") // the rotator's record of retired months
	votesURL := env.Getenv("VOTES_QUEUE_URL")   // optional: without it, given-back votes wait the queue's timeout
	retryMax := v.Int("VOTES_VISIBILITY_TIMEOUT", 1, 43200)
	maxReceives := v.Int("VOTES_MAX_RECEIVE_COUNT", 1, 1000)
	if err := v.Err(); err != nil {
		return nil, err
	}
	client := sqs.NewFromConfig(env.AWS)
	store := sv.store(env)
	counter := &votes.Counter{
		Store:       store,
		Rejects:     votessqs.NewRejects(client, rejectsURL),
		Record:      store,
		Fence:       votes.Fence{Grace: time.Duration(grace) * ledger.Day},
		Retirements: &votess3.Retirements{S3: awsenv.S3(env.AWS), Bucket: archiveBucket, Table: sv.prefix},
		Now:         sv.now,
		Log:         env.Log,
	}
	metrics := lambdafn.NewMetrics(env, "counter")
	h := &SQS{Counter: counter, Metrics: metrics, Log: env.Log,
		Retry: votes.Retry{Most: time.Duration(retryMax) * time.Second, MaxReceives: maxReceives}}
	if votesURL != "" {
		h.Requeue = votessqs.NewRequeue(client, votesURL)
	}
	return h.Handle, nil
}

// CounterPickVar names how the tally places its increments on a poll's
// counter shards: stream (default) or random.
const CounterPickVar = "TALLY_COUNTER_PICK"

// SetupTally wires the tally function: subscribed to every ledger table's
// stream, it adds each vote written to the poll's sharded counters.
func SetupTally(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	sv := readStoreVars(v)
	if err := v.Err(); err != nil {
		return nil, err
	}
	tally := &votes.Tally{Store: sv.store(env), Now: sv.now, Log: env.Log}
	// TALLY_COUNTER_PICK: "stream" (the default) derives each commit's
	// counter shard from the stream shard; "random" picks one per option,
	// the bench's comparison.
	switch pick := env.Getenv(CounterPickVar); pick {
	case "", "stream":
		tally.Pick = votes.StreamPick(time.Second)
	case "random":
		tally.Pick = votes.RandomPick()
	default:
		return nil, fmt.Errorf("voteslambda: %s=%q: want stream or random", CounterPickVar, pick)
	}
	h := &Stream{Tally: tally, Metrics: lambdafn.NewMetrics(env, "tally"), Log: env.Log}
	return h.Handle, nil
}
