package votessqs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// These tests run against the real local SQS server (fauxqs), started once
// for the package by stacktest.

func TestMain(m *testing.M) { stacktest.Main(m) }

// localSQS returns the local SQS server's URL.
func localSQS(t *testing.T) string {
	t.Helper()
	return stacktest.Need(t).SQS
}

// sqsClient talks to endpoint; maxAttempts 1 turns the SDK's retries off so
// the package's own retries do the work. Its configuration is
// stacktest.Config's, built as the functions and the CLI build theirs
// (awsenv): with the SDK's default HTTP client, a loaded machine's gate
// once saw a ReceiveMessage answer lost and retried, and the ten messages
// it held hidden for their visibility timeout.
func sqsClient(t testing.TB, endpoint string, maxAttempts int) *sqs.Client {
	cfg := stacktest.Config(t, stacktest.Need(t), map[string]string{"AWS_ENDPOINT_URL_SQS": endpoint})
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.RetryMaxAttempts = maxAttempts })
}

// mustQueue creates a queue with a unique name and deletes it after the test.
func mustQueue(t *testing.T, client *sqs.Client, prefix string, maxSize int) string {
	t.Helper()
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{
		QueueName:  aws.String(fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())),
		Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(maxSize)},
	})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return aws.ToString(out.QueueUrl)
}

// receiveAll receives until want messages arrived, then looks once more so
// that extra messages show. Received messages stay invisible meanwhile.
func receiveAll(t *testing.T, client *sqs.Client, queueURL string, want int) []types.Message {
	t.Helper()
	var got []types.Message
	seen := map[string]bool{}
	// Hidden for 15 s, not longer: a receive whose answer was lost (a slow
	// machine) hides its messages, and they must come back within the bound.
	// A message seen again that way is the same message, kept once.
	receive := func(wait int32) int {
		out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: wait,
			VisibilityTimeout: 15, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range out.Messages {
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				got = append(got, m)
			}
		}
		return len(out.Messages)
	}
	for bound := time.Now().Add(time.Minute); len(got) < want && time.Now().Before(bound); {
		receive(1)
	}
	for receive(0) > 0 {
	}
	if len(got) < want {
		// Say what the queue holds, to tell a lost send from a hidden one.
		attrs, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err == nil {
			t.Logf("received %d of %d; the queue says %v", len(got), want, attrs.Attributes)
		} else {
			t.Logf("received %d of %d; GetQueueAttributes: %v", len(got), want, err)
		}
	}
	return got
}

func TestIntegrationProducerSendsVotes(t *testing.T) {
	endpoint := localSQS(t)
	client := sqsClient(t, endpoint, 0)
	queue := mustQueue(t, client, "votessqs-votes", 262144)
	p := NewProducer(client, queue)

	vs := voteList(23)
	for i := range 5 {
		vs[i].VoteID = "" // assigned by the producer
		vs[i].CastAt = time.Time{}
	}
	vs[5].OptionID = "🗳️ yes" // beyond U+FFFF: fauxqs refuses it unescaped
	res, err := p.Send(t.Context(), vs)
	if err != nil || res.Sent != len(vs) {
		t.Fatalf("Send = %+v, %v; want %d sent", res, err, len(vs))
	}
	got := receiveAll(t, client, queue, len(vs))
	if len(got) != len(vs) {
		t.Fatalf("received %d messages, want %d", len(got), len(vs))
	}
	byID := map[string]votes.Vote{}
	for _, m := range got {
		v, err := votes.Parse([]byte(aws.ToString(m.Body)), time.Now())
		if err != nil {
			t.Fatalf("received a vote the counter rejects: %v", err)
		}
		byID[v.VoteID] = v
	}
	for i, id := range res.VoteIDs {
		v, ok := byID[id]
		if !ok {
			t.Errorf("vote %d (%s) not received", i, id)
			continue
		}
		if v.OptionID != vs[i].OptionID || v.VoterID != vs[i].VoterID || v.CastAt.IsZero() {
			t.Errorf("vote %d received as %+v, sent %+v", i, v, vs[i])
		}
	}
}

