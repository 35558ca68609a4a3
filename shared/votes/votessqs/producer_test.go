package votessqs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// testNow is the pinned clock of unit tests; votes are cast at testCast,
// before any real clock of a machine running the integration tests.
var (
	testNow  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testCast = time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC)
)

func vote(i int) votes.Vote {
	return votes.Vote{
		VoteID: fmt.Sprintf("v-%d", i), PollID: "p1", OptionID: string(rune('a' + i%3)),
		VoterID: fmt.Sprintf("voter-%d", i), CastAt: testCast,
	}
}

func voteList(n int) []votes.Vote {
	vs := make([]votes.Vote, n)
	for i := range vs {
		vs[i] = vote(i)
	}
	return vs
}

func newTestProducer(q *memQueue, opts ...Option) (*Producer, *noBackoff) {
	b := &noBackoff{}
	base := []Option{WithClock(fixedClock(testNow)), WithIDs(seqIDs("gen")), WithBackoff(b.backoff)}
	return NewProducer(q.api(), q.queueURL, append(base, opts...)...), b
}

func TestSendFillsVoteIDAndCastAt(t *testing.T) {
	q := newMemQueue(t)
	p, _ := newTestProducer(q)
	given := vote(7)
	res, err := p.Send(t.Context(), []votes.Vote{
		{PollID: "p1", OptionID: "a", VoterID: "alice"},
		given,
	})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if want := []string{"gen-1", "v-7"}; !slices.Equal(res.VoteIDs, want) {
		t.Errorf("VoteIDs = %v, want %v", res.VoteIDs, want)
	}
	if res.Sent != 2 || len(res.Failed) != 0 || res.MessageIDs[0] == "" || res.MessageIDs[1] == "" {
		t.Errorf("result = %+v, want 2 sent with message ids", res)
	}
	want := []string{
		`{"voteId":"gen-1","pollId":"p1","optionId":"a","voterId":"alice","castAt":"2026-03-01T12:00:00Z"}`,
		`{"voteId":"v-7","pollId":"p1","optionId":"b","voterId":"voter-7","castAt":"2025-12-31T23:00:00Z"}`,
	}
	if got := q.Bodies(); !slices.Equal(got, want) {
		t.Errorf("bodies =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNewVoteID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewVoteID()
		if !uuid.MatchString(id) {
			t.Fatalf("NewVoteID() = %q, want a UUIDv4", id)
		}
		if err := votes.ValidID(id); err != nil {
			t.Fatalf("NewVoteID() = %q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("NewVoteID() returned %q twice", id)
		}
		seen[id] = true
	}
}

func TestSendBatches(t *testing.T) {
	body, err := EncodeVote(vote(0))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		n        int
		opts     []Option
		wantSize []int
	}{
		{"one", 1, nil, []int{1}},
		{"ten", 10, nil, []int{10}},
		{"by ten", 25, nil, []int{10, 10, 5}},
		// Room for three votes (the ids v-0..v-9 are all as long as v-0).
		{"by bytes", 7, []Option{WithMaxBatchBytes(3*len(body) + 2)}, []int{3, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newMemQueue(t)
			p, _ := newTestProducer(q, tt.opts...)
			res, err := p.Send(t.Context(), voteList(tt.n))
			if err != nil || res.Sent != tt.n {
				t.Fatalf("Send = %+v, %v; want %d sent", res, err, tt.n)
			}
			if got := q.CallSizes(); !slices.Equal(got, tt.wantSize) {
				t.Errorf("batch sizes = %v, want %v", got, tt.wantSize)
			}
			if got := len(q.Bodies()); got != tt.n {
				t.Errorf("%d messages stored, want %d", got, tt.n)
			}
		})
	}
}

func TestSendRetriesOnlyFailedEntries(t *testing.T) {
	q := newMemQueue(t)
	q.fail = func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		if call == 1 && (aws.ToString(e.Id) == "1" || aws.ToString(e.Id) == "3") {
			return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false}
		}
		return nil
	}
	p, b := newTestProducer(q)
	res, err := p.Send(t.Context(), voteList(5))
	if err != nil || res.Sent != 5 {
		t.Fatalf("Send = %+v, %v; want 5 sent", res, err)
	}
	if got := q.CallSizes(); !slices.Equal(got, []int{5, 2}) {
		t.Fatalf("batch sizes = %v, want [5 2]", got)
	}
	var retried []string
	for _, e := range q.Call(1) {
		retried = append(retried, aws.ToString(e.Id))
	}
	if !slices.Equal(retried, []string{"1", "3"}) {
		t.Errorf("retried entries %v, want [1 3]", retried)
	}
	if got := b.Attempts(); !slices.Equal(got, []int{1}) {
		t.Errorf("backoff asked for attempts %v, want [1]", got)
	}
	if got := len(q.Bodies()); got != 5 {
		t.Errorf("%d messages stored, want each of the 5 once", got)
	}
}

