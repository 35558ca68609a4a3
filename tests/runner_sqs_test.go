package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/runner"
)

// testQueue creates a queue (with a dead-letter queue when maxReceive > 0)
// and returns its URL, ARN and the DLQ's URL.
func testQueue(t *testing.T, c clients, visibility, maxReceive int) (url, arn, dlq string) {
	t.Helper()
	ctx := context.Background()
	name := unique("q")
	attrs := map[string]string{"VisibilityTimeout": fmt.Sprint(visibility)}
	if maxReceive > 0 {
		d, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
		if err != nil {
			t.Fatal(err)
		}
		dlq = aws.ToString(d.QueueUrl)
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, queueARN(t, c, dlq), maxReceive)
	}
	q, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	url = aws.ToString(q.QueueUrl)
	return url, queueARN(t, c, url), dlq
}

func queueARN(t *testing.T, c clients, url string) string {
	t.Helper()
	out, err := c.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

func sendBodies(t *testing.T, c clients, url string, bodies ...string) {
	t.Helper()
	for len(bodies) > 0 {
		n := min(10, len(bodies))
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, b := range bodies[:n] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(b)})
		}
		out, err := c.sqs.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v %+v", err, out)
		}
		bodies = bodies[n:]
	}
}

// drain receives every message currently in a queue.
func drain(t *testing.T, c clients, url string) []string {
	t.Helper()
	var got []string
	for {
		out, err := c.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			got = append(got, aws.ToString(m.Body))
			_, _ = c.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// deliveries counts how often each message body reached a handler.
type deliveries struct {
	mu     sync.Mutex
	counts map[string]int
	events []events.SQSEvent
}

func (d *deliveries) add(ev events.SQSEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	for _, m := range ev.Records {
		d.counts[m.Body]++
	}
	d.events = append(d.events, ev)
}

func (d *deliveries) count(body string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[body]
}

func (d *deliveries) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.counts)
}

func startRunner(t *testing.T, r *runner.Runner) {
	t.Helper()
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// Partial batch failure: only the reported messages come back, and after
// maxReceiveCount deliveries they are in the dead-letter queue.
func TestRunnerSQSPartialBatchFailure(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	needStack(t)
	c := newClients(t, nil)
	// A visibility timeout well past the batching window (1 s): a message
	// held in a window must not come back before its batch is done.
	url, arn, dlq := testQueue(t, c, 3, 3)
	var d deliveries
	poison := map[string]bool{"m3": true, "m7": true}
	r := runner.New(runner.WithLogger(testLogger(t)))
	if err := r.AddFunction(runner.Function{LogicalID: "Fn", Timeout: 10 * time.Second, Handler: lambda.NewHandler(
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			d.add(ev)
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				if m.EventSource != "aws:sqs" || m.EventSourceARN != arn || m.Attributes["ApproximateReceiveCount"] == "" {
					return resp, fmt.Errorf("event record not shaped like Lambda's: %+v", m)
				}
				if poison[m.Body] {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
			}
			return resp, nil
		})}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddSQS(c.sqs, runner.SQSMapping{
		Function: "Fn", QueueURL: url, QueueARN: arn, BatchSize: 10, Window: time.Second,
		ReportBatchItemFailures: true, MaxConcurrency: 2, WaitTime: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := 0; i < 10; i++ {
		bodies = append(bodies, fmt.Sprintf("m%d", i))
	}
	sendBodies(t, c, url, bodies...)
	startRunner(t, r)

	var inDLQ []string
	eventually(t, 60*time.Second, "both poison messages in the DLQ", func() bool {
		inDLQ = append(inDLQ, drain(t, c, dlq)...)
		return len(inDLQ) >= 2
	})
	sort.Strings(inDLQ)
	if got, want := strings.Join(inDLQ, ","), "m3,m7"; got != want {
		t.Errorf("DLQ holds %s, want %s", got, want)
	}
	for _, b := range bodies {
		want := 1
		if poison[b] {
			want = 3 // maxReceiveCount
		}
		if got := d.count(b); got != want {
			t.Errorf("%s delivered %d times, want %d", b, got, want)
		}
	}
	if rest := drain(t, c, url); len(rest) != 0 {
		t.Errorf("queue still holds %v", rest)
	}
}

// A function error fails the whole batch; a response naming a message that is
// not in the batch does too (as in AWS). Both come back and succeed later.
func TestRunnerSQSWholeBatchFailures(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	needStack(t)
	tests := []struct {
		name    string
		respond func(ev events.SQSEvent) (events.SQSEventResponse, error)
	}{
		{"function error", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, fmt.Errorf("boom")
		}},
		{"unknown item identifier", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "not-a-message-id"}}}, nil
		}},
		{"empty item identifier", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ""}}}, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClients(t, nil)
			url, arn, _ := testQueue(t, c, 3, 0) // past the 1 s window: see TestRunnerSQSPartialBatchFailure
			var d deliveries
			var mu sync.Mutex
			failedOnce := false
			r := runner.New(runner.WithLogger(testLogger(t)))
			_ = r.AddFunction(runner.Function{LogicalID: "Fn", Timeout: 10 * time.Second, Handler: lambda.NewHandler(
				func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					d.add(ev)
					mu.Lock()
					defer mu.Unlock()
					if !failedOnce {
						failedOnce = true
						return tt.respond(ev)
					}
					return events.SQSEventResponse{}, nil
				})})
			if _, err := r.AddSQS(c.sqs, runner.SQSMapping{Function: "Fn", QueueURL: url, QueueARN: arn, BatchSize: 5, Window: time.Second,
				ReportBatchItemFailures: true, MaxConcurrency: 1, WaitTime: time.Second}); err != nil {
				t.Fatal(err)
			}
			sendBodies(t, c, url, "a", "b", "c", "d", "e")
			startRunner(t, r)
			eventually(t, 60*time.Second, "every message delivered twice", func() bool {
				for _, b := range []string{"a", "b", "c", "d", "e"} {
					if d.count(b) < 2 {
						return false
					}
				}
				return true
			})
			time.Sleep(3500 * time.Millisecond) // past the visibility timeout: nothing more may come
			for _, b := range []string{"a", "b", "c", "d", "e"} {
				if got := d.count(b); got != 2 {
					t.Errorf("%s delivered %d times, want 2 (once failed with the whole batch, once ok)", b, got)
				}
			}
		})
	}
}

