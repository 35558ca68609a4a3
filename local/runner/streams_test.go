package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// fakeStream is an in-memory stream with fixed shards, for what DynamoDB
// Local cannot be made to do on demand: shard lineage (a parent shard that
// closed and its child) and records older than the mapping's age limit.
type fakeStream struct {
	shards  []streamtypes.Shard
	records map[string][]streamtypes.Record
}

var _ StreamsAPI = (*fakeStream)(nil)

func (f *fakeStream) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: &streamtypes.StreamDescription{Shards: f.shards}}, nil
}

func (f *fakeStream) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(aws.ToString(in.ShardId) + "#0")}, nil
}

// GetRecords returns up to Limit records; closed shards end with a nil iterator.
func (f *fakeStream) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	shard, pos, _ := strings.Cut(aws.ToString(in.ShardIterator), "#")
	var i int
	fmt.Sscan(pos, &i)
	recs := f.records[shard]
	if i >= len(recs) {
		for _, s := range f.shards {
			if aws.ToString(s.ShardId) == shard && s.SequenceNumberRange.EndingSequenceNumber != nil {
				return &dynamodbstreams.GetRecordsOutput{}, nil // closed and read to its end
			}
		}
		return &dynamodbstreams.GetRecordsOutput{NextShardIterator: aws.String(fmt.Sprintf("%s#%d", shard, i))}, nil
	}
	end := min(len(recs), i+int(aws.ToInt32(in.Limit)))
	return &dynamodbstreams.GetRecordsOutput{Records: recs[i:end], NextShardIterator: aws.String(fmt.Sprintf("%s#%d", shard, end))}, nil
}

func record(seq string, at time.Time) streamtypes.Record {
	return streamtypes.Record{
		EventID: aws.String("e" + seq), EventName: streamtypes.OperationTypeInsert, EventSource: aws.String("aws:dynamodb"),
		AwsRegion: aws.String("us-east-1"), EventVersion: aws.String("1.1"),
		Dynamodb: &streamtypes.StreamRecord{
			SequenceNumber: aws.String(seq), ApproximateCreationDateTime: aws.Time(at), StreamViewType: streamtypes.StreamViewTypeKeysOnly,
			Keys: map[string]streamtypes.AttributeValue{"pk": &streamtypes.AttributeValueMemberS{Value: seq}}, SizeBytes: aws.Int64(10),
		},
	}
}

// fakeQueue records what is sent to the on-failure destination.
type fakeQueue struct {
	mu   sync.Mutex
	sent []string
}

func (q *fakeQueue) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return nil, errors.New("not used")
}
func (q *fakeQueue) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return nil, errors.New("not used")
}
func (q *fakeQueue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{}, nil
}

var _ SQSAPI = (*fakeQueue)(nil)

// deliver runs function F on the fake stream through mapping m (its
// function and stream set here) until n records reached it, and returns
// the runner and their sequence numbers in the order F saw them.
func deliver(t *testing.T, fs *fakeStream, m StreamMapping, n int) (*Runner, []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	r := New()
	_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
		mu.Lock()
		defer mu.Unlock()
		for _, rec := range ev.Records {
			got = append(got, rec.Change.SequenceNumber)
		}
		return nil
	})})
	m.Function, m.StreamARN, m.PollInterval = "F", "arn:aws:dynamodb:us-east-1:0:table/t/stream/s", time.Millisecond
	if _, err := r.AddStream(fs, &fakeQueue{}, m); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	return r, slices.Clone(got)
}

// parentAndChild is a stream whose listing names a child shard (records
// 400 and 500) before its closed parent (100 to 300).
func parentAndChild() *fakeStream {
	now := time.Now()
	return &fakeStream{
		shards: []streamtypes.Shard{
			{ShardId: aws.String("child"), ParentShardId: aws.String("parent"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("400")}},
			{ShardId: aws.String("parent"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("100"), EndingSequenceNumber: aws.String("300")}},
		},
		records: map[string][]streamtypes.Record{
			"parent": {record("100", now), record("200", now), record("300", now)},
			"child":  {record("400", now), record("500", now)},
		},
	}
}

// A child shard is read only after its parent was read to its end, even
// when the listing names the child first.
func TestStreamLineageParentsFirst(t *testing.T) {
	fs := parentAndChild()
	_, got := deliver(t, fs, StreamMapping{BatchSize: 10}, 5)
	if want := "[100 200 300 400 500]"; fmt.Sprint(got) != want {
		t.Errorf("records in order %v, want %s", got, want)
	}
}

