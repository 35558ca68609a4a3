package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbpipe/ddbpipe/local/runner"
)

// streamTable creates a table with a NEW_AND_OLD_IMAGES stream and returns
// its name and stream ARN.
func streamTable(t *testing.T, c clients) (string, string) {
	t.Helper()
	return streamTableNamed(t, c, unique("t"))
}

// streamTableNamed creates a table named name with a stream and returns
// the stream's ARN.
func streamTableNamed(t *testing.T, c clients, name string) (string, string) {
	t.Helper()
	ctx := context.Background()
	out, err := c.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	return name, aws.ToString(out.TableDescription.LatestStreamArn)
}

func putItems(t *testing.T, c clients, table string, keys ...string) {
	t.Helper()
	for i, k := range keys {
		if _, err := c.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: k}, "n": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(i)},
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

// streamLog records each invocation's keys.
type streamLog struct {
	mu      sync.Mutex
	batches [][]string
	seqs    [][]string
}

func (l *streamLog) add(ev events.DynamoDBEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys, seqs []string
	for _, r := range ev.Records {
		keys = append(keys, r.Change.Keys["pk"].String())
		seqs = append(seqs, r.Change.SequenceNumber)
	}
	l.batches = append(l.batches, keys)
	l.seqs = append(l.seqs, seqs)
}

func (l *streamLog) snapshot() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]string(nil), l.batches...)
}

func keysOf(prefix string, n int) []string {
	var k []string
	for i := 0; i < n; i++ {
		k = append(k, fmt.Sprintf("%s%02d", prefix, i))
	}
	return k
}

func streamRunner(t *testing.T, c clients, m runner.StreamMapping, h any) *runner.Runner {
	t.Helper()
	r := runner.New(runner.WithLogger(testLogger(t)))
	if err := r.AddFunction(runner.Function{LogicalID: "Fn", Timeout: 10 * time.Second, Handler: lambda.NewHandler(h)}); err != nil {
		t.Fatal(err)
	}
	m.Function = "Fn"
	if _, err := r.AddStream(c.streams, c.sqs, m); err != nil {
		t.Fatal(err)
	}
	return r
}

// A batch item failure at record k makes the next delivery start at k.
func TestRunnerStreamResumesAtFailedRecord(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	table, arn := streamTable(t, c)
	keys := keysOf("k", 10)
	putItems(t, c, table, keys...)
	var log streamLog
	failed := false
	r := streamRunner(t, c, runner.StreamMapping{StreamARN: arn, BatchSize: 10, Window: time.Second, ReportBatchItemFailures: true, MaxRetryAttempts: 3},
		func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			log.add(ev)
			if !failed && len(ev.Records) > 4 {
				failed = true
				return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[4].Change.SequenceNumber}}}, nil
			}
			return events.DynamoDBEventResponse{}, nil
		})
	startRunner(t, r)
	eventually(t, 60*time.Second, "two deliveries", func() bool { return len(log.snapshot()) >= 2 })
	b := log.snapshot()
	if fmt.Sprint(b[0]) != fmt.Sprint(keys) {
		t.Fatalf("first batch %v, want %v", b[0], keys)
	}
	if fmt.Sprint(b[1]) != fmt.Sprint(keys[4:]) {
		t.Errorf("after a failure at record 4 the next batch is %v, want %v", b[1], keys[4:])
	}
}

