package votessqs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const (
	dlqURL   = "https://sqs.test/000000000000/votes-dlq"
	votesURL = "https://sqs.test/000000000000/votes"
)

var errInjected = errors.New("injected")

func voteJSON(i int) string {
	return fmt.Sprintf(`{"voteId":"v-%03d","pollId":"p","optionId":"a","voterId":"u-%03d","castAt":"2026-11-20T10:00:00Z"}`, i, i)
}

func votesJSON(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = voteJSON(i)
	}
	return out
}

// failOn fails the call number call of method with err, or refuses the
// entry ids when err is nil.
func failOn(method string, call int, err error, ids ...string) func(string, int) (map[string]bool, error) {
	return func(m string, n int) (map[string]bool, error) {
		if m != method || n != call {
			return nil, nil
		}
		refuse := map[string]bool{}
		for _, id := range ids {
			refuse[id] = true
		}
		return refuse, err
	}
}

func receiveInput(url string, n int32) *sqs.ReceiveMessageInput {
	return &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: n, VisibilityTimeout: 30}
}

func mustDepth(t *testing.T, c DepthAPI, url string) (visible, inFlight int) {
	t.Helper()
	v, f, err := Depth(t.Context(), c, url)
	if err != nil {
		t.Fatalf("Depth: %v", err)
	}
	return v, f
}

func TestDepth(t *testing.T) {
	q := newMemSQS(t, dlqURL)
	q.put(dlqURL, nil, votesJSON(4)...)
	if _, err := q.ReceiveMessage(t.Context(), receiveInput(dlqURL, 3)); err != nil {
		t.Fatal(err)
	}
	if v, f := mustDepth(t, q, dlqURL); v != 1 || f != 3 {
		t.Errorf("depth %d visible, %d in flight; want 1, 3", v, f)
	}
	q.fail = failOn("GetQueueAttributes", 2, errInjected)
	if _, _, err := Depth(t.Context(), q, dlqURL); !errors.Is(err, errInjected) || !strings.HasPrefix(err.Error(), "votessqs: depth of "+dlqURL) {
		t.Errorf("a failed call: %v", err)
	}
}

// A queue that answers without a count has no depth: an error, not 0.
func TestDepthUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]string
	}{
		{"none", map[string]string{}},
		{"not a number", map[string]string{"ApproximateNumberOfMessages": "x", "ApproximateNumberOfMessagesNotVisible": "0"}},
		{"in flight missing", map[string]string{"ApproximateNumberOfMessages": "3"}},
		{"negative", map[string]string{"ApproximateNumberOfMessages": "-1", "ApproximateNumberOfMessagesNotVisible": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSQS{GetQueueAttributesFn: func(_ context.Context, _ *sqs.GetQueueAttributesInput) (*sqs.GetQueueAttributesOutput, error) {
				return &sqs.GetQueueAttributesOutput{Attributes: tc.attrs}, nil
			}}
			if v, fl, err := Depth(t.Context(), f, dlqURL); err == nil || !strings.HasPrefix(err.Error(), "votessqs: ") {
				t.Errorf("got %d, %d, %v; want an error", v, fl, err)
			}
		})
	}
}

// Peek reads without consuming: every message read is visible again when
// it returns, whatever happened; a queue that goes round is read once.
func TestPeek(t *testing.T) {
	for _, tc := range []struct {
		name        string
		max         int
		instantHold bool
		fail        func(string, int) (map[string]bool, error)
		empty       []int // receives answered empty
		wantRead    int
		wantErr     error
	}{
		{name: "all", max: 0, wantRead: 25},
		{name: "empty answers from a queue that holds more", max: 0, empty: []int{1, 3, 4}, wantRead: 25},
		{name: "empty answers until it gives up", max: 0, empty: []int{2, 3, 4, 5}, wantRead: 10},
		{name: "max", max: 12, wantRead: 12},
		{name: "queue goes round", max: 0, instantHold: true, wantRead: 10},
		{name: "receive fails", max: 0, fail: failOn("ReceiveMessage", 2, errInjected), wantRead: 10, wantErr: errInjected},
		{name: "release fails", max: 0, fail: failOn("ChangeMessageVisibilityBatch", 1, errInjected), wantRead: 25, wantErr: errInjected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newMemSQS(t, dlqURL)
			q.put(dlqURL, nil, votesJSON(25)...)
			q.instantHold, q.fail = tc.instantHold, tc.fail
			q.empty = map[int]bool{}
			for _, n := range tc.empty {
				q.empty[n] = true
			}
			msgs, err := Peek(t.Context(), q, dlqURL, tc.max, 30*time.Second)
			if !errors.Is(err, tc.wantErr) || (err != nil && !strings.HasPrefix(err.Error(), "votessqs: ")) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			ids := map[string]bool{}
			for _, m := range msgs {
				ids[aws.ToString(m.MessageId)] = true
			}
			if len(msgs) != tc.wantRead || len(ids) != tc.wantRead {
				t.Errorf("read %d messages, %d distinct; want %d", len(msgs), len(ids), tc.wantRead)
			}
			if tc.wantErr == nil {
				if v, f := mustDepth(t, q, dlqURL); v != 25 || f != 0 {
					t.Errorf("after Peek: %d visible, %d in flight; want 25, 0", v, f)
				}
			}
		})
	}
}

