package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
)

// keyedRecords are n records of one shard whose items cycle over keys
// item keys (pk and sk), sequence numbers rising from 1.
func keyedRecords(n, keys int) []streamtypes.Record {
	now := time.Now()
	out := make([]streamtypes.Record, n)
	for i := range out {
		rec := record(fmt.Sprintf("%06d", i+1), now)
		rec.Dynamodb.Keys = map[string]streamtypes.AttributeValue{
			"pk": &streamtypes.AttributeValueMemberS{Value: fmt.Sprintf("k%d", i%keys)},
			"sk": &streamtypes.AttributeValueMemberS{Value: "v0"},
		}
		out[i] = rec
	}
	return out
}

func openShard(recs []streamtypes.Record) *fakeStream {
	return &fakeStream{
		shards:  []streamtypes.Shard{{ShardId: aws.String("s"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("000001")}}},
		records: map[string][]streamtypes.Record{"s": recs},
	}
}

// itemWatch is a stream handler that checks what ParallelizationFactor
// promises: an item's records arrive in order and never in two batches at
// once. Each invocation waits a little for another to run beside it, so
// that batches overlap whenever the runner lets them.
type itemWatch struct {
	mu          sync.Mutex
	inFlight    map[string]bool   // item keys in a running invocation
	last        map[string]string // item key → the last sequence number seen
	running     int
	maxRunning  int
	delivered   map[string]int // sequence number → times delivered
	outOfOrder  []string
	concurrent  []string
	failOn      string // a sequence number whose batch fails
	invocations int
}

func newItemWatch() *itemWatch {
	return &itemWatch{inFlight: map[string]bool{}, last: map[string]string{}, delivered: map[string]int{}}
}

func itemKey(r events.DynamoDBEventRecord) string {
	return r.Change.Keys["pk"].String() + "/" + r.Change.Keys["sk"].String()
}

func (w *itemWatch) handle(ctx context.Context, ev events.DynamoDBEvent) error {
	w.mu.Lock()
	w.invocations++
	w.running++
	w.maxRunning = max(w.maxRunning, w.running)
	keys := map[string]bool{}
	for _, r := range ev.Records {
		keys[itemKey(r)] = true
	}
	for k := range keys {
		if w.inFlight[k] {
			w.concurrent = append(w.concurrent, k)
		}
		w.inFlight[k] = true
	}
	w.mu.Unlock()
	waitUntil(20*time.Millisecond, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.running > 1
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() {
		w.running--
		for k := range keys {
			delete(w.inFlight, k)
		}
	}()
	for _, r := range ev.Records {
		if r.Change.SequenceNumber == w.failOn {
			return errors.New("poison record")
		}
	}
	for _, r := range ev.Records {
		k, seq := itemKey(r), r.Change.SequenceNumber
		if last, ok := w.last[k]; ok && seq <= last {
			w.outOfOrder = append(w.outOfOrder, fmt.Sprintf("%s: %s after %s", k, seq, last))
		}
		w.last[k] = seq
		w.delivered[seq]++
	}
	return nil
}

func (w *itemWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.delivered)
}

// With ParallelizationFactor N, up to N batches of one shard run at once,
// and an item's records still reach the function in order, each once,
// never in two batches at once.
func TestStreamParallelKeepsEachItemInOrder(t *testing.T) {
	for _, tc := range []struct {
		factor int
		keys   int
	}{
		{1, 7}, {2, 7}, {4, 7}, {10, 50}, {3, 1},
	} {
		t.Run(fmt.Sprintf("factor %d, %d keys", tc.factor, tc.keys), func(t *testing.T) {
			const n = 600
			w := newItemWatch()
			r := New()
			_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(w.handle)})
			if _, err := r.AddStream(openShard(keyedRecords(n, tc.keys)), &fakeQueue{}, StreamMapping{Function: "F", StreamARN: "arn:s",
				BatchSize: 10, Parallelization: tc.factor, PollInterval: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			stop, err := r.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(time.Minute, func() bool { return w.count() >= n })
			stop()
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.delivered) != n {
				t.Errorf("%d records delivered, want %d", len(w.delivered), n)
			}
			for seq, times := range w.delivered {
				if times != 1 {
					t.Errorf("record %s delivered %d times, want once", seq, times)
				}
			}
			if len(w.outOfOrder) > 0 {
				t.Errorf("records out of their item's order: %v", w.outOfOrder)
			}
			if len(w.concurrent) > 0 {
				t.Errorf("items in two batches at once: %v", w.concurrent)
			}
			wantMax := min(tc.factor, tc.keys)
			if wantMax == 1 && w.maxRunning != 1 || wantMax > 1 && w.maxRunning < 2 || w.maxRunning > wantMax {
				t.Errorf("at most %d invocations at once, want %d (at least 2 when more than 1)", w.maxRunning, wantMax)
			}
		})
	}
}

