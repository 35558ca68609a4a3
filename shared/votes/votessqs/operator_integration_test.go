package votessqs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// sendBodies sends each body to url, one call each.
func sendBodies(t *testing.T, c *sqs.Client, url string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			t.Fatalf("send %.30q: %v", b, err)
		}
	}
}

// Depth, Peek and Inspect on the local SQS server: the depth counts what
// is waiting and what is received, and reading consumes nothing.
func TestIntegrationInspect(t *testing.T) {
	c := sqsClient(t, localSQS(t), 0)
	ctx := t.Context()
	dlq, rejects := mustQueue(t, c, "votessqs-dlq", 262144), mustQueue(t, c, "votessqs-rejects", 262144)
	sendBodies(t, c, dlq, votesJSON(12)...)
	sendBodies(t, c, dlq, `{"voteId":"v","pollId":"p#","optionId":"a","voterId":"u"}`)
	rs := []votes.Rejected{
		{MessageID: "r-1", Body: []byte(`{"optionId":"a#b"}`), Reason: votes.ReasonBadID, Detail: "optionId contains '#'"},
		{MessageID: "r-2", Body: bytes.Repeat([]byte("ab"), 100<<10), Reason: votes.ReasonTooLarge, Detail: "body is 204800 bytes"},
	}
	if err := NewRejects(c, rejects).Reject(ctx, rs); err != nil {
		t.Fatal(err)
	}

	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 3, VisibilityTimeout: 600})
	if err != nil {
		t.Fatal(err)
	}
	if v, f := mustDepth(t, c, dlq); v+f != 13 || f != len(out.Messages) {
		t.Errorf("depth %d visible, %d in flight; want 13 in all, %d in flight", v, f, len(out.Messages))
	}
	var handles []string
	for _, m := range out.Messages {
		handles = append(handles, aws.ToString(m.ReceiptHandle))
	}
	if err := Release(ctx, c, dlq, handles); err != nil {
		t.Fatal(err)
	}
	if v, f := mustDepth(t, c, dlq); v != 13 || f != 0 {
		t.Errorf("after Release: %d visible, %d in flight; want 13, 0", v, f)
	}

	s, err := Inspect(ctx, c, DeadLetters, dlq, 0, 3, 30*time.Second, time.Now())
	if err != nil || s.Read != 13 || s.Approximate != 13 || s.ByReason[Countable] != 12 || s.ByReason["invalid: bad-id"] != 1 || len(s.Samples) != 3 {
		t.Errorf("dead letters: %v %+v", err, s)
	}
	if v, f := mustDepth(t, c, dlq); v != 13 || f != 0 {
		t.Errorf("after Inspect: %d visible, %d in flight; want 13, 0", v, f)
	}
	s, err = Inspect(ctx, c, RejectsKind, rejects, 0, 3, 30*time.Second, time.Now())
	if err != nil || s.Read != 2 || s.ByReason["bad-id"] != 1 || s.ByReason["too-large"] != 1 || s.Oldest.IsZero() {
		t.Errorf("rejects: %v %+v", err, s)
	}
	if msgs, err := Peek(ctx, c, rejects, 1, time.Minute); err != nil || len(msgs) != 1 {
		t.Errorf("Peek max 1: %d messages, %v", len(msgs), err)
	}
	if got := receiveAll(t, c, rejects, 2); len(got) != 2 {
		t.Errorf("rejects queue holds %d after reading, want 2", len(got))
	}
}

// flakySQS fails sends as told, and checks that a message is deleted from
// the dead-letter queue only after its body was sent.
type flakySQS struct {
	*sqs.Client
	t          *testing.T
	dlq        string
	mu         sync.Mutex
	calls      int
	failCall   map[int]bool // SendMessageBatch calls failing whole
	failEntry  map[int]bool // calls whose entry "1" is refused
	bodies     map[string]string
	sentBodies map[string]int
}

func (f *flakySQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := f.Client.ReceiveMessage(ctx, in, opts...)
	if err == nil && aws.ToString(in.QueueUrl) == f.dlq {
		f.mu.Lock()
		for _, m := range out.Messages {
			f.bodies[aws.ToString(m.ReceiptHandle)] = aws.ToString(m.Body)
		}
		f.mu.Unlock()
	}
	return out, err
}

