package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is what the SQS poller needs; *sqs.Client satisfies it.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// maxPayload is where the runner stops gathering a batch: Lambda's
// synchronous invocation payload limit (6 MB) less room for the event's
// other fields.
const maxPayload = 5 << 20

// SQSMapping is an SQS event source mapping.
type SQSMapping struct {
	ID       string // default: generated
	Function string // logical id, name or ARN
	QueueURL string
	QueueARN string
	// BatchSize is the most messages per invocation (1–10,000; default 10).
	BatchSize int
	// Window is MaximumBatchingWindowInSeconds: how long to gather messages
	// before invoking with fewer than BatchSize (0: invoke at once).
	Window time.Duration
	// ReportBatchItemFailures: the handler returns events.SQSEventResponse
	// and only the messages it names are retried.
	ReportBatchItemFailures bool
	// MaxConcurrency is ScalingConfig.MaximumConcurrency: concurrent
	// invocations (default 2 locally).
	MaxConcurrency int
	// WaitTime is the long-poll wait (default 2 s locally, so shutdown is quick).
	WaitTime time.Duration
}

// AddSQS starts polling a queue for a function (now, or when the runner starts).
func (r *Runner) AddSQS(client SQSAPI, m SQSMapping) (string, error) {
	if _, err := r.Function(m.Function); err != nil {
		return "", err
	}
	if m.QueueURL == "" {
		return "", fmt.Errorf("runner: SQS mapping for %s has no queue URL", m.Function)
	}
	if m.BatchSize <= 0 {
		m.BatchSize = 10
	}
	if m.BatchSize > 10000 {
		return "", fmt.Errorf("runner: SQS BatchSize %d is above 10000", m.BatchSize)
	}
	if m.MaxConcurrency <= 0 {
		m.MaxConcurrency = 2
	}
	if m.WaitTime <= 0 {
		m.WaitTime = 2 * time.Second
	}
	if m.ID == "" {
		m.ID = newID()
	}
	p := &sqsPoller{r: r, c: client, m: m}
	r.add(&source{id: m.ID, kind: "sqs", desc: m.QueueURL + " → " + m.Function, start: p.run})
	return m.ID, nil
}

type sqsPoller struct {
	r *Runner
	c SQSAPI
	m SQSMapping
}

func (p *sqsPoller) run(ctx context.Context) {
	var wg, deletes sync.WaitGroup
	for range p.m.MaxConcurrency {
		wg.Go(func() { p.loop(ctx, &deletes) })
	}
	wg.Wait()
	deletes.Wait()
}

// loop gathers a batch, invokes, and goes on to the next batch while the
// last one's messages are deleted, as Lambda's pollers do.
func (p *sqsPoller) loop(ctx context.Context, deletes *sync.WaitGroup) {
	for ctx.Err() == nil {
		batch, err := p.collect(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.r.log.Warn("sqs receive failed", "queue", p.m.QueueURL, "err", err)
				_ = p.r.clock.Sleep(ctx, time.Second)
			}
			continue
		}
		if len(batch) == 0 {
			continue
		}
		// An invocation that started finishes even when the runner stops,
		// as a Lambda invocation would.
		del := p.deliver(context.WithoutCancel(ctx), batch)
		deletes.Go(func() { p.delete(context.WithoutCancel(ctx), del) })
	}
}

// collect gathers up to BatchSize messages within the batching window.
func (p *sqsPoller) collect(ctx context.Context) ([]sqstypes.Message, error) {
	var batch []sqstypes.Message
	var deadline time.Time
	bytes := 0
	backlog := false
	for len(batch) < p.m.BatchSize {
		wait := p.m.WaitTime
		if len(batch) > 0 {
			if p.m.Window <= 0 {
				break
			}
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			wait = min(wait, left)
		}
		// While receives come back full (a backlog), the rest of the batch
		// is fetched several receives at once, as Lambda's pollers do (its
		// SQS mappings start with five); one at a time near the payload limit.
		calls := 1
		if backlog && bytes < maxPayload/2 {
			calls = min(parallelReceives, (p.m.BatchSize-len(batch)+9)/10)
		}
		out, err := p.receive(ctx, calls, p.m.BatchSize-len(batch), wait)
		if err != nil {
			if len(batch) > 0 && ctx.Err() == nil {
				return batch, nil
			}
			return batch, err
		}
		if len(batch) == 0 && len(out.Messages) > 0 {
			deadline = time.Now().Add(p.m.Window)
		}
		backlog = len(out.Messages) == 10*calls
		batch = append(batch, out.Messages...)
		for _, m := range out.Messages {
			bytes += len(aws.ToString(m.Body))
		}
		if len(out.Messages) == 0 && len(batch) == 0 {
			return nil, nil
		}
		if bytes >= maxPayload {
			break // Lambda also invokes when the batch reaches its 6 MB payload limit
		}
		if len(out.Messages) == 0 && wait < time.Second {
			// A short poll came back empty: pause instead of spinning
			// until the window closes.
			if err := p.r.clock.Sleep(ctx, min(time.Until(deadline), 50*time.Millisecond)); err != nil {
				return batch, nil
			}
		}
	}
	return batch, nil
}