func TestPeekHold(t *testing.T) {
	q := newMemSQS(t, dlqURL)
	for _, hold := range []time.Duration{0, 500 * time.Millisecond, 13 * time.Hour} {
		if _, err := Peek(t.Context(), q, dlqURL, 0, hold); err == nil || !strings.HasPrefix(err.Error(), "votessqs: hold") {
			t.Errorf("hold %s: %v, want refused", hold, err)
		}
	}
	if q.calls["ReceiveMessage"] != 0 {
		t.Errorf("%d receives with a refused hold", q.calls["ReceiveMessage"])
	}
}

func TestPrintable(t *testing.T) {
	for _, in := range []string{"\xff\xfe vote", strings.Repeat("é", 1000), "a\x00b\nc", `{"voteId":"\ud800"}`} {
		got := Printable(in)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > 161 || strings.ContainsAny(got, "\x00\n") {
			t.Errorf("Printable(%.20q) = %.40q", in, got)
		}
	}
	if got, want := Printable("a\x00b"), `a\x00b`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func reasonAttr(r string) map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{ReasonAttribute: {DataType: aws.String("String"), StringValue: aws.String(r)}}
}

// Inspect counts dead letters by whether the counter could count them,
// rejects by their reason (attribute, else body), with the queue's depth,
// the oldest and newest, and at most samples samples.
func TestInspect(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	q := newMemSQS(t, dlqURL, votesURL)
	q.put(dlqURL, nil, voteJSON(1), voteJSON(2), `{"voteId":"v","pollId":"p#","optionId":"a","voterId":"u"}`, "not json")
	s, err := Inspect(t.Context(), q, DeadLetters, dlqURL, 0, 2, 30*time.Second, now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{Countable: 2, "invalid: bad-id": 1, "invalid: malformed-json": 1}
	if s.Read != 4 || s.Approximate != 4 || len(s.Samples) != 2 || fmt.Sprint(s.ByReason) != fmt.Sprint(want) || s.Kind != DeadLetters {
		t.Errorf("dead letters: %+v, want 4 read, 2 samples, %v", s, want)
	}
	if got := s.Newest.Sub(s.Oldest); got != 3*time.Second {
		t.Errorf("oldest %s, newest %s: %s apart, want 3s", s.Oldest, s.Newest, got)
	}
	if s.Samples[0].Reason != Countable || s.Samples[0].Detail != "poll p" || s.Samples[0].Receives != 1 || s.Samples[0].Body != voteJSON(1) {
		t.Errorf("sample %+v", s.Samples[0])
	}

	rejects := "https://sqs.test/000000000000/rejects"
	q.queues[rejects] = nil
	q.put(rejects, reasonAttr("bad-id"), `{"reason":"too-large","detail":"d"}`)
	q.put(rejects, nil, `{"reason":"invalid-utf8","detail":"d2"}`, "garbage")
	s, err = Inspect(t.Context(), q, RejectsKind, rejects, 0, 10, 30*time.Second, now)
	want = map[string]int{"bad-id": 1, "invalid-utf8": 1, "unknown (no reason attribute, body not a reject)": 1}
	if err != nil || s.Read != 3 || fmt.Sprint(s.ByReason) != fmt.Sprint(want) || s.Samples[0].Detail != "d" {
		t.Errorf("rejects: %v %+v, want %v", err, s, want)
	}
	if v, f := mustDepth(t, q, rejects); v != 3 || f != 0 {
		t.Errorf("inspect consumed: %d visible, %d in flight", v, f)
	}

	q.fail = failOn("GetQueueAttributes", q.calls["GetQueueAttributes"]+1, errInjected)
	if s, err := Inspect(t.Context(), q, DeadLetters, dlqURL, 0, 2, 30*time.Second, now); !errors.Is(err, errInjected) || s.Queue != "" {
		t.Errorf("depth unreadable: %v, %+v; want the error and no summary", err, s)
	}
}