func (f *flakySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.failCall[n] {
		return nil, errors.New("injected: send failed")
	}
	var refused []types.BatchResultErrorEntry
	if f.failEntry[n] && len(in.Entries) > 1 {
		refused = append(refused, types.BatchResultErrorEntry{Id: in.Entries[1].Id, Code: aws.String("InternalError"), Message: aws.String("injected")})
		rest := *in
		rest.Entries = append(append([]types.SendMessageBatchRequestEntry{}, in.Entries[:1]...), in.Entries[2:]...)
		in = &rest
	}
	out, err := f.Client.SendMessageBatch(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	for _, e := range out.Successful {
		for _, req := range in.Entries {
			if aws.ToString(req.Id) == aws.ToString(e.Id) {
				f.sentBodies[aws.ToString(req.MessageBody)]++
			}
		}
	}
	f.mu.Unlock()
	out.Failed = append(out.Failed, refused...)
	return out, nil
}

func (f *flakySQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	for _, e := range in.Entries {
		if body := f.bodies[aws.ToString(e.ReceiptHandle)]; f.sentBodies[body] == 0 {
			f.t.Errorf("deleted a message never sent: %.40q", body)
		}
	}
	f.mu.Unlock()
	return f.Client.DeleteMessageBatch(ctx, in, opts...)
}

// Redrive on the local SQS server moves every dead letter to the votes
// queue exactly once although sends fail (a whole batch, one entry), and
// deletes none before it is sent. Hold 1 s: the failed messages come back
// within the run and are retried there; hold 3 s: the run ends without
// them (an error saying so), and the next run moves them.
func TestIntegrationRedrive(t *testing.T) {
	c := sqsClient(t, localSQS(t), 0)
	for _, hold := range []time.Duration{time.Second, 3 * time.Second} {
		t.Run(fmt.Sprintf("hold %s", hold), func(t *testing.T) {
			dlq, votesQ := mustQueue(t, c, "votessqs-dlq", 262144), mustQueue(t, c, "votessqs-votes", 262144)
			sendBodies(t, c, dlq, votesJSON(25)...)
			f := &flakySQS{Client: c, t: t, dlq: dlq, failCall: map[int]bool{2: true}, failEntry: map[int]bool{3: true},
				bodies: map[string]string{}, sentBodies: map[string]int{}}
			var progress []RedriveResult
			total := RedriveResult{}
			for run := 0; run < 3 && total.Moved < 25; run++ {
				res, err := Redrive(t.Context(), f, dlq, votesQ, RedriveOptions{Hold: hold, Progress: func(r RedriveResult) { progress = append(progress, r) }})
				t.Logf("run %d: %+v (%v)", run+1, res, err)
				if (err != nil) != (res.Failed > 0) || err != nil && !strings.HasPrefix(err.Error(), "votessqs: ") {
					t.Errorf("run %d: error %v with %d not moved", run+1, err, res.Failed)
				}
				if res.Undeleted != 0 {
					t.Errorf("run %d: %d sent but not deleted", run+1, res.Undeleted)
				}
				total.Moved += res.Moved
				total.Retries += res.Retries
				if res.Failed > 0 {
					time.Sleep(hold + 500*time.Millisecond) // the failed ones' hold
				}
			}
			if total.Moved != 25 || total.Retries < 2 || f.calls < 4 {
				t.Errorf("moved %d after %d retries in %d sends, want 25 after the 2 injected failures", total.Moved, total.Retries, f.calls)
			}
			want := map[string]bool{}
			for _, b := range votesJSON(25) {
				want[b] = true
			}
			for body, n := range f.sentBodies {
				if n != 1 || !want[body] {
					t.Errorf("sent %d times: %.40q", n, body)
				}
			}
			if got := receivedFrom(t, bodiesOf(receiveAll(t, c, votesQ, 25))); got.messages != 25 || len(got.distinct) != 25 {
				t.Errorf("votes queue: %d messages, %d distinct; want 25 each once", got.messages, len(got.distinct))
			}
			if v, fl := mustDepth(t, c, dlq); v+fl != 0 {
				t.Errorf("dead-letter queue still holds %d", v+fl)
			}
			if len(progress) == 0 || progress[len(progress)-1].Moved == 0 {
				t.Errorf("progress %+v", progress)
			}
		})
	}
}