func TestSendDoesNotRetrySenderFaults(t *testing.T) {
	q := newMemQueue(t)
	q.fail = func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		if aws.ToString(e.Id) == "2" {
			return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidMessageContents"), Message: aws.String("no"), SenderFault: true}
		}
		return nil
	}
	p, _ := newTestProducer(q)
	res, err := p.Send(t.Context(), voteList(4))
	if err == nil {
		t.Fatal("Send: no error, want one for the refused entry")
	}
	if got := q.CallSizes(); !slices.Equal(got, []int{4}) {
		t.Errorf("batch sizes = %v, want one call [4]", got)
	}
	if res.Sent != 3 || len(res.Failed) != 1 || res.Failed[0].Index != 2 || res.Failed[0].VoteID != "v-2" {
		t.Fatalf("result = %+v, want 3 sent and vote 2 failed", res)
	}
	var ee *EntryError
	if !errors.As(err, &ee) || !ee.SenderFault || ee.Code != "InvalidMessageContents" {
		t.Errorf("error %v, want an *EntryError with sender fault", err)
	}
	if res.MessageIDs[2] != "" {
		t.Errorf("MessageIDs[2] = %q for a vote not sent", res.MessageIDs[2])
	}
}

func TestSendRetriesThrottledCalls(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantCalls int
		wantSent  int
	}{
		{"throttled", &types.RequestThrottled{Message: aws.String("slow down")}, 3, 4},
		{"not retryable", &types.QueueDoesNotExist{Message: aws.String("gone")}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newMemQueue(t)
			q.callErr = func(call int) error {
				if call <= 2 {
					return tt.err
				}
				return nil
			}
			p, _ := newTestProducer(q)
			res, err := p.Send(t.Context(), voteList(4))
			if res.Sent != tt.wantSent || len(q.CallSizes()) != tt.wantCalls {
				t.Errorf("sent %d in %d calls, want %d in %d", res.Sent, len(q.CallSizes()), tt.wantSent, tt.wantCalls)
			}
			if tt.wantSent == 4 && err != nil {
				t.Errorf("Send: %v", err)
			}
			if tt.wantSent == 0 && !errors.As(err, new(*types.QueueDoesNotExist)) {
				t.Errorf("Send error %v, want QueueDoesNotExist", err)
			}
		})
	}
}

func TestSendGivesUpAfterMaxAttempts(t *testing.T) {
	q := newMemQueue(t)
	q.fail = func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		if aws.ToString(e.Id) == "0" {
			return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ServiceUnavailable"), SenderFault: false}
		}
		return nil
	}
	p, b := newTestProducer(q, WithMaxAttempts(4))
	res, err := p.Send(t.Context(), voteList(3))
	if !errors.Is(err, ErrAttemptsExhausted) {
		t.Fatalf("Send error %v, want ErrAttemptsExhausted", err)
	}
	if res.Sent != 2 || len(res.Failed) != 1 || res.Failed[0].Index != 0 {
		t.Errorf("result = %+v, want 2 sent, vote 0 failed", res)
	}
	if got := q.CallSizes(); !slices.Equal(got, []int{3, 1, 1, 1}) {
		t.Errorf("batch sizes = %v, want [3 1 1 1]", got)
	}
	if got := b.Attempts(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("backoff asked for attempts %v, want [1 2 3]", got)
	}
}