// Records past MaximumRecordAgeInSeconds go to the on-failure destination
// instead of being retried.
func TestStreamRecordAgeExceeded(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	fs := &fakeStream{
		shards:  []streamtypes.Shard{{ShardId: aws.String("s"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1"), EndingSequenceNumber: aws.String("2")}}},
		records: map[string][]streamtypes.Record{"s": {record("1", old), record("2", old)}},
	}
	q := &fakeQueue{}
	r := New()
	calls := 0
	_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
		calls++
		return errors.New("always fails")
	})})
	if _, err := r.AddStream(fs, q, StreamMapping{Function: "F", StreamARN: "arn:s", BatchSize: 10, MaxRetryAttempts: -1, MaxRecordAge: time.Minute,
		OnFailureQueueURL: "http://q", PollInterval: time.Millisecond, RetryBackoff: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(10*time.Second, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.sent) > 0
	})
	stop()
	if len(q.sent) != 1 {
		t.Fatalf("on-failure messages %d, want 1", len(q.sent))
	}
	var info struct {
		RequestContext struct{ Condition string } `json:"requestContext"`
		Batch          struct{ BatchSize int }    `json:"DDBStreamBatchInfo"`
	}
	_ = json.Unmarshal([]byte(q.sent[0]), &info)
	if info.RequestContext.Condition != "RecordAgeExceeded" || info.Batch.BatchSize != 2 {
		t.Errorf("on-failure message %s, want RecordAgeExceeded for 2 records", q.sent[0])
	}
	if calls != 1 {
		t.Errorf("handler called %d times, want 1 (no retries past the age limit)", calls)
	}
}

// Stopping the runner ends a shard's retries and its held invocations: a
// batch that fails for ever (no retry or age limit), or waits on a held
// function, does not keep stop() waiting.
func TestStreamStopEndsRetriesAndHolds(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			fs := &fakeStream{
				shards:  []streamtypes.Shard{{ShardId: aws.String("s"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}},
				records: map[string][]streamtypes.Record{"s": {record("1", time.Now())}},
			}
			r := New()
			var mu sync.Mutex
			calls := 0
			_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return errors.New("always fails")
			})})
			if held {
				if _, err := r.Hold("F"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.AddStream(fs, &fakeQueue{}, StreamMapping{Function: "F", StreamARN: "arn:s", BatchSize: 10, MaxRetryAttempts: -1,
				PollInterval: time.Millisecond, RetryBackoff: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			stop, err := r.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !held {
				waitUntil(10*time.Second, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return calls >= 3
				})
			}
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(time.Minute):
				t.Fatal("stop() still waiting a minute later")
			}
			if mu.Lock(); held && calls != 0 {
				t.Errorf("a held function was invoked %d times", calls)
			}
			mu.Unlock()
		})
	}
}

// With ReportBatchItemFailures and BisectBatchOnFunctionError, a partial
// failure that made progress splits the batch at the returned sequence
// number, which is not a retry: a function that gets one record further on
// each call finishes the batch however small MaximumRetryAttempts is. One
// that fails at the batch's first record every time uses its retries up,
// and so does a partial failure without bisection.
func TestStreamPartialFailureSplitsWhenBisecting(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bisect     bool
		progress   bool // each call takes the first record of its batch
		wantCalls  int
		wantFailed int // on-failure messages
	}{
		{"progress, bisecting", true, true, 6, 0},
		{"progress, not bisecting", false, true, 2, 1},
		{"no progress, bisecting", true, false, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			var recs []streamtypes.Record
			for i := 1; i <= 6; i++ {
				recs = append(recs, record(fmt.Sprint(i), now))
			}
			fs := &fakeStream{
				shards:  []streamtypes.Shard{{ShardId: aws.String("s"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1"), EndingSequenceNumber: aws.String("6")}}},
				records: map[string][]streamtypes.Record{"s": recs},
			}
			q := &fakeQueue{}
			var mu sync.Mutex
			calls, done := 0, 0
			r := New()
			_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				failAt := 0
				if tc.progress && len(ev.Records) > 1 {
					failAt = 1
				} else if tc.progress {
					failAt = -1
				}
				if failAt < 0 {
					done += len(ev.Records)
					return events.DynamoDBEventResponse{}, nil
				}
				done += failAt
				return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[failAt].Change.SequenceNumber}}}, nil
			})})
			if _, err := r.AddStream(fs, q, StreamMapping{Function: "F", StreamARN: "arn:s", BatchSize: 10, MaxRetryAttempts: 1,
				Bisect: tc.bisect, ReportBatchItemFailures: true,
				OnFailureQueueURL: "http://q", PollInterval: time.Millisecond, RetryBackoff: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			stop, err := r.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(time.Minute, func() bool {
				mu.Lock()
				defer mu.Unlock()
				q.mu.Lock()
				defer q.mu.Unlock()
				return done == 6 || len(q.sent) > 0
			})
			stop()
			if calls != tc.wantCalls || len(q.sent) != tc.wantFailed {
				t.Errorf("%d calls, %d records done, %d on-failure messages; want %d calls and %d messages", calls, done, len(q.sent), tc.wantCalls, tc.wantFailed)
			}
		})
	}
}

// pacedClock records the runner's sleeps and ends each short one at once;
// a sleep of listEvery or more lasts until its context ends, so a shard
// listing that comes only on its timer never comes.
type pacedClock struct {
	mu     sync.Mutex
	sleeps []time.Duration
}

func (c *pacedClock) Now() time.Time { return time.Now() }

func (c *pacedClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	if d >= listEvery {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Millisecond):
		return nil
	}
}