// Bisect on function error isolates a poison record; after the retries it
// goes to the on-failure destination and the shard moves on.
func TestRunnerStreamBisectPoisonToDestination(t *testing.T) {
	t.Parallel()
	needStack(t)
	c := newClients(t, nil)
	table, arn := streamTable(t, c)
	dest, _, _ := testQueue(t, c, 30, 0)
	keys := keysOf("p", 8)
	keys[5] = "poison"
	putItems(t, c, table, keys...)
	var log streamLog
	done := map[string]int{}
	var mu sync.Mutex
	r := streamRunner(t, c, runner.StreamMapping{
		StreamARN: arn, BatchSize: 8, Window: time.Second, Bisect: true, MaxRetryAttempts: 2, OnFailureQueueURL: dest,
		RetryBackoff: 10 * time.Millisecond,
	}, func(ctx context.Context, ev events.DynamoDBEvent) error {
		log.add(ev)
		for _, rec := range ev.Records {
			if rec.Change.Keys["pk"].String() == "poison" {
				return fmt.Errorf("poison record")
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rec := range ev.Records {
			done[rec.Change.Keys["pk"].String()]++
		}
		return nil
	})
	startRunner(t, r)

	var msgs []string
	eventually(t, 60*time.Second, "the on-failure message", func() bool {
		msgs = append(msgs, drain(t, c, dest)...)
		return len(msgs) > 0
	})
	var info struct {
		RequestContext struct{ Condition string } `json:"requestContext"`
		Batch          struct {
			BatchSize           int    `json:"batchSize"`
			StartSequenceNumber string `json:"startSequenceNumber"`
			StreamArn           string `json:"streamArn"`
		} `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal([]byte(msgs[0]), &info); err != nil {
		t.Fatal(err)
	}
	if info.Batch.BatchSize != 1 || info.Batch.StreamArn != arn || info.RequestContext.Condition != "RetryAttemptsExhausted" {
		t.Errorf("on-failure message %s: want one record of %s, RetryAttemptsExhausted", msgs[0], arn)
	}
	poisonSeq := ""
	for i, b := range log.snapshot() {
		for j, k := range b {
			if k == "poison" {
				poisonSeq = log.seqs[i][j]
			}
		}
	}
	if info.Batch.StartSequenceNumber != poisonSeq {
		t.Errorf("discarded sequence %s, want the poison record's %s", info.Batch.StartSequenceNumber, poisonSeq)
	}
	mu.Lock()
	for _, k := range keys {
		if k != "poison" && done[k] != 1 {
			t.Errorf("%s processed %d times, want exactly once", k, done[k])
		}
	}
	mu.Unlock()
	// The shard moves on: a later write still arrives.
	putItems(t, c, table, "after")
	eventually(t, 60*time.Second, "the record after the poison", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done["after"] == 1
	})
}

// Records of a shard arrive in order across many batches.
func TestRunnerStreamShardOrder(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	table, arn := streamTable(t, c)
	keys := keysOf("o", 40)
	var log streamLog
	r := streamRunner(t, c, runner.StreamMapping{StreamARN: arn, BatchSize: 7, StartingPosition: "TRIM_HORIZON"},
		func(ctx context.Context, ev events.DynamoDBEvent) error {
			log.add(ev)
			return nil
		})
	startRunner(t, r)
	putItems(t, c, table, keys[:20]...)
	putItems(t, c, table, keys[20:]...)
	var got []string
	eventually(t, 60*time.Second, "40 records", func() bool {
		got = got[:0]
		for _, b := range log.snapshot() {
			got = append(got, b...)
		}
		return len(got) >= 40
	})
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Errorf("order %v, want %v", got, keys)
	}
	for _, b := range log.snapshot() {
		if len(b) > 7 {
			t.Errorf("batch of %d records, above BatchSize 7", len(b))
		}
	}
	var last string
	for _, s := range log.seqs {
		for _, q := range s {
			if len(q) < len(last) || len(q) == len(last) && q <= last {
				t.Errorf("sequence %s after %s", q, last)
			}
			last = q
		}
	}
}

// Mappings added while the runner runs (the rotator's monthly tables) start
// at LATEST: records written before the mapping took its position are never
// delivered, those written after are. Then the stream ends when its table
// is deleted.
func TestRunnerStreamSubscribeAtRunTime(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	ctx := context.Background()
	var log streamLog
	r := runner.New(runner.WithLogger(testLogger(t)))
	_ = r.AddFunction(runner.Function{LogicalID: "Fn", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
		log.add(ev)
		return nil
	})})
	startRunner(t, r)
	table, arn := streamTable(t, c)
	early := keysOf("early", 3)
	putItems(t, c, table, early...)
	// The early records are in the stream: a TRIM_HORIZON mapping would get them.
	if got := streamKeys(t, c, arn); !slices.Equal(got, early) {
		t.Fatalf("stream from TRIM_HORIZON holds %v, want %v", got, early)
	}

	watch := &latestWatch{StreamsAPI: c.streams, taken: make(chan struct{})}
	id, err := r.AddStream(watch, c.sqs, runner.StreamMapping{Function: "Fn", StreamARN: arn, StartingPosition: "LATEST"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-watch.taken: // the mapping holds its LATEST iterator: what follows is after it
	case <-time.After(60 * time.Second):
		t.Fatal("the mapping took no LATEST shard iterator")
	}
	putItems(t, c, table, "late")
	eventually(t, 60*time.Second, "the record written after the mapping started", func() bool { return len(log.snapshot()) > 0 })
	// A shard is delivered in order, so the early records, written before
	// "late", can no longer come once "late" has.
	if got := log.snapshot(); len(got) != 1 || !slices.Equal(got[0], []string{"late"}) {
		t.Errorf("LATEST mapping delivered %v, want only [[late]] (not the records written before it started)", got)
	}

	if _, err := c.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatal(err)
	}
	// The mapping ends by itself once the stream is gone.
	eventually(t, 60*time.Second, "the mapping to end with its table", func() bool {
		for _, m := range r.Mappings() {
			if strings.Contains(m, arn) {
				return false
			}
		}
		return true
	})
	if err := r.Remove(id); err == nil {
		t.Error("removing an ended mapping succeeded")
	}
}

// latestWatch closes taken once the runner holds a LATEST shard iterator.
type latestWatch struct {
	runner.StreamsAPI
	once  sync.Once
	taken chan struct{}
}

func (w *latestWatch) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	out, err := w.StreamsAPI.GetShardIterator(ctx, in, opts...)
	if err == nil && in.ShardIteratorType == streamtypes.ShardIteratorTypeLatest {
		w.once.Do(func() { close(w.taken) })
	}
	return out, err
}

// streamKeys reads every shard of a stream from TRIM_HORIZON to what is
// there now and returns the keys in order.
func streamKeys(t *testing.T, c clients, arn string) []string {
	t.Helper()
	ctx := context.Background()
	desc, err := c.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, sh := range desc.StreamDescription.Shards {
		it, err := c.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := c.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Records) == 0 {
				break // the open shard's end for now
			}
			for _, r := range out.Records {
				keys = append(keys, r.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS).Value)
			}
			iter = out.NextShardIterator
		}
	}
	return keys
}

// windowCounter records each time-window event in *got and returns, as
// the window's state, the records delivered in the window so far.
func windowCounter(mu *sync.Mutex, got *[]events.DynamoDBTimeWindowEvent) func(context.Context, events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	return func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		*got = append(*got, ev)
		n := len(ev.Records)
		if prev, ok := ev.State["records"]; ok {
			var p int
			fmt.Sscan(prev, &p)
			n += p
		}
		return events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{
			State: map[string]string{"records": fmt.Sprint(n)}}}, nil
	}
}

// A mapping with a tumbling window delivers events.DynamoDBTimeWindowEvent:
// the stream's shard id (the only event form that names it), the window,
// and the state the function returned last in that window.
func TestRunnerStreamTumblingWindow(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	table, arn := streamTable(t, c)
	keys := []string{"w1", "w2", "w3", "w4", "w5", "w6"}
	var mu sync.Mutex
	var got []events.DynamoDBTimeWindowEvent
	r := streamRunner(t, c, runner.StreamMapping{StreamARN: arn, BatchSize: 2, ReportBatchItemFailures: true, MaxRetryAttempts: 3,
		TumblingWindow: time.Hour},
		windowCounter(&mu, &got))
	putItems(t, c, table, keys...)
	startRunner(t, r)
	eventually(t, 60*time.Second, "every record delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ev := range got {
			n += len(ev.Records)
		}
		return n >= len(keys)
	})
	mu.Lock()
	defer mu.Unlock()
	seen, window := 0, "" // the records of the current (shard, window) so far
	for i, ev := range got {
		if w := ev.ShardID + "@" + ev.Window.Start.String(); w != window {
			seen, window = 0, w // a new window (an hour turned) starts with no state
		}
		if ev.ShardID == "" || ev.EventSourceARN != arn {
			t.Fatalf("event %d: shard %q, source %q; want a shard id and %s", i, ev.ShardID, ev.EventSourceARN, arn)
		}
		if !ev.Window.End.Time.Equal(ev.Window.Start.Time.Add(time.Hour)) {
			t.Fatalf("event %d: window %s–%s is not an hour", i, ev.Window.Start, ev.Window.End)
		}
		// Within one window the state is what the last invocation returned.
		if i > 0 && ev.Window.Start.Equal(got[i-1].Window.Start.Time) && ev.ShardID == got[i-1].ShardID {
			if want := fmt.Sprint(seen); ev.State["records"] != want {
				t.Fatalf("event %d: state %v, want records=%s", i, ev.State, want)
			}
		}
		seen += len(ev.Records)
	}
}

// When a tumbling window ends, the runner makes Lambda's final invocation
// of it: no records, isFinalInvokeForWindow, and the state the function
// returned last in that window; the next window starts with no state.
func TestRunnerStreamTumblingWindowFinalInvocation(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	table, arn := streamTable(t, c)
	var mu sync.Mutex
	var got []events.DynamoDBTimeWindowEvent
	r := streamRunner(t, c, runner.StreamMapping{StreamARN: arn, BatchSize: 2, ReportBatchItemFailures: true, MaxRetryAttempts: 3,
		TumblingWindow: 2 * time.Second},
		windowCounter(&mu, &got))
	putItems(t, c, table, "f1", "f2", "f3")
	startRunner(t, r)
	final := func() (events.DynamoDBTimeWindowEvent, bool) {
		for _, ev := range got {
			if ev.IsFinalInvokeForWindow {
				return ev, true
			}
		}
		return events.DynamoDBTimeWindowEvent{}, false
	}
	eventually(t, 60*time.Second, "a window's final invocation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := final()
		return ok
	})
	mu.Lock()
	defer mu.Unlock()
	f, _ := final()
	if len(f.Records) != 0 || f.ShardID == "" || f.EventSourceARN != arn {
		t.Fatalf("final invocation: %d records, shard %q, source %q; want none, a shard id and %s", len(f.Records), f.ShardID, f.EventSourceARN, arn)
	}
	// Its state is what the window's last invocation returned: the records
	// delivered in that window.
	delivered := 0
	for _, ev := range got {
		if !ev.IsFinalInvokeForWindow && ev.ShardID == f.ShardID && ev.Window.Start.Equal(f.Window.Start.Time) {
			delivered += len(ev.Records)
		}
	}
	if want := fmt.Sprint(delivered); delivered == 0 || f.State["records"] != want {
		t.Fatalf("final invocation's state %v, want records=%s (the window's deliveries)", f.State, want)
	}
	// Every window starts with no state.
	started := map[string]bool{}
	for i, ev := range got {
		w := ev.ShardID + " " + ev.Window.Start.String()
		if !started[w] && !ev.IsFinalInvokeForWindow && len(ev.State) != 0 {
			t.Fatalf("event %d, the first of its window, carries state %v", i, ev.State)
		}
		started[w] = true
	}
}