// BatchSize and the batching window: with a window, messages sent in a
// burst arrive in few, full invocations; no invocation exceeds BatchSize.
func TestRunnerSQSBatching(t *testing.T) {
	t.Parallel()
	needStack(t)
	c := newClients(t, nil)
	url, arn, _ := testQueue(t, c, 30, 0)
	var d deliveries
	r := runner.New(runner.WithLogger(testLogger(t)))
	_ = r.AddFunction(runner.Function{LogicalID: "Fn", Handler: lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) error {
		d.add(ev)
		return nil
	})})
	if _, err := r.AddSQS(c.sqs, runner.SQSMapping{Function: "Fn", QueueURL: url, QueueARN: arn, BatchSize: 25, Window: 2 * time.Second, MaxConcurrency: 1, WaitTime: time.Second}); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := 0; i < 60; i++ {
		bodies = append(bodies, fmt.Sprint(i))
	}
	sendBodies(t, c, url, bodies...)
	startRunner(t, r)
	eventually(t, 60*time.Second, "60 messages", func() bool { return d.distinct() == 60 })
	d.mu.Lock()
	defer d.mu.Unlock()
	sizes := []int{}
	for _, ev := range d.events {
		sizes = append(sizes, len(ev.Records))
		if len(ev.Records) > 25 {
			t.Errorf("an invocation got %d records, above BatchSize 25", len(ev.Records))
		}
	}
	if len(d.events) > 4 {
		t.Errorf("60 messages took %d invocations %v; with a 2 s window and BatchSize 25 they should fill batches (≤ 4)", len(d.events), sizes)
	}
}

// Fault switches: duplicate delivery hands a successful batch to the handler
// again; a crash mid-batch shows the handler only a prefix and retries all.
func TestRunnerSQSFaultSwitches(t *testing.T) {
	t.Parallel()
	needStack(t)
	c := newClients(t, nil)
	url, arn, _ := testQueue(t, c, 1, 0)
	var d deliveries
	r := runner.New(runner.WithLogger(testLogger(t)), runner.WithSeed(7))
	_ = r.AddFunction(runner.Function{LogicalID: "Fn", Handler: lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) error {
		d.add(ev)
		return nil
	})})
	r.SetFaults(runner.Faults{DuplicateRate: 1})
	if _, err := r.AddSQS(c.sqs, runner.SQSMapping{Function: "Fn", QueueURL: url, QueueARN: arn, BatchSize: 10, MaxConcurrency: 1, WaitTime: time.Second}); err != nil {
		t.Fatal(err)
	}
	sendBodies(t, c, url, "x", "y")
	startRunner(t, r)
	eventually(t, 30*time.Second, "duplicates", func() bool { return d.count("x") == 2 && d.count("y") == 2 })

	r.SetFaults(runner.Faults{CrashRate: 1})
	sendBodies(t, c, url, "z")
	eventually(t, 30*time.Second, "a crash", func() bool {
		for _, s := range r.Stats() {
			if s.Crashes >= 2 {
				return true
			}
		}
		return false
	})
	r.SetFaults(runner.Faults{})
	eventually(t, 30*time.Second, "z after the crashes", func() bool { return d.count("z") >= 1 })
	if got := d.count("z"); got != 1 {
		// With CrashRate 1 and one record the handler saw an empty prefix each time.
		t.Errorf("z delivered %d times, want 1 (crashed invocations saw an empty prefix)", got)
	}
}