func TestSendStopsRetryingWhenContextEnds(t *testing.T) {
	q := newMemQueue(t)
	q.fail = func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")}
	}
	ctx, cancel := context.WithCancel(t.Context())
	p := NewProducer(q.api(), q.queueURL, WithBackoff(func(int) time.Duration { cancel(); return time.Hour }))
	_, err := p.Send(ctx, voteList(2))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Send error %v, want context.Canceled", err)
	}
}

func TestSendRefusesOversizedVotes(t *testing.T) {
	q := newMemQueue(t)
	q.maxSize = 1024
	p, _ := newTestProducer(q)
	big := vote(1)
	// '"' is escaped as \" in JSON: each 128-byte id takes 256 bytes.
	big.OptionID, big.VoterID, big.PollID = strings.Repeat(`"`, 128), strings.Repeat(`\`, 128), strings.Repeat(`"`, 128)
	big.VoteID = strings.Repeat(`"`, 128)
	res, err := p.Send(t.Context(), []votes.Vote{vote(0), big, vote(2)})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Send error %v, want ErrTooLarge", err)
	}
	if res.Sent != 2 || len(res.Failed) != 1 || res.Failed[0].Index != 1 {
		t.Errorf("result = %+v, want votes 0 and 2 sent, 1 refused", res)
	}
	for _, b := range q.Bodies() {
		if strings.Contains(b, `\"`) {
			t.Errorf("the oversized vote was sent: %.60s…", b)
		}
	}
	// The size is read once, however many sends follow.
	if _, err := p.Send(t.Context(), voteList(3)); err != nil {
		t.Fatal(err)
	}
	if q.attrCalls != 1 {
		t.Errorf("GetQueueAttributes called %d times, want 1", q.attrCalls)
	}
}

func TestSendWithMaxMessageSizeSkipsGetQueueAttributes(t *testing.T) {
	q := newMemQueue(t)
	p, _ := newTestProducer(q, WithMaxMessageSize(200))
	big := vote(1)
	big.VoterID = strings.Repeat("x", 128)
	_, err := p.Send(t.Context(), []votes.Vote{big})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Send error %v, want ErrTooLarge against the given 200 bytes", err)
	}
	if q.attrCalls != 0 {
		t.Errorf("GetQueueAttributes called %d times, want 0", q.attrCalls)
	}
}

func TestSendReportsUnreadableQueue(t *testing.T) {
	q := newMemQueue(t)
	p := NewProducer(q.api(), "https://sqs.test/000000000000/nope")
	res, err := p.Send(t.Context(), voteList(1))
	if !errors.As(err, new(*types.QueueDoesNotExist)) || !strings.Contains(err.Error(), "MaximumMessageSize") {
		t.Errorf("Send error %v, want QueueDoesNotExist reading MaximumMessageSize", err)
	}
	if res.Sent != 0 || len(q.CallSizes()) != 0 {
		t.Errorf("sent %d in %d calls, want nothing", res.Sent, len(q.CallSizes()))
	}
}

// A lost or throttled read of the queue's attributes is retried like a
// send; a queue that does not exist is not.
func TestSendRetriesTheAttributesRead(t *testing.T) {
	q := newMemQueue(t)
	api := q.api()
	read, failures := api.GetQueueAttributesFn, 0
	api.GetQueueAttributesFn = func(ctx context.Context, in *sqs.GetQueueAttributesInput) (*sqs.GetQueueAttributesOutput, error) {
		if failures < 2 {
			failures++
			return nil, &types.RequestThrottled{Message: aws.String("slow down")}
		}
		return read(ctx, in)
	}
	p := NewProducer(api, q.queueURL, WithBackoff(func(int) time.Duration { return 0 }))
	if res, err := p.Send(t.Context(), voteList(3)); err != nil || res.Sent != 3 {
		t.Fatalf("Send = %+v, %v; want 3 sent after two throttled reads", res, err)
	}
	if q.attrCalls != 1 || failures != 2 {
		t.Errorf("attribute reads: %d failed, %d answered; want 2 and 1", failures, q.attrCalls)
	}
	q = newMemQueue(t)
	p = NewProducer(q.api(), "https://sqs.test/000000000000/nope", WithBackoff(func(int) time.Duration { return 0 }))
	if _, err := p.Send(t.Context(), voteList(1)); err == nil || q.attrCalls != 1 {
		t.Errorf("missing queue: err %v after %d reads, want an error after 1", err, q.attrCalls)
	}
}

