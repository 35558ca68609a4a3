package votesload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// memSQS is an in-memory queue behind the real Producer: it stores the
// bodies SendMessageBatch takes, checks SQS's batch rules (at most 10
// distinct entries), and fails the entries fail picks.
type memSQS struct {
	tb     testing.TB
	fail   func(e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry
	mu     sync.Mutex
	bodies []string
}

var _ votessqs.SendAPI = (*memSQS)(nil)

func (q *memSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(in.Entries); n == 0 || n > votessqs.MaxBatchEntries {
		q.tb.Errorf("SendMessageBatch with %d entries", n)
		return nil, &types.TooManyEntriesInBatchRequest{}
	}
	ids := map[string]bool{}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if id := aws.ToString(e.Id); ids[id] {
			q.tb.Errorf("SendMessageBatch with entry id %s twice", id)
			return nil, &types.BatchEntryIdsNotDistinct{}
		}
		ids[aws.ToString(e.Id)] = true
		if q.fail != nil {
			if f := q.fail(e); f != nil {
				out.Failed = append(out.Failed, *f)
				continue
			}
		}
		q.bodies = append(q.bodies, aws.ToString(e.MessageBody))
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("m-%d", len(q.bodies)))})
	}
	return out, nil
}

func (q *memSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(256 << 10)}}, nil
}

// Bodies returns the bodies stored, in order.
func (q *memSQS) Bodies() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.bodies...)
}

// newTestProducer returns the real Producer over q, retrying at once.
func newTestProducer(q *memSQS) *votessqs.Producer {
	return votessqs.NewProducer(q, "https://sqs.test/000000000000/votes", votessqs.WithBackoff(func(int) time.Duration { return 0 }))
}

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

// received sums up what a queue holds after a load.
type received struct {
	messages  int
	distinct  map[string]string // voteId → body
	perOption map[string]int    // distinct votes per option
	voters    map[string]bool
}

