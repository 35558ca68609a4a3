package votessqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DeleteAPI deletes received messages; *sqs.Client satisfies it.
type DeleteAPI interface {
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// RedriveAPI is what Redrive needs from SQS; *sqs.Client satisfies it.
type RedriveAPI interface {
	ReceiveAPI
	BatchSendAPI
	DeleteAPI
}

var _ RedriveAPI = (*sqs.Client)(nil)

// RedriveOptions bound a Redrive.
type RedriveOptions struct {
	// Max is the most messages to move; 0 moves all.
	Max int
	// Hold is how long a message being moved stays hidden on the source
	// queue (1 s to MaxHold; default 30 s). One whose send fails comes
	// back when its hold ends: within the run, if the run lasts that long.
	Hold time.Duration
	// Attempts bounds the sends of one message in a run, and its deletes
	// once sent (default 3).
	Attempts int
	// Progress, when set, is called with the counts after each batch.
	Progress func(RedriveResult)
}

// RedriveResult counts what a Redrive did.
type RedriveResult struct {
	// Moved: sent to the destination, then deleted from the source.
	Moved int `json:"moved"`
	// Failed: not sent (each stays on the source, hidden until its hold
	// ends).
	Failed int `json:"failed"`
	// Undeleted: sent but not deleted; it comes back and, seen again in
	// the run, is deleted without being sent twice (or, in a later run,
	// sent twice: the counter counts it once).
	Undeleted int `json:"undeleted"`
	// Retries: sends and deletes that failed and were tried again (or
	// left for the next run).
	Retries int `json:"retries"`
}

// Redrive moves messages (bodies and message attributes) from one queue to
// another in batches of at most MaxBatchEntries messages and MaxBatchBytes,
// deleting each from the source only after SQS took it on the destination.
// Nothing is lost; a message may be delivered twice (a delete that fails),
// which the counter writes and counts once. It returns an error when a
// message was not moved, or the run stopped early (ctx, a receive that
// failed), with the counts of what it did.
func Redrive(ctx context.Context, c RedriveAPI, from, to string, o RedriveOptions) (RedriveResult, error) {
	r, err := newRedrive(c, from, to, o)
	if err != nil {
		return RedriveResult{}, err
	}
	for r.more() {
		if err := ctx.Err(); err != nil {
			r.stop = fmt.Errorf("votessqs: redrive stopped: %w", err)
			break
		}
		msgs, err := r.receive(ctx)
		if err != nil {
			r.stop = err
			break
		}
		batch, resent := r.sort(msgs)
		if len(batch) == 0 && len(resent) == 0 {
			break // an empty source, or only messages that failed every attempt: leave them
		}
		r.delete(ctx, append(resent, r.send(ctx, batch)...))
		r.tally()
		if r.o.Progress != nil {
			r.o.Progress(r.res)
		}
	}
	return r.result()
}

// redrive is one Redrive's state.
type redrive struct {
	c        RedriveAPI
	from, to string
	o        RedriveOptions
	hold     int32
	res      RedriveResult
	tries    map[string]int  // sends of each message id in this run
	sent     map[string]bool // message ids sent in this run
	deletes  map[string]int  // deletes of each sent message in this run
	deleted  map[string]bool // and deleted from the source
	// stop: what ended the run early; first: the first failure of a
	// message, which a later attempt may have made good.
	stop, first error
}

func newRedrive(c RedriveAPI, from, to string, o RedriveOptions) (*redrive, error) {
	if from == to {
		return nil, fmt.Errorf("votessqs: redrive from %s to itself", from)
	}
	if o.Max < 0 {
		return nil, fmt.Errorf("votessqs: redrive at most %d messages", o.Max)
	}
	if o.Hold == 0 {
		o.Hold = 30 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	hold, err := holdSeconds(o.Hold)
	if err != nil {
		return nil, err
	}
	return &redrive{c: c, from: from, to: to, o: o, hold: hold,
		tries: map[string]int{}, sent: map[string]bool{}, deletes: map[string]int{}, deleted: map[string]bool{}}, nil
}

func (r *redrive) more() bool { return r.o.Max == 0 || r.res.Moved < r.o.Max }

// fail counts a failed call or entry and keeps the first.
func (r *redrive) fail(err error) {
	r.res.Retries++
	if r.first == nil {
		r.first = err
	}
}

func (r *redrive) receive(ctx context.Context) ([]types.Message, error) {
	n := int32(MaxBatchEntries)
	if r.o.Max > 0 {
		n = int32(min(MaxBatchEntries, r.o.Max-r.res.Moved))
	}
	out, err := r.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(r.from), MaxNumberOfMessages: n, VisibilityTimeout: r.hold, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("votessqs: receive from %s: %w", r.from, err)
	}
	return out.Messages, nil
}

// sort splits received messages into those to send and those sent
// already in this run (their delete failed, or SQS delivered a copy): to
// delete, not to send again. Messages out of attempts (to send, or to
// delete) are in neither.
func (r *redrive) sort(msgs []types.Message) (batch, resent []types.Message) {
	for _, m := range msgs {
		id := aws.ToString(m.MessageId)
		switch {
		case r.sent[id]:
			if r.deletes[id] < r.o.Attempts {
				resent = append(resent, m)
			}
		case r.tries[id] < r.o.Attempts:
			r.tries[id]++
			batch = append(batch, m)
		}
	}
	return batch, resent
}

// send sends msgs to the destination and returns those SQS took.
func (r *redrive) send(ctx context.Context, msgs []types.Message) []types.Message {
	sized := make([]message, len(msgs))
	for i, m := range msgs {
		sized[i] = message{body: aws.ToString(m.Body), attrs: m.MessageAttributes, size: messageSize(aws.ToString(m.Body), m.MessageAttributes)}
	}
	var ok []types.Message
	for _, group := range batches(sized, MaxBatchBytes) {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.to)}
		for _, i := range group {
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: msgs[i].Body, MessageAttributes: msgs[i].MessageAttributes})
		}
		out, err := r.c.SendMessageBatch(ctx, in)
		if err != nil {
			r.fail(fmt.Errorf("send to %s: %w", r.to, err))
			continue
		}
		answered := map[int]bool{}
		for _, e := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(e.Id)); err == nil && i >= 0 && i < len(msgs) && !answered[i] {
				answered[i] = true
				ok = append(ok, msgs[i])
				r.sent[aws.ToString(msgs[i].MessageId)] = true
			}
		}
		for _, f := range out.Failed {
			r.fail(fmt.Errorf("send to %s: entry refused: %s %s", r.to, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		if len(out.Successful)+len(out.Failed) < len(group) {
			r.fail(fmt.Errorf("send to %s: SQS answered %d of %d entries", r.to, len(out.Successful)+len(out.Failed), len(group)))
		}
	}
	return ok
}

// delete deletes msgs from the source, all at once (at most
// MaxBatchEntries), even when ctx is done: they are on the destination.
func (r *redrive) delete(ctx context.Context, msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	in := &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.from)}
	for i, m := range msgs {
		r.deletes[aws.ToString(m.MessageId)]++
		in.Entries = append(in.Entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	out, err := r.c.DeleteMessageBatch(context.WithoutCancel(ctx), in)
	if err != nil {
		r.fail(fmt.Errorf("delete from %s: %w", r.from, err))
		return
	}
	for _, e := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(e.Id)); err == nil && i >= 0 && i < len(msgs) {
			r.deleted[aws.ToString(msgs[i].MessageId)] = true
		}
	}
	if len(out.Failed) > 0 {
		r.fail(fmt.Errorf("delete from %s: %s %s", r.from, aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message)))
	}
}

// tally counts the messages moved (sent and deleted), sent but not
// deleted, and tried but never sent.
func (r *redrive) tally() {
	r.res.Moved, r.res.Undeleted, r.res.Failed = 0, 0, 0
	for id := range r.tries {
		switch {
		case r.sent[id] && r.deleted[id]:
			r.res.Moved++
		case r.sent[id]:
			r.res.Undeleted++
		default:
			r.res.Failed++
		}
	}
}

func (r *redrive) result() (RedriveResult, error) {
	r.tally()
	if r.res.Failed > 0 || r.res.Undeleted > 0 {
		return r.res, errors.Join(r.stop, fmt.Errorf("votessqs: %d not moved (still on %s), %d sent but not deleted; first failure: %w",
			r.res.Failed, r.from, r.res.Undeleted, r.first))
	}
	return r.res, r.stop
}
