package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

// deployment is what template.yaml gives the counter: both consumers get
// its queue mapping, so they differ only in what they do with a batch.
type deployment struct {
	vars        map[string]string // CounterFunction's environment
	timeout     time.Duration     // CounterFunction's timeout
	batch       int               // BatchSize
	window      time.Duration     // MaximumBatchingWindowInSeconds
	concurrency int               // ScalingConfig.MaximumConcurrency
	visibility  int               // the votes queue's visibility timeout, seconds
	shards      int               // a new poll's counter shards (COUNTER_SHARDS)
}

func deployed(ctx context.Context, env *stack.Env) (deployment, error) {
	fns, err := env.Stack.Functions()
	if err != nil {
		return deployment{}, err
	}
	d := deployment{shards: 1}
	for _, f := range fns {
		switch f.LogicalID {
		case "CounterFunction":
			d.vars, d.timeout = f.Env, f.Timeout
			for _, ev := range f.Events {
				if ev.Type == "SQS" {
					p := ev.Properties
					d.batch = atoi(p["BatchSize"])
					d.window = time.Duration(atoi(p["MaximumBatchingWindowInSeconds"])) * time.Second
					scaling, _ := p["ScalingConfig"].(map[string]any)
					d.concurrency = atoi(scaling["MaximumConcurrency"])
				}
			}
		case "VotesApiFunction":
			d.shards = max(atoi(f.Env["COUNTER_SHARDS"]), 1)
		}
	}
	if d.vars == nil || d.batch == 0 || d.concurrency == 0 {
		return deployment{}, fmt.Errorf("template: CounterFunction or its SQS event is missing")
	}
	attrs, err := env.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.Vars["VOTES_QUEUE_URL"]),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		return deployment{}, fmt.Errorf("votes queue: %w", err)
	}
	d.visibility = atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	return d, nil
}

func atoi(v any) int {
	n, _ := strconv.Atoi(cfn.Scalar(v))
	return n
}

// consumer is one way of consuming the queue of a poll's votes.
type consumer struct {
	label string
	// handler builds the function for poll's votes on the queue at
	// queueURL; metrics receives its EMF lines.
	handler func(ctx context.Context, poll, queueURL string, metrics io.Writer) (any, error)
	timeout time.Duration
	// total reads the poll's count back.
	total func(ctx context.Context, poll string) (int64, error)
}

const naiveLabel, oursLabel = "naive", "ddbpipe"

// naive is what public samples do: one UpdateItem ADD per vote on one item.
func naive(env *stack.Env) consumer {
	table := env.Vars["COUNTERS_TABLE_NAME"]
	key := func(poll string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "naive#" + poll}, "sk": &ddbtypes.AttributeValueMemberS{Value: "total"}}
	}
	db := env.Clients.DynamoDB
	// Its best case: throttled writes are retried (up to 1 s apart, without
	// the SDK's retry quota) until they pass, so it runs at its key's limit
	// instead of failing messages back to the queue for the visibility
	// timeout. Its long timeout lets an invocation wait that long.
	patient := func(o *dynamodb.Options) {
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.AddWithMaxAttempts(retry.NewStandard(func(so *retry.StandardOptions) {
			so.RateLimiter = ratelimit.None
		}), 1000), time.Second)
	}
	return consumer{
		label:   naiveLabel,
		timeout: 15 * time.Minute,
		handler: func(ctx context.Context, poll, _ string, _ io.Writer) (any, error) {
			return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				var resp events.SQSEventResponse
				for _, m := range ev.Records {
					v, err := votes.Parse([]byte(m.Body), time.Now())
					if err == nil {
						_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
							TableName: aws.String(table), Key: key(poll),
							UpdateExpression:          aws.String("ADD #o :one"),
							ExpressionAttributeNames:  map[string]string{"#o": "o_" + v.OptionID},
							ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
						}, patient)
					}
					if err != nil {
						resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
					}
				}
				return resp, nil
			}, nil
		},
		total: func(ctx context.Context, poll string) (int64, error) {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(poll), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return 0, err
			}
			var n int64
			for k, v := range out.Item {
				if nv, ok := v.(*ddbtypes.AttributeValueMemberN); ok && strings.HasPrefix(k, "o_") {
					x, _ := strconv.ParseInt(nv.Value, 10, 64)
					n += x
				}
			}
			return n, nil
		},
	}
}

// ours is the counter as deployed (SetupCounter with CounterFunction's
// environment), hosted in the run's own runner; the stack's TallyFunction
// counts what it writes from the ledger's stream, so a vote is counted when
// votes.Results shows it.
func ours(env *stack.Env, d deployment) consumer {
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	return consumer{
		label:   oursLabel,
		timeout: d.timeout,
		handler: func(ctx context.Context, _, queueURL string, metrics io.Writer) (any, error) {
			// Its queue is the run's own: the votes it gives back late are
			// delayed there (on the stack's votes queue their receipt
			// handles are invalid, and they waited out the 360 s timeout).
			getenv := func(k string) string {
				if k == "VOTES_QUEUE_URL" {
					return queueURL
				}
				return d.vars[k]
			}
			return voteslambda.SetupCounter(ctx, lambdafn.Env{Getenv: getenv, AWS: env.AWS,
				Log: slog.New(slog.DiscardHandler), Metrics: metrics})
		},
		total: func(ctx context.Context, poll string) (int64, error) {
			t, err := votes.Results(ctx, store, poll, time.Now)
			return t.Total, err
		},
	}
}

// timedHandler notes when the consumer's first invocation started and its
// latest one ended.
type timedHandler struct {
	lambda.Handler
	first, last atomic.Int64
}

func (h *timedHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	h.first.CompareAndSwap(0, time.Now().UnixNano())
	out, err := h.Handler.Invoke(ctx, payload)
	end := time.Now().UnixNano()
	// Invocations end concurrently: keep the latest end.
	for old := h.last.Load(); end > old && !h.last.CompareAndSwap(old, end); old = h.last.Load() {
	}
	return out, err
}

func (h *timedHandler) times() (first, last time.Time) {
	return time.Unix(0, h.first.Load()), time.Unix(0, h.last.Load())
}
