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

// memSQS is an in-memory SQS of several queues, for the operator's logic
// (Depth, Peek, Inspect, Redrive): receiving hides a message until it is
// released, deleted or its hold ends (expire; or at once with
// instantHold), with SQS's batch rules (at most 10 entries, MaxBatchBytes
// per send). Each call can be failed through fail: it gets the method's
// name and its 1-based call number, and returns the entry ids to refuse,
// or the error of the whole call.
type memSQS struct {
	tb          testing.TB
	mu          sync.Mutex
	queues      map[string][]*memMsg
	nextID      int
	calls       map[string]int
	sends       [][]types.SendMessageBatchRequestEntry // every SendMessageBatch call's entries
	instantHold bool
	fail        func(method string, call int) (refuse map[string]bool, err error)
	// empty names the ReceiveMessage calls (1-based) answered with no
	// message whatever the queue holds, as SQS may.
	empty map[int]bool
	now   time.Time
}

type memMsg struct {
	id, body string
	attrs    map[string]types.MessageAttributeValue
	sent     time.Time
	hidden   bool
	handles  map[string]bool // every receipt handle it was received with
	receives int
}

var (
	_ InspectAPI = (*memSQS)(nil)
	_ RedriveAPI = (*memSQS)(nil)
)

func newMemSQS(tb testing.TB, urls ...string) *memSQS {
	m := &memSQS{tb: tb, queues: map[string][]*memMsg{}, calls: map[string]int{}, now: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)}
	for _, u := range urls {
		m.queues[u] = nil
	}
	return m
}

// put adds bodies to a queue, sent a second apart.
func (m *memSQS) put(url string, attrs map[string]types.MessageAttributeValue, bodies ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range bodies {
		m.nextID++
		m.now = m.now.Add(time.Second)
		m.queues[url] = append(m.queues[url], &memMsg{id: fmt.Sprintf("m-%04d", m.nextID), body: b, attrs: attrs, sent: m.now})
	}
}

// expire ends every hold on url.
func (m *memSQS) expire(url string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range m.queues[url] {
		msg.hidden = false
	}
}

// bodies is what url holds, hidden or not.
func (m *memSQS) bodies(url string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, msg := range m.queues[url] {
		out = append(out, msg.body)
	}
	return out
}

// call counts a call and asks fail about it; the caller holds mu.
func (m *memSQS) call(method, url string) (map[string]bool, error) {
	if _, ok := m.queues[url]; !ok {
		m.tb.Errorf("%s on an unknown queue %q", method, url)
	}
	m.calls[method]++
	if m.fail == nil {
		return nil, nil
	}
	return m.fail(method, m.calls[method])
}

func (m *memSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.call("GetQueueAttributes", aws.ToString(in.QueueUrl)); err != nil {
		return nil, err
	}
	visible, hidden := 0, 0
	for _, msg := range m.queues[aws.ToString(in.QueueUrl)] {
		if msg.hidden {
			hidden++
		} else {
			visible++
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages": strconv.Itoa(visible), "ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden),
	}}, nil
}

func (m *memSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	if _, err := m.call("ReceiveMessage", url); err != nil {
		return nil, err
	}
	if in.MaxNumberOfMessages < 1 || in.MaxNumberOfMessages > 10 || in.VisibilityTimeout < 0 || in.VisibilityTimeout > 43200 {
		m.tb.Errorf("ReceiveMessage: %d messages, visibility %d s", in.MaxNumberOfMessages, in.VisibilityTimeout)
	}
	out := &sqs.ReceiveMessageOutput{}
	if m.empty[m.calls["ReceiveMessage"]] {
		return out, nil
	}
	for _, msg := range m.queues[url] {
		if msg.hidden || len(out.Messages) == int(in.MaxNumberOfMessages) {
			continue
		}
		msg.hidden = !m.instantHold
		msg.receives++
		m.nextID++
		handle := fmt.Sprintf("h-%d", m.nextID)
		if msg.handles == nil {
			msg.handles = map[string]bool{}
		}
		msg.handles[handle] = true
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(msg.id), ReceiptHandle: aws.String(handle), Body: aws.String(msg.body),
			MessageAttributes: msg.attrs, Attributes: map[string]string{
				"SentTimestamp": strconv.FormatInt(msg.sent.UnixMilli(), 10), "ApproximateReceiveCount": strconv.Itoa(msg.receives)}})
	}
	return out, nil
}

// byHandle finds a message by a receipt handle it was received with (the
// local server takes any, not only the latest); the caller holds mu.
func (m *memSQS) byHandle(url, handle string) (int, *memMsg) {
	for i, msg := range m.queues[url] {
		if msg.handles[handle] {
			return i, msg
		}
	}
	return -1, nil
}

func (m *memSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	refuse, err := m.call("ChangeMessageVisibilityBatch", url)
	if err != nil {
		return nil, err
	}
	checkEntries(m.tb, len(in.Entries))
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		_, msg := m.byHandle(url, aws.ToString(e.ReceiptHandle))
		if refuse[aws.ToString(e.Id)] || msg == nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("injected")})
			continue
		}
		msg.hidden = e.VisibilityTimeout > 0
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (m *memSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	refuse, err := m.call("DeleteMessageBatch", url)
	if err != nil {
		return nil, err
	}
	checkEntries(m.tb, len(in.Entries))
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		i, msg := m.byHandle(url, aws.ToString(e.ReceiptHandle))
		if refuse[aws.ToString(e.Id)] || msg == nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected")})
			continue
		}
		m.queues[url] = append(m.queues[url][:i], m.queues[url][i+1:]...)
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (m *memSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	m.sends = append(m.sends, in.Entries)
	refuse, err := m.call("SendMessageBatch", url)
	if err != nil {
		return nil, err
	}
	checkEntries(m.tb, len(in.Entries))
	size := 0
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		size += messageSize(aws.ToString(e.MessageBody), e.MessageAttributes)
		if refuse[aws.ToString(e.Id)] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected")})
			continue
		}
		m.nextID++
		m.now = m.now.Add(time.Second)
		id := fmt.Sprintf("m-%04d", m.nextID)
		m.queues[url] = append(m.queues[url], &memMsg{id: id, body: aws.ToString(e.MessageBody), attrs: e.MessageAttributes, sent: m.now})
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id)})
	}
	if size > MaxBatchBytes {
		m.tb.Errorf("SendMessageBatch of %d bytes", size)
	}
	return out, nil
}

func checkEntries(tb testing.TB, n int) {
	tb.Helper()
	if n < 1 || n > MaxBatchEntries {
		tb.Errorf("a batch of %d entries", n)
	}
}