func receivedFrom(t *testing.T, bodies []string) received {
	t.Helper()
	r := received{distinct: map[string]string{}, perOption: map[string]int{}, voters: map[string]bool{}}
	for _, b := range bodies {
		v, err := votes.Parse([]byte(b), time.Now())
		if err != nil {
			t.Fatalf("a load sent a vote the counter rejects: %v", err)
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
		r.voters[v.VoterID] = true
	}
	return r
}

func TestLoadDuplicates(t *testing.T) {
	tests := []struct {
		name     string
		count    int
		dupRate  float64
		wantDups int
	}{
		{"none", 100, 0, 0},
		{"a tenth", 100, 0.1, 10},
		{"rounded", 10, 0.333, 3},
		{"every vote", 40, 1, 40},
		{"no votes", 0, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &memSQS{tb: t}
			p := newTestProducer(q)
			var calls, lastSent, lastDups, lastTotal int
			o := Options{
				PollID: "p1", Options: []string{"a", "b", "c"}, Count: tt.count, DupRate: tt.dupRate, Seed: 7, NewID: seqIDs("gen"),
				Progress: func(sent, dups, total int) {
					if sent < lastSent || dups < lastDups {
						t.Errorf("progress went back: %d/%d after %d/%d", sent, dups, lastSent, lastDups)
					}
					calls, lastSent, lastDups, lastTotal = calls+1, sent, dups, total
				},
			}
			if got := o.Duplicates(); got != tt.wantDups {
				t.Errorf("Duplicates() = %d, want %d", got, tt.wantDups)
			}
			res, err := Run(t.Context(), p, o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Sent != tt.count || res.Duplicates != tt.wantDups || res.Failed != 0 {
				t.Errorf("result = %+v, want %d sent, %d duplicates", res, tt.count, tt.wantDups)
			}
			got := receivedFrom(t, q.Bodies())
			if got.messages != tt.count+tt.wantDups || len(got.distinct) != tt.count {
				t.Errorf("queue holds %d messages, %d distinct; want %d, %d", got.messages, len(got.distinct), tt.count+tt.wantDups, tt.count)
			}
			if !maps.Equal(nonZero(res.PerOption), got.perOption) {
				t.Errorf("PerOption = %v, queue holds %v", res.PerOption, got.perOption)
			}
			if tt.count > 0 && (lastSent != tt.count+tt.wantDups || lastDups != tt.wantDups || lastTotal != tt.count+tt.wantDups) {
				t.Errorf("last progress (%d, %d, %d), want (%d, %d, %d)", lastSent, lastDups, lastTotal, tt.count+tt.wantDups, tt.wantDups, tt.count+tt.wantDups)
			}
		})
	}
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func TestLoadSpreadsOverOptionsAndVoters(t *testing.T) {
	tests := []struct {
		name   string
		skew   float64
		voters int
		check  func(t *testing.T, per map[string]int, voters int)
	}{
		{"uniform", 0, 0, func(t *testing.T, per map[string]int, voters int) {
			for o, n := range per {
				if n < 200 { // 1,000 of 3,000 expected; 200 is far in the tail
					t.Errorf("option %s got %d of 3000 votes", o, n)
				}
			}
			if voters != 3000 {
				t.Errorf("%d voters, want one per vote", voters)
			}
		}},
		{"skewed", 2, 5, func(t *testing.T, per map[string]int, voters int) {
			if !(per["a"] > per["b"] && per["b"] > per["c"]) {
				t.Errorf("per option %v, want a > b > c", per)
			}
			if voters > 5 {
				t.Errorf("%d voters, want at most 5", voters)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &memSQS{tb: t}
			res, err := Run(t.Context(), newTestProducer(q), Options{PollID: "p1", Options: []string{"a", "b", "c"}, Count: 3000, Skew: tt.skew, Voters: tt.voters, Seed: 1, NewID: seqIDs("gen")})
			if err != nil {
				t.Fatal(err)
			}
			got := receivedFrom(t, q.Bodies())
			if !maps.Equal(res.PerOption, got.perOption) {
				t.Errorf("PerOption = %v, queue holds %v", res.PerOption, got.perOption)
			}
			tt.check(t, got.perOption, len(got.voters))
		})
	}
}

func TestLoadCountsWhatWasNotSent(t *testing.T) {
	q := &memSQS{tb: t, fail: func(e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("AccessDenied"), SenderFault: true}
	}}
	res, err := Run(t.Context(), newTestProducer(q), Options{PollID: "p1", Options: []string{"a"}, Count: 25, DupRate: 0.2})
	var ee *votessqs.EntryError
	if !errors.As(err, &ee) || ee.Code != "AccessDenied" {
		t.Errorf("Run error %v, want the entry error", err)
	}
	// Nothing was sent, so the 5 duplicates had nothing to duplicate.
	if res.Sent != 0 || res.Duplicates != 0 || res.Failed != 30 {
		t.Errorf("result = %+v, want 0 sent and 30 failed", res)
	}
}

func TestLoadStopsWithContext(t *testing.T) {
	q := &memSQS{tb: t}
	ctx, cancel := context.WithCancel(t.Context())
	o := Options{PollID: "p1", Options: []string{"a"}, Count: 1000, Concurrency: 1,
		Progress: func(sent, _, _ int) {
			if sent >= 50 {
				cancel()
			}
		}}
	res, err := Run(ctx, newTestProducer(q), o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error %v, want context.Canceled", err)
	}
	if res.Sent+res.Duplicates+res.Failed != 1000 || res.Sent >= 1000 {
		t.Errorf("result = %+v, want part sent and the rest failed", res)
	}
	if got := len(q.Bodies()); got != res.Sent {
		t.Errorf("queue holds %d, result says %d sent", got, res.Sent)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{PollID: "p1", Options: []string{"a", "b"}, Count: 1}
	tests := []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"empty poll", func(o *Options) { o.PollID = "" }, "poll id"},
		{"hash in poll", func(o *Options) { o.PollID = "a#b" }, "poll id"},
		{"no options", func(o *Options) { o.Options = nil }, "options"},
		{"bad option", func(o *Options) { o.Options = []string{"a", "b#"} }, `option "b#"`},
		{"option twice", func(o *Options) { o.Options = []string{"a", "a"} }, "twice"},
		{"negative count", func(o *Options) { o.Count = -1 }, "count"},
		{"negative rate", func(o *Options) { o.Rate = -1 }, "rate"},
		{"dup rate over 1", func(o *Options) { o.DupRate = 1.5 }, "dup rate"},
		{"negative dup rate", func(o *Options) { o.DupRate = -0.1 }, "dup rate"},
		{"negative voters", func(o *Options) { o.Voters = -1 }, "voters"},
		{"negative skew", func(o *Options) { o.Skew = -1 }, "skew"},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", ok, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			err := o.Validate()
			if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want ErrBadOptions about %q", err, tt.want)
			}
		})
	}
}

func TestTokenBucket(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b := tokenBucket{rate: 10, burst: 2}
	steps := []struct {
		at   time.Duration
		n    float64
		want time.Duration
	}{
		{0, 2, 0},                      // the burst is there at once
		{0, 2, 200 * time.Millisecond}, // 2 more: wait for 2 tokens
		{200 * time.Millisecond, 1, 100 * time.Millisecond}, // the debt is paid; wait for 1
		{time.Hour, 2, 0}, // refilled, never past the burst
		{time.Hour, 1, 100 * time.Millisecond},
	}
	for i, s := range steps {
		if got := b.take(t0.Add(s.at), s.n); got != s.want {
			t.Errorf("step %d: take(%v, %v) = %v, want %v", i, s.at, s.n, got, s.want)
		}
	}
}

func TestResultJSON(t *testing.T) {
	b, err := json.Marshal(Result{PollID: "p", Sent: 3, Duplicates: 1, PerOption: map[string]int{"a": 3}, Elapsed: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"pollId":"p","sent":3,"duplicates":1,"failed":0,"perOption":{"a":3},"elapsedSeconds":1.5}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}