// A failing batch is bisected and retried in its own lane: its poison
// record alone goes to the on-failure destination, every other record is
// delivered, and the other lanes keep going meanwhile.
func TestStreamParallelFailureStaysInItsLane(t *testing.T) {
	const n = 200
	recs := keyedRecords(n, 9)
	w := newItemWatch()
	w.failOn = aws.ToString(recs[57].Dynamodb.SequenceNumber)
	q := &fakeQueue{}
	r := New()
	_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(w.handle)})
	if _, err := r.AddStream(openShard(recs), q, StreamMapping{Function: "F", StreamARN: "arn:s", BatchSize: 16, Parallelization: 3,
		Bisect: true, MaxRetryAttempts: 1, OnFailureQueueURL: "http://q", PollInterval: time.Millisecond, RetryBackoff: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(time.Minute, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return w.count() >= n-1 && len(q.sent) > 0
	})
	stop()
	if got := w.count(); got != n-1 {
		t.Errorf("%d records delivered, want %d (all but the poison)", got, n-1)
	}
	if len(w.outOfOrder) > 0 || len(w.concurrent) > 0 {
		t.Errorf("out of order %v, in two batches at once %v", w.outOfOrder, w.concurrent)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sent) != 1 {
		t.Fatalf("on-failure messages %d, want 1: %v", len(q.sent), q.sent)
	}
	var info struct {
		RequestContext struct{ Condition string } `json:"requestContext"`
		Batch          struct {
			StartSequenceNumber string
			BatchSize           int
		} `json:"DDBStreamBatchInfo"`
	}
	_ = json.Unmarshal([]byte(q.sent[0]), &info)
	if info.RequestContext.Condition != "RetryAttemptsExhausted" || info.Batch.StartSequenceNumber != w.failOn || info.Batch.BatchSize != 1 {
		t.Errorf("on-failure message %s, want RetryAttemptsExhausted for %s alone", q.sent[0], w.failOn)
	}
}

// A parent shard is read to its end only when its lanes delivered their
// last batch: its child's records come after all of the parent's, however
// slow the parent's last batches are.
func TestStreamParallelChildAfterParentsLanes(t *testing.T) {
	fs := parentAndChild()
	var mu sync.Mutex
	var got []string
	childSeen := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, "400") || slices.Contains(got, "500")
	}
	r := New()
	_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
		if ev.Records[0].Change.SequenceNumber == "300" {
			// Slower than the runner's shard listing (1 s): a child
			// started when the parent's reader ended would overtake it.
			waitUntil(2500*time.Millisecond, childSeen)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rec := range ev.Records {
			got = append(got, rec.Change.SequenceNumber)
		}
		return nil
	})})
	if _, err := r.AddStream(fs, &fakeQueue{}, StreamMapping{Function: "F", StreamARN: "arn:s", BatchSize: 10, Parallelization: 4, PollInterval: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 5
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 {
		t.Fatalf("records %v, want 5", got)
	}
	parent, child := slices.Sorted(slices.Values(got[:3])), slices.Sorted(slices.Values(got[3:]))
	if fmt.Sprint(parent, child) != "[100 200 300] [400 500]" {
		t.Errorf("records in the order %v, want the parent's three before the child's two", got)
	}
}

func TestStreamParallelizationFactorChecked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       StreamMapping
		wantErr string
	}{
		{"unset is 1", StreamMapping{}, ""},
		{"10", StreamMapping{Parallelization: 10}, ""},
		{"11", StreamMapping{Parallelization: 11}, "outside 1–10"},
		{"negative", StreamMapping{Parallelization: -1}, "outside 1–10"},
		{"with a tumbling window", StreamMapping{Parallelization: 2, TumblingWindow: time.Minute}, "not emulated locally"},
		{"1 with a tumbling window", StreamMapping{Parallelization: 1, TumblingWindow: time.Minute}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(context.Context, events.DynamoDBEvent) error { return nil })})
			tc.m.Function, tc.m.StreamARN = "F", "arn:s"
			_, err := r.AddStream(&fakeStream{}, &fakeQueue{}, tc.m)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("AddStream: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// CreateEventSourceMapping takes ParallelizationFactor for a stream,
// answers 1 when it was not given, and refuses one outside 1–10.
func TestLambdaAPIParallelizationFactor(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		wantStatus  int
		wantInBody  string
	}{
		{"given", `,"ParallelizationFactor":3`, http.StatusAccepted, `"ParallelizationFactor":3`},
		{"not given", ``, http.StatusAccepted, `"ParallelizationFactor":1`},
		{"too high", `,"ParallelizationFactor":11`, http.StatusBadRequest, "outside 1–10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(context.Context, events.DynamoDBEvent) error { return nil })})
			r.SetWiring(Wiring{Streams: &fakeStream{}})
			srv := httptest.NewServer(r.LambdaAPI())
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/2015-03-31/event-source-mappings/", "application/json",
				strings.NewReader(`{"FunctionName":"F","EventSourceArn":"arn:aws:dynamodb:us-east-1:0:table/t/stream/x","StartingPosition":"TRIM_HORIZON"`+tc.field+`}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(raw), tc.wantInBody) {
				t.Errorf("got %d %s, want %d with %s", resp.StatusCode, raw, tc.wantStatus, tc.wantInBody)
			}
		})
	}
}

// The event made from each record's JSON is the one json.Marshal makes of
// events.DynamoDBEvent, byte for byte.
func TestStreamEventJSONIsLambdas(t *testing.T) {
	p := &streamPoller{r: New(), m: StreamMapping{StreamARN: "arn:aws:dynamodb:us-east-1:0:table/t/stream/s"}}
	recs := keyedRecords(3, 2)
	recs[1].Dynamodb.NewImage = map[string]streamtypes.AttributeValue{"n": &streamtypes.AttributeValueMemberN{Value: "12"}, "b": &streamtypes.AttributeValueMemberB{Value: []byte{0, 1}}}
	for _, n := range []int{0, 1, 3} {
		kept := p.filter(recs[:n])
		var ev events.DynamoDBEvent
		ev.Records = []events.DynamoDBEventRecord{}
		for _, rec := range kept {
			lr, err := ddbstream.LambdaRecord(rec.Record, p.m.StreamARN, p.r.region)
			if err != nil {
				t.Fatal(err)
			}
			ev.Records = append(ev.Records, lr)
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventJSON(kept); string(got) != string(want) {
			t.Errorf("%d records:\n got %s\nwant %s", n, got, want)
		}
	}
}
