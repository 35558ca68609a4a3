package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// benchSQS: messages per second the runner delivers from a queue to a
// handler that does nothing, for several event source settings.
func benchSQS(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	n := max(int(5000*scale), 100)
	cases := []struct {
		label       string
		batch       int
		window      time.Duration
		concurrency int
	}{
		{"batch 10, no window, 1 poller", 10, 0, 1},
		{"batch 10, no window, 5 pollers", 10, 0, 5},
		{"batch 1000, 1 s window, 5 pollers", 1000, time.Second, 5},
	}
	s := &section{title: "Runner: SQS event source"}
	s.printf("%d messages preloaded into a queue, delivered to a handler that does nothing.\n\n| settings | invocations | messages/s |\n|---|---|---|\n", n)
	chart := pngchart.Chart{Title: "SQS → handler, messages per second", Unit: "msg/s"}
	for i, c := range cases {
		name := fmt.Sprintf("bench-sqs-%d-%d", time.Now().UnixNano()%1e6, i)
		q, err := env.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			return nil, err
		}
		url := aws.ToString(q.QueueUrl)
		if err := preload(ctx, env.Clients.SQS, url, n); err != nil {
			return nil, err
		}
		var got atomic.Int64
		r := runner.New()
		_ = r.AddFunction(runner.Function{LogicalID: "Noop", Handler: lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) error {
			got.Add(int64(len(ev.Records)))
			return nil
		})})
		if _, err := r.AddSQS(env.Clients.SQS, runner.SQSMapping{Function: "Noop", QueueURL: url, BatchSize: c.batch, Window: c.window, MaxConcurrency: c.concurrency, WaitTime: time.Second}); err != nil {
			return nil, err
		}
		rate, err := drain(ctx, r, &got, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.label, err)
		}
		s.printf("| %s | %d | %.0f |\n", c.label, r.Stats()[0].Invocations, rate)
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: c.label, Value: rate})
	}
	s.charts = append(s.charts, chart)
	return s, nil
}

// drain runs r until the handler has seen n records and returns records per
// second.
func drain(ctx context.Context, r *runner.Runner, got *atomic.Int64, n int) (float64, error) {
	start := time.Now()
	stop, err := r.Start(ctx)
	if err != nil {
		return 0, err
	}
	for got.Load() < int64(n) && time.Since(start) < 5*time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	stop()
	if got.Load() < int64(n) {
		return 0, fmt.Errorf("only %d of %d records after %s", got.Load(), n, took)
	}
	return float64(n) / took.Seconds(), nil
}

func preload(ctx context.Context, c *sqs.Client, url string, n int) error {
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(`{"n":` + strconv.Itoa(j) + `}`)})
		}
		if _, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			return err
		}
	}
	return nil
}

// benchStreams: records per second from a table's stream to a handler.
func benchStreams(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	n := max(int(5000*scale), 100)
	name := fmt.Sprintf("bench-stream-%d", time.Now().UnixNano()%1e6)
	out, err := env.Clients.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		return nil, err
	}
	defer env.Clients.DynamoDB.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	writeStart := time.Now()
	for i := 0; i < n; i += 25 {
		var reqs []ddbtypes.WriteRequest
		for j := i; j < min(i+25, n); j++ {
			reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
				"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("item-%06d", j)}, "v": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(j)},
			}}})
		}
		if _, err := env.Clients.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{name: reqs}}); err != nil {
			return nil, err
		}
	}
	writeTook := time.Since(writeStart)
	s := &section{title: "Runner: DynamoDB Streams event source"}
	s.printf("%d items written with BatchWriteItem (%.0f items/s), then read from TRIM_HORIZON by the runner.\n\n| batch size | invocations | records/s |\n|---|---|---|\n", n, float64(n)/writeTook.Seconds())
	chart := pngchart.Chart{Title: "stream → handler, records per second", Unit: "rec/s"}
	for _, batch := range []int{100, 1000} {
		var got atomic.Int64
		r := runner.New()
		_ = r.AddFunction(runner.Function{LogicalID: "Noop", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
			got.Add(int64(len(ev.Records)))
			return nil
		})})
		if _, err := r.AddStream(env.Streams, env.Clients.SQS, runner.StreamMapping{Function: "Noop", StreamARN: aws.ToString(out.TableDescription.LatestStreamArn), BatchSize: batch}); err != nil {
			return nil, err
		}
		rate, err := drain(ctx, r, &got, n)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", batch, err)
		}
		s.printf("| %d | %d | %.0f |\n", batch, r.Stats()[0].Invocations, rate)
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: fmt.Sprintf("BatchSize %d", batch), Value: rate})
	}
	s.charts = append(s.charts, chart)
	return s, nil
}

// benchProxy: what the fault-injection proxy adds to a request's latency.
func benchProxy(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	n := max(int(2000*scale), 100)
	table := env.Vars["COUNTERS_TABLE_NAME"]
	key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "bench"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "proxy"}}
	direct := map[string]string{}
	for k, v := range env.Vars {
		direct[k] = v
	}
	direct["AWS_ENDPOINT_URL_DYNAMODB"] = env.Servers.DynamoDB
	cfg, err := awsenv.FromVars(ctx, func(k string) string { return direct[k] })
	if err != nil {
		return nil, err
	}
	type path struct {
		label string
		c     *dynamodb.Client
		// miss empties the judge's cache before each call: every call asks
		// the evaluator.
		miss bool
	}
	paths := []path{{"direct to DynamoDB Local", dynamodb.NewFromConfig(cfg), false}, {"through the proxy, as the admin (not judged)", env.Clients.DynamoDB, false}}
	if env.Judge != nil {
		// The tally's GetItem of a checkpoint: a call its role allows.
		tally := awsenv.DynamoDB(env.AWSAs("TallyFunction"))
		paths = append(paths, path{"through the proxy, judged (cache hit)", tally, false}, path{"through the proxy, judged (cache miss)", tally, true})
	}
	s := &section{title: "Fault-injection proxy overhead, and the IAM judge's"}
	s.printf("%d sequential GetItem calls each way (no faults configured). Judged calls are signed as the tally (its role allows the GetItem);\n", n)
	s.printf("a cache miss asks the evaluator (`@cloud-copilot/iam-simulate` in its Node process), a hit reuses its decision for the same identity, action, resource and context.\n\n")
	s.printf("| path | p50 ms | p99 ms | the judge's own time p50 ms | p99 ms |\n|---|---|---|---|---|\n")
	chart := pngchart.Chart{Title: "GetItem latency p50", Unit: "ms"}
	for _, p := range paths {
		if env.Judge != nil {
			env.Judge.ResetLatency()
		}
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			if p.miss {
				env.Judge.ForgetDecisions()
			}
			t := time.Now()
			if _, err := p.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key}); err != nil {
				return nil, fmt.Errorf("%s: %w", p.label, err)
			}
			lat = append(lat, time.Since(t))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p50, p99 := ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100])
		judge := "| – | – |"
		if env.Judge != nil && p.c != paths[0].c {
			j50, _ := env.Judge.CacheLatency(!p.miss, 0.5)
			j99, _ := env.Judge.CacheLatency(!p.miss, 0.99)
			judge = fmt.Sprintf("| %.3f | %.3f |", ms(j50), ms(j99))
		}
		s.printf("| %s | %.2f | %.2f %s\n", p.label, p50, p99, judge)
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: p.label, Value: p50})
	}
	if env.Judge == nil {
		s.printf("\nIAM enforcement was off (DDBPIPE_ENFORCE_IAM=0): no judged path.\n")
	}
	s.charts = append(s.charts, chart)
	return s, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