func (c *pacedClock) reads() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.sleeps), func(d time.Duration) bool { return d >= listEvery })
}

// lockedStream is a fakeStream whose records a test may add while the
// runner reads it.
type lockedStream struct {
	mu sync.Mutex
	fakeStream
}

func (f *lockedStream) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fakeStream.GetRecords(ctx, in, o...)
}

// quietShard is a runner (on pacedClock) reading a stream of one shard,
// "s", empty until add puts a record on it; the records delivered go to
// got.
type quietShard struct {
	r     *Runner
	fs    *lockedStream
	clock *pacedClock
	got   chan string
}

func startQuietShard(t *testing.T, arn string, opts ...Option) *quietShard {
	t.Helper()
	q := &quietShard{fs: &lockedStream{fakeStream: fakeStream{
		shards:  []streamtypes.Shard{{ShardId: aws.String("s"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}},
		records: map[string][]streamtypes.Record{},
	}}, clock: &pacedClock{}, got: make(chan string, 10)}
	q.r = New(append([]Option{WithClock(q.clock)}, opts...)...)
	_ = q.r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
		for _, rec := range ev.Records {
			q.got <- rec.Change.SequenceNumber
		}
		return nil
	})})
	if _, err := q.r.AddStream(q.fs, &fakeQueue{}, StreamMapping{Function: "F", StreamARN: arn}); err != nil {
		t.Fatal(err)
	}
	stop, err := q.r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return q
}

// add puts the record seq on the shard.
func (q *quietShard) add(seq string) {
	q.fs.mu.Lock()
	defer q.fs.mu.Unlock()
	q.fs.records["s"] = []streamtypes.Record{record(seq, time.Now())}
}

// delivered fails unless the record seq is delivered within 10 s.
func (q *quietShard) delivered(t *testing.T, seq, what string) {
	t.Helper()
	select {
	case got := <-q.got:
		if got != seq {
			t.Fatalf("delivered %s, want %s", got, seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not delivered", what)
	}
}

// A shard that returns nothing is read at the base rate for idleReads
// reads, then once per IdlePollInterval, and at the base rate again from
// the read that brings a record.
func TestStreamIdleShardIsReadLessOften(t *testing.T) {
	q := startQuietShard(t, "arn:s")
	waitUntil(10*time.Second, func() bool { return len(q.clock.reads()) >= idleReads+3 })
	q.add("7")
	q.delivered(t, "7", "the record added to an idle shard")
	n := len(q.clock.reads())
	waitUntil(10*time.Second, func() bool { return len(q.clock.reads()) >= n+2 })
	reads := q.clock.reads()
	for i, d := range reads[:idleReads] {
		if d != 250*time.Millisecond {
			t.Fatalf("empty read %d then slept %s, want the base 250ms (all: %v)", i+1, d, reads)
		}
	}
	if d := reads[idleReads]; d != time.Second {
		t.Fatalf("empty read %d then slept %s, want the idle 1s (all: %v)", idleReads+1, d, reads)
	}
	if d := reads[n]; d != 250*time.Millisecond {
		t.Errorf("the first empty read after the record slept %s, want the base 250ms again (all: %v)", d, reads)
	}
}

// An idle shard's wait ends when its table is written (Wake): with an
// idle wait that pacedClock never ends, the record added to the shard is
// delivered only because the runner was told of the write.
func TestStreamIdleShardWakesOnAWrite(t *testing.T) {
	q := startQuietShard(t, "arn:aws:dynamodb:us-east-1:000000000000:table/T/stream/2026-11-29T00:00:00.000", WithIdlePollInterval(time.Hour))
	idle := func() bool {
		q.clock.mu.Lock()
		defer q.clock.mu.Unlock()
		return slices.Contains(q.clock.sleeps, time.Hour)
	}
	waitUntil(10*time.Second, idle)
	if !idle() {
		t.Fatalf("the shard never went idle: %v", q.clock.reads())
	}
	q.add("7")
	q.r.Wake("another-table")
	q.r.Wake("T")
	q.delivered(t, "7", "the record written to an idle shard's table, after Wake,")
}

// The children of a shard read to its end are read at once, not at the
// next listing on the timer (which pacedClock never ends).
func TestStreamEndedShardListsItsChildrenAtOnce(t *testing.T) {
	clock := &pacedClock{}
	var mu sync.Mutex
	var got []string
	r := New(WithClock(clock))
	_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) error {
		mu.Lock()
		defer mu.Unlock()
		for _, rec := range ev.Records {
			got = append(got, rec.Change.SequenceNumber)
		}
		return nil
	})})
	if _, err := r.AddStream(parentAndChild(), &fakeQueue{}, StreamMapping{Function: "F", StreamARN: "arn:s"}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ok := waitUntil(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 5
	})
	mu.Lock()
	defer mu.Unlock()
	if !ok || !slices.Equal(got, []string{"100", "200", "300", "400", "500"}) {
		t.Fatalf("delivered %v, want the parent's 100–300, then the child's 400 and 500", got)
	}
}