func TestIntegrationProducerRefusesOversizedVotes(t *testing.T) {
	endpoint := localSQS(t)
	client := sqsClient(t, endpoint, 0)
	queue := mustQueue(t, client, "votessqs-small", 1024)
	big := vote(1) // each id escapes to 256 bytes: over 1 KiB in all
	big.VoterID, big.PollID = strings.Repeat(`\`, 128), strings.Repeat(`"`, 128)
	big.OptionID, big.VoteID = strings.Repeat(`"`, 128), strings.Repeat(`"`, 128)

	// The producer reads the limit and refuses the vote itself.
	res, err := NewProducer(client, queue).Send(t.Context(), []votes.Vote{vote(0), big})
	if !errors.Is(err, ErrTooLarge) || res.Sent != 1 {
		t.Errorf("Send = %d sent, %v; want 1 sent and ErrTooLarge", res.Sent, err)
	}

	// Told a larger limit, it sends it, and SQS refuses it as the sender's
	// fault: an error, not retried.
	var calls int
	counting := &fakeSQS{
		SendMessageBatchFn: func(ctx context.Context, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			calls++
			return client.SendMessageBatch(ctx, in)
		},
	}
	res, err = NewProducer(counting, queue, WithMaxMessageSize(8192)).Send(t.Context(), []votes.Vote{big})
	var ee *EntryError
	if !errors.As(err, &ee) || !ee.SenderFault || res.Sent != 0 || calls != 1 {
		t.Errorf("Send = %d sent in %d calls, %v; want a sender-fault EntryError after 1 call", res.Sent, calls, err)
	}
	if got := receiveAll(t, client, queue, 1); len(got) != 1 {
		t.Errorf("received %d messages, want only the small vote", len(got))
	}
}

func TestIntegrationRejectsRoundTrip(t *testing.T) {
	endpoint := localSQS(t)
	client := sqsClient(t, endpoint, 0)
	queue := mustQueue(t, client, "votessqs-rejects", 262144)
	now := time.Now().UTC().Truncate(time.Millisecond)
	rs := []votes.Rejected{
		{MessageID: "m-json", Body: []byte(`{"voteId":"1","optionId":"a#b"}`), Reason: votes.ReasonBadID, Detail: "optionId contains '#'"},
		{MessageID: "m-binary", Body: []byte("\xff\xfe vote"), Reason: votes.ReasonInvalidUTF8, Detail: "body is not valid UTF-8"},
		{MessageID: "m-large", Body: bytes.Repeat([]byte("ab"), 100<<10), Reason: votes.ReasonTooLarge, Detail: "body is 204800 bytes"},
		{MessageID: "m-emoji", Body: []byte(`{"optionId":"🗳️"}`), Reason: votes.ReasonUnknownOption, Detail: "no option"},
	}
	if err := NewRejects(client, queue, WithClock(fixedClock(now))).Reject(t.Context(), rs); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	got := receiveAll(t, client, queue, len(rs))
	if len(got) != len(rs) {
		t.Fatalf("received %d rejects, want %d", len(got), len(rs))
	}
	byID := map[string]RejectMessage{}
	for _, m := range got {
		r := decodeReject(t, []byte(aws.ToString(m.Body)))
		byID[r.MessageID] = r
		if attr := aws.ToString(m.MessageAttributes[ReasonAttribute].StringValue); attr != string(r.Reason) {
			t.Errorf("%s: attribute %s = %q, want %q", r.MessageID, ReasonAttribute, attr, r.Reason)
		}
	}
	for _, want := range rs {
		r, ok := byID[want.MessageID]
		if !ok {
			t.Errorf("%s not received", want.MessageID)
			continue
		}
		if r.Reason != want.Reason || r.Detail != want.Detail || !r.RejectedAt.Equal(now) {
			t.Errorf("%s received as %+v", want.MessageID, r)
		}
		kept := want.Body
		if len(kept) > MaxRejectBody {
			kept = kept[:MaxRejectBody]
		}
		if !bytes.Equal(r.KeptBody(), kept) || r.BodyTruncated != (len(want.Body) > MaxRejectBody) {
			t.Errorf("%s: kept %d bytes (truncated %t) of %d", want.MessageID, len(r.KeptBody()), r.BodyTruncated, len(want.Body))
		}
	}
	if byID["m-binary"].BodyBase64 == nil || byID["m-json"].Body == "" {
		t.Error("want the binary body in bodyBase64 and the JSON one in body")
	}
}

// Through a proxy that throttles 30% of SendMessageBatch calls, with the
// SDK's own retries off, every vote still arrives exactly once per send.
func TestIntegrationThrottledQueueGetsEveryVoteOnce(t *testing.T) {
	endpoint := localSQS(t)
	proxy, err := faultproxy.New(faultproxy.SQS, endpoint, faultproxy.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	proxyURL, err := proxy.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	onlySends := func(op faultproxy.Operation) bool { return op.Action == "SendMessageBatch" }

	direct := sqsClient(t, endpoint, 0)
	queue := mustQueue(t, direct, "votessqs-throttled", 262144)
	unsure := &unsureSends{SendAPI: sqsClient(t, proxyURL, 1)}
	p := NewProducer(unsure, queue,
		WithMaxAttempts(30), WithBackoff(func(int) time.Duration { return time.Millisecond }))

	proxy.SetFaults(faultproxy.Faults{ThrottleRate: 0.3, Match: onlySends})
	// 300 votes and 30 of them again (same voteId and body), in batches of
	// 10 sent by 4 senders at once.
	vs := voteList(300)
	vs = append(vs, vs[:30]...)
	perOption := map[string]int{}
	for _, v := range vs[:300] {
		perOption[v.OptionID]++
	}
	batches := make(chan []votes.Vote)
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for b := range batches {
				res, err := p.Send(t.Context(), b)
				if err != nil {
					t.Errorf("Send = %+v, %v", res, err)
				}
				sent.Add(int64(res.Sent))
			}
		})
	}
	for i := 0; i < len(vs); i += MaxBatchEntries {
		batches <- vs[i:min(i+MaxBatchEntries, len(vs))]
	}
	close(batches)
	wg.Wait()
	if sent.Load() != 330 {
		t.Fatalf("sent %d messages, want 300 votes and 30 duplicates", sent.Load())
	}
	if st := proxy.Stats().ByAction["SendMessageBatch"]; st.Throttled == 0 {
		t.Errorf("proxy stats %+v: no call was throttled, the test proves nothing", st)
	}
	// A batch whose answer was lost may have been stored: the producer
	// sends it again, and SQS holds both copies (at-least-once). Throttles
	// are answered before anything is stored, so only such batches may
	// add copies.
	got := receivedFrom(t, bodiesOf(receiveAll(t, direct, queue, 330)))
	if extra := got.messages - 330; len(got.distinct) != 300 || extra < 0 || extra > unsure.entries() {
		t.Errorf("received %d messages, %d distinct; want 330 (plus at most %d entries of batches whose answer was lost), 300",
			got.messages, len(got.distinct), unsure.entries())
	}
	if !maps.Equal(perOption, got.perOption) {
		t.Errorf("sent per option %v, queue holds %v", perOption, got.perOption)
	}

	// The next two calls throttled: the same batch goes through on the
	// third. A call whose answer is lost on the way (under a loaded
	// machine) is sent again and may be stored twice: each such call adds
	// one forward and up to 10 copies, and is named.
	before := proxy.Stats().ByAction["SendMessageBatch"]
	unsureBefore := unsure.calls()
	proxy.SetFaults(faultproxy.Faults{FailNext: 2, Match: onlySends})
	sr, err := p.Send(t.Context(), voteList(10))
	if err != nil || sr.Sent != 10 {
		t.Fatalf("Send = %+v, %v; want 10 sent", sr, err)
	}
	after := proxy.Stats().ByAction["SendMessageBatch"]
	lost := unsure.calls()[len(unsureBefore):]
	for _, e := range lost {
		t.Logf("an answer was lost, the batch was sent again: %s", e)
	}
	if after.Throttled-before.Throttled != 2 || after.Forwarded-before.Forwarded != int64(1+len(lost)) {
		t.Errorf("SendMessageBatch throttled %d, forwarded %d; want 2 and %d", after.Throttled-before.Throttled, after.Forwarded-before.Forwarded, 1+len(lost))
	}
	if got := receiveAll(t, direct, queue, 10); len(got) < 10 || len(got) > 10*(1+len(lost)) {
		t.Errorf("received %d messages, want the 10 sent (and at most %d copies)", len(got), 10*len(lost))
	}
}

