package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// memQueue is an in-memory queue for the poller's unit tests: it hands
// each message out once and counts the receives in flight at once.
type memQueue struct {
	mu               sync.Mutex
	msgs             []sqstypes.Message
	deleted          map[string]bool
	inFlight, mostAt int
}

func newMemQueue(n int) *memQueue {
	q := &memQueue{deleted: map[string]bool{}}
	for i := range n {
		id := fmt.Sprintf("m%04d", i)
		q.msgs = append(q.msgs, sqstypes.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("r-" + id), Body: aws.String(`{}`)})
	}
	return q
}

func (q *memQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	q.inFlight++
	q.mostAt = max(q.mostAt, q.inFlight)
	q.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // a round trip: lets receives overlap
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inFlight--
	n := min(int(in.MaxNumberOfMessages), len(q.msgs))
	out := &sqs.ReceiveMessageOutput{Messages: q.msgs[:n]}
	q.msgs = q.msgs[n:]
	return out, nil
}

func (q *memQueue) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range in.Entries {
		q.deleted[aws.ToString(e.ReceiptHandle)] = true
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (q *memQueue) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return &sqs.SendMessageOutput{}, nil
}

// A backlog is gathered several receives at once into one full batch,
// every message once, and each is deleted after the invocation.
func TestSQSBacklogGatheredInParallel(t *testing.T) {
	q := newMemQueue(1000)
	r := New()
	var mu sync.Mutex
	var batches []int
	seen := map[string]int{}
	_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(func(ev events.SQSEvent) error {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, len(ev.Records))
		for _, m := range ev.Records {
			seen[m.MessageId]++
		}
		return nil
	})})
	if _, err := r.AddSQS(q, SQSMapping{Function: "F", QueueURL: "q", BatchSize: 1000, Window: time.Minute, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 1000
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 1 || batches[0] != 1000 {
		b, _ := json.Marshal(batches)
		t.Errorf("batches %s, want one of 1000", b)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mostAt < 2 || q.mostAt > parallelReceives {
		t.Errorf("at most %d receives at once, want 2 to %d", q.mostAt, parallelReceives)
	}
	if len(q.deleted) != 1000 {
		t.Errorf("%d messages deleted, want 1000", len(q.deleted))
	}
}
