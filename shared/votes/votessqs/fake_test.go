package votessqs

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeSQS is a SendAPI made of function fields.
type fakeSQS struct {
	SendMessageBatchFn   func(ctx context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
	GetQueueAttributesFn func(ctx context.Context, in *sqs.GetQueueAttributesInput) (*sqs.GetQueueAttributesOutput, error)
}

var _ SendAPI = (*fakeSQS)(nil)

func (f *fakeSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return f.SendMessageBatchFn(ctx, in)
}

func (f *fakeSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return f.GetQueueAttributesFn(ctx, in)
}

// memQueue is an in-memory queue behind a fakeSQS, with SQS's batch rules:
// at most 10 entries with distinct ids, at most MaxBatchBytes in all, each
// message at most maxSize (else a sender-fault entry failure). fail, when
// set, may fail an entry of call n (1-based) before it is stored; callErr
// may fail the whole call.
type memQueue struct {
	mu        sync.Mutex
	maxSize   int
	attrCalls int
	calls     [][]types.SendMessageBatchRequestEntry
	messages  []types.SendMessageBatchRequestEntry
	nextID    int
	fail      func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry
	callErr   func(call int) error
	tb        testing.TB
	queueURL  string
}

func newMemQueue(tb testing.TB) *memQueue {
	return &memQueue{tb: tb, maxSize: 256 << 10, queueURL: "https://sqs.test/000000000000/votes"}
}

func (q *memQueue) api() *fakeSQS {
	return &fakeSQS{
		GetQueueAttributesFn: func(_ context.Context, in *sqs.GetQueueAttributesInput) (*sqs.GetQueueAttributesOutput, error) {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.attrCalls++
			if got := aws.ToString(in.QueueUrl); got != q.queueURL {
				return nil, &types.QueueDoesNotExist{Message: aws.String(got)}
			}
			return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(q.maxSize)}}, nil
		},
		SendMessageBatchFn: q.sendMessageBatch,
	}
}

func (q *memQueue) sendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, in.Entries)
	call := len(q.calls)
	if got := aws.ToString(in.QueueUrl); got != q.queueURL {
		return nil, &types.QueueDoesNotExist{Message: aws.String(got)}
	}
	if q.callErr != nil {
		if err := q.callErr(call); err != nil {
			return nil, err
		}
	}
	if len(in.Entries) == 0 || len(in.Entries) > MaxBatchEntries {
		q.tb.Errorf("SendMessageBatch with %d entries", len(in.Entries))
		return nil, &types.TooManyEntriesInBatchRequest{}
	}
	ids, total := map[string]bool{}, 0
	for _, e := range in.Entries {
		if ids[aws.ToString(e.Id)] {
			q.tb.Errorf("SendMessageBatch with entry id %s twice", aws.ToString(e.Id))
			return nil, &types.BatchEntryIdsNotDistinct{}
		}
		ids[aws.ToString(e.Id)] = true
		total += messageSize(aws.ToString(e.MessageBody), e.MessageAttributes)
	}
	if total > MaxBatchBytes {
		q.tb.Errorf("SendMessageBatch of %d bytes", total)
		return nil, &types.BatchRequestTooLong{}
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if f := q.failure(call, e); f != nil {
			out.Failed = append(out.Failed, *f)
			continue
		}
		q.nextID++
		q.messages = append(q.messages, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("m-%d", q.nextID))})
	}
	return out, nil
}

func (q *memQueue) failure(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
	if size := messageSize(aws.ToString(e.MessageBody), e.MessageAttributes); size > q.maxSize {
		return &types.BatchResultErrorEntry{Id: e.Id, SenderFault: true, Code: aws.String("InvalidParameterValue"),
			Message: aws.String(fmt.Sprintf("Message must be shorter than %d bytes.", q.maxSize))}
	}
	if q.fail != nil {
		return q.fail(call, e)
	}
	return nil
}

// Bodies returns the bodies stored, in order.
func (q *memQueue) Bodies() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, len(q.messages))
	for i, m := range q.messages {
		out[i] = aws.ToString(m.MessageBody)
	}
	return out
}

// CallSizes returns the number of entries of each call.
func (q *memQueue) CallSizes() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]int, len(q.calls))
	for i, c := range q.calls {
		out[i] = len(c)
	}
	return out
}

func (q *memQueue) Call(n int) []types.SendMessageBatchRequestEntry {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls[n]
}

// fixedClock is a clock pinned to one time.
func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// seqIDs returns an id generator yielding prefix-1, prefix-2, ...
func seqIDs(prefix string) func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

// noBackoff retries at once and records the attempts it was asked about.
type noBackoff struct {
	mu       sync.Mutex
	attempts []int
}

func (b *noBackoff) backoff(attempt int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts = append(b.attempts, attempt)
	return 0
}

func (b *noBackoff) Attempts() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.attempts...)
}