// unsureSends counts the entries of batches whose outcome the producer
// could not know: the call failed other than by a throttle (a throttle
// stores nothing).
type unsureSends struct {
	SendAPI
	mu   sync.Mutex
	n    int
	errs []string // each unsure call's error
}

func (u *unsureSends) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := u.SendAPI.SendMessageBatch(ctx, in, optFns...)
	var throttled *types.RequestThrottled
	if err != nil && !errors.As(err, &throttled) {
		u.mu.Lock()
		u.n += len(in.Entries)
		u.errs = append(u.errs, err.Error())
		u.mu.Unlock()
	}
	return out, err
}

func (u *unsureSends) calls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.errs)
}

func (u *unsureSends) entries() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n
}

// received sums up what a queue holds.
type received struct {
	messages  int
	distinct  map[string]string // voteId → body
	perOption map[string]int    // distinct votes per option
}

func receivedFrom(t *testing.T, bodies []string) received {
	t.Helper()
	r := received{distinct: map[string]string{}, perOption: map[string]int{}}
	for _, b := range bodies {
		v, err := votes.Parse([]byte(b), time.Now())
		if err != nil {
			t.Fatalf("the producer sent a vote the counter rejects: %v", err)
		}
		r.messages++
		if prev, ok := r.distinct[v.VoteID]; ok {
			if prev != b {
				t.Errorf("duplicate of %s has another body:\n%s\n%s", v.VoteID, prev, b)
			}
			continue
		}
		r.distinct[v.VoteID] = b
		r.perOption[v.OptionID]++
	}
	return r
}

func bodiesOf(ms []types.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = aws.ToString(m.Body)
	}
	return out
}