func TestSendRefusesInvalidVotes(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(v *votes.Vote)
		reason votes.Reason
	}{
		{"hash in option", func(v *votes.Vote) { v.OptionID = "a#b" }, votes.ReasonBadID},
		{"control character in voter", func(v *votes.Vote) { v.VoterID = "bob\n" }, votes.ReasonBadID},
		{"DEL in poll", func(v *votes.Vote) { v.PollID = "p\x7f" }, votes.ReasonBadID},
		{"empty poll", func(v *votes.Vote) { v.PollID = "" }, votes.ReasonEmptyID},
		{"empty option", func(v *votes.Vote) { v.OptionID = "" }, votes.ReasonEmptyID},
		{"129-byte voter", func(v *votes.Vote) { v.VoterID = strings.Repeat("x", 129) }, votes.ReasonIDTooLong},
		{"129-byte vote id", func(v *votes.Vote) { v.VoteID = strings.Repeat("é", 64) + "x" }, votes.ReasonIDTooLong},
		{"invalid UTF-8", func(v *votes.Vote) { v.OptionID = "a\xff" }, votes.ReasonInvalidUTF8},
		{"cast two hours ahead", func(v *votes.Vote) { v.CastAt = testNow.Add(2 * time.Hour) }, votes.ReasonFutureCastAt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newMemQueue(t)
			p, _ := newTestProducer(q)
			bad := vote(1)
			tt.edit(&bad)
			res, err := p.Send(t.Context(), []votes.Vote{vote(0), bad})
			if !errors.Is(err, votes.ErrRejected) || votes.ReasonOf(err) != tt.reason {
				t.Fatalf("Send error %v, want a rejection (%s)", err, tt.reason)
			}
			if res.Sent != 1 || len(res.Failed) != 1 || res.Failed[0].Index != 1 {
				t.Errorf("result = %+v, want vote 0 sent, vote 1 refused", res)
			}
			if got := len(q.Bodies()); got != 1 {
				t.Errorf("%d messages stored, want 1", got)
			}
		})
	}
}

func TestSendEscapesCharactersSQSRefuses(t *testing.T) {
	q := newMemQueue(t)
	p, _ := newTestProducer(q)
	v := vote(0)
	v.OptionID = "🗳️ <yes> & \ufffe"
	if _, err := p.Send(t.Context(), []votes.Vote{v}); err != nil {
		t.Fatal(err)
	}
	body := q.Bodies()[0]
	if want := `"optionId":"\ud83d\uddf3️ <yes> & \ufffe"`; !strings.Contains(body, want) {
		t.Errorf("body %s, want it to contain %s", body, want)
	}
	got, err := votes.Parse([]byte(body), testNow)
	if err != nil || got.OptionID != v.OptionID {
		t.Errorf("Parse(body) = %q, %v; want the option %q back", got.OptionID, err, v.OptionID)
	}
}

func TestSendConcurrently(t *testing.T) {
	q := newMemQueue(t)
	p, _ := newTestProducer(q)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			vs := voteList(15)
			for i := range vs {
				vs[i].VoteID = "" // generated, concurrently
				vs[i].VoterID = fmt.Sprintf("g%d-%d", g, i)
			}
			if res, err := p.Send(context.Background(), vs); err != nil || res.Sent != 15 {
				t.Errorf("Send = %d, %v", res.Sent, err)
			}
		})
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, b := range q.Bodies() {
		v, err := votes.Parse([]byte(b), testNow)
		if err != nil {
			t.Fatal(err)
		}
		ids[v.VoteID] = true
	}
	if len(ids) != 8*15 {
		t.Errorf("%d distinct voteIds, want %d", len(ids), 8*15)
	}
	if q.attrCalls != 1 {
		t.Errorf("GetQueueAttributes called %d times, want 1", q.attrCalls)
	}
}