// parallelReceives is the most ReceiveMessage calls a poller makes at once
// while it gathers a batch.
const parallelReceives = 5

// receive makes calls ReceiveMessage calls at once for at most want
// messages in all, and returns what they received. An error is returned
// only when no call received anything.
func (p *sqsPoller) receive(ctx context.Context, calls, want int, wait time.Duration) (*sqs.ReceiveMessageOutput, error) {
	outs := make([]*sqs.ReceiveMessageOutput, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		n := min(10, want-10*i)
		wg.Go(func() {
			outs[i], errs[i] = p.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl:                    aws.String(p.m.QueueURL),
				MaxNumberOfMessages:         int32(n),
				WaitTimeSeconds:             int32(max(wait.Round(time.Second)/time.Second, 0)),
				MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
				MessageAttributeNames:       []string{"All"},
			})
		})
	}
	wg.Wait()
	all := &sqs.ReceiveMessageOutput{}
	var first error
	for i, out := range outs {
		if errs[i] != nil {
			first = cmp.Or(first, errs[i])
			continue
		}
		all.Messages = append(all.Messages, out.Messages...)
	}
	if len(all.Messages) == 0 && first != nil {
		return nil, first
	}
	return all, nil
}

// deliver invokes the function with a batch and returns the entries to
// delete: the messages it did not fail.
func (p *sqsPoller) deliver(ctx context.Context, batch []sqstypes.Message) []sqstypes.DeleteMessageBatchRequestEntry {
	fn := p.m.Function
	event := p.event(batch)
	failed := p.invoke(ctx, event)
	if len(failed) == 0 {
		if dup, _ := p.r.chance(fn, func(f Faults) float64 { return f.DuplicateRate }); dup {
			p.r.count(fn, func(s *Stats) { s.Duplicates++ })
			p.invoke(ctx, event)
		}
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range batch {
		if !failed[aws.ToString(m.MessageId)] {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	return del
}

// delete deletes handled messages, ten at a time.
func (p *sqsPoller) delete(ctx context.Context, del []sqstypes.DeleteMessageBatchRequestEntry) {
	for len(del) > 0 {
		n := min(10, len(del))
		out, err := p.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.m.QueueURL), Entries: del[:n]})
		if err != nil {
			p.r.log.Warn("sqs delete failed; messages will be delivered again", "queue", p.m.QueueURL, "err", err)
		} else if len(out.Failed) > 0 {
			p.r.log.Warn("sqs delete partly failed; those messages will be delivered again", "queue", p.m.QueueURL, "failed", len(out.Failed))
		}
		del = del[n:]
	}
}

// invoke runs the handler and returns the ids of the messages to retry.
func (p *sqsPoller) invoke(ctx context.Context, event events.SQSEvent) map[string]bool {
	fn := p.m.Function
	all := func() map[string]bool {
		f := make(map[string]bool, len(event.Records))
		for _, m := range event.Records {
			f[m.MessageId] = true
		}
		return f
	}
	sent := event
	crash, cut := p.r.crash(fn)
	if crash {
		sent.Records = event.Records[:int(cut*float64(len(event.Records)))]
	}
	payload, err := json.Marshal(sent)
	if err != nil {
		p.r.log.Error("sqs event does not marshal", "err", err)
		return all()
	}
	p.r.count(fn, func(s *Stats) { s.Records += len(sent.Records) })
	out, err := p.r.Invoke(ctx, fn, payload)
	if crash {
		p.r.count(fn, func(s *Stats) { s.Crashes++ })
		return all()
	}
	if err != nil {
		return all()
	}
	if !p.m.ReportBatchItemFailures {
		return nil
	}
	return batchFailures(out, event)
}

// batchFailures reads a partial batch response. As in AWS, a response that
// does not parse, or names a message that is not in the batch or none at
// all, fails the whole batch.
func batchFailures(out []byte, event events.SQSEvent) map[string]bool {
	failed := map[string]bool{}
	if len(out) == 0 || string(out) == "null" {
		return failed
	}
	var resp events.SQSEventResponse
	in := map[string]bool{}
	for _, m := range event.Records {
		in[m.MessageId] = true
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return in
	}
	for _, f := range resp.BatchItemFailures {
		if !in[f.ItemIdentifier] {
			return in
		}
		failed[f.ItemIdentifier] = true
	}
	return failed
}

func (p *sqsPoller) event(batch []sqstypes.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(batch))}
	for _, m := range batch {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             map[string]string{},
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSource:            "aws:sqs",
			EventSourceARN:         p.m.QueueARN,
			AWSRegion:              p.r.region,
		}
		for k, v := range m.Attributes {
			rec.Attributes[k] = v
		}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue,
				StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues,
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}
