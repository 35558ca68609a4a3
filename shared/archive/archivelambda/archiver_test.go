package archivelambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const bucket = "archive-test"

// newArchiver is the archiver over the bucket named name of api, without a
// quarantine (a poison record fails the batch); SetupArchiver adds one.
func newArchiver(api archives3.PutObjectAPI, name string, logs *bytes.Buffer) *archivelambda.Archiver {
	if logs == nil {
		logs = &bytes.Buffer{}
	}
	return &archivelambda.Archiver{
		Files: archives3.Writer{S3: api, Bucket: name}, Log: slog.New(slog.NewJSONHandler(logs, nil)),
		Metrics: emf.New(logs, "ddbpipe", map[string]string{"Function": "ArchiverFunction"}),
		Now:     func() time.Time { return time.Date(2026, 12, 1, 0, 2, 0, 0, time.UTC) },
	}
}

// readAll reads every archived object back, by key.
func readAll(t *testing.T, m *archivetest.MemS3) map[string][]archive.Row {
	t.Helper()
	out := map[string][]archive.Row{}
	for _, k := range m.Keys() {
		rows, err := archives3.ReadRows(t.Context(), m, bucket, k)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = rows
	}
	return out
}

// The fixture goes through the handler as Lambda would deliver it (JSON),
// and the rows read back from the Parquet file match the golden file.
func TestHandleFixture(t *testing.T) {
	ev := archivetest.MustLoadEvent(t, "testdata/stream-event.json")
	store := archivetest.NewMemS3()
	var logs bytes.Buffer
	resp, err := newArchiver(store, bucket, &logs).Handle(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want success", resp, err)
	}
	wantKey := "table=ddbpipe-votes/month=2026-11/stream-2026-11-01T000000.000-0000000000004421584500000000017450439091.parquet"
	if got := store.Keys(); !reflect.DeepEqual(got, []string{wantKey}) {
		t.Fatalf("objects %v, want [%s]", got, wantKey)
	}
	meta := store.Meta(wantKey)
	if meta[archives3.MetaFirstSequence] != "4421584500000000017450439091" || meta[archives3.MetaLastSequence] != "4421584500000000017450439100" || meta[archives3.MetaRows] != "3" {
		t.Errorf("object metadata %v", meta)
	}
	got, err := json.MarshalIndent(readAll(t, store)[wantKey], "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/stream-event.rows.golden.json"
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(bytes.TrimSpace(want)) != string(got) {
		t.Errorf("rows differ from %s (run with -update after checking):\n%s", golden, got)
	}
	if !strings.Contains(logs.String(), `"RecordsArchived":3`) || !strings.Contains(logs.String(), `"ArchiveFiles":1`) {
		t.Errorf("no EMF line with the batch's counts:\n%s", logs.String())
	}
}

// objectsRecord is voteRecord moved to a non-monthly table, created at t.
func objectsRecord(i int, at time.Time) events.DynamoDBEventRecord {
	r := archivetest.VoteRecord(i)
	r.EventSourceArn = "arn:aws:dynamodb:us-east-1:000000000000:table/ddbpipe-objects/stream/2026-01-01T00:00:00.000"
	r.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: at}
	return r
}

func TestArchiveBatch(t *testing.T) {
	nov := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	dec := time.Date(2026, 12, 1, 0, 0, 5, 0, time.UTC)
	// Ten records of the objects table: 0–4 in November, 5–9 in December.
	batch := func() []events.DynamoDBEventRecord {
		var b []events.DynamoDBEventRecord
		for i := range 10 {
			at := nov
			if i >= 5 {
				at = dec
			}
			b = append(b, objectsRecord(i, at))
		}
		return b
	}
	novKey := "table=ddbpipe-objects/month=2026-11/stream-2026-01-01T000000.000-" + archive.PadSequence(archivetest.Seq(0)) + ".parquet"
	decKey := "table=ddbpipe-objects/month=2026-12/stream-2026-01-01T000000.000-" + archive.PadSequence(archivetest.Seq(5)) + ".parquet"
	failOn := func(key string) func(string) error {
		return func(k string) error {
			if k == key {
				return errors.New("SlowDown")
			}
			return nil
		}
	}
	poisonAt := func(i int) func([]events.DynamoDBEventRecord) {
		return func(b []events.DynamoDBEventRecord) {
			b[i].Change.NewImage = map[string]events.DynamoDBAttributeValue{"n": events.NewNumberAttribute("not a number")}
		}
	}
	tests := []struct {
		name     string
		change   func([]events.DynamoDBEventRecord)
		failPut  func(string) error
		cancel   bool
		wantKeys []string
		wantRows int
		failedAt string // "" for success
		poison   bool
	}{
		{name: "two months, two objects", wantKeys: []string{novKey, decKey}, wantRows: 10},
		{name: "second object fails", failPut: failOn(decKey), wantKeys: []string{novKey}, wantRows: 5, failedAt: archivetest.Seq(5)},
		{name: "first object fails: nothing after it is written", failPut: failOn(novKey), failedAt: archivetest.Seq(0)},
		{name: "poison in the second run", change: poisonAt(7), wantKeys: []string{novKey, decKey}, wantRows: 7, failedAt: archivetest.Seq(7), poison: true},
		{name: "poison first", change: poisonAt(0), failedAt: archivetest.Seq(0), poison: true},
		{name: "bad ARN is poison", change: func(b []events.DynamoDBEventRecord) { b[3].EventSourceArn = "arn:aws:sqs:x" },
			wantKeys: []string{novKey}, wantRows: 3, failedAt: archivetest.Seq(3), poison: true},
		{name: "unknown event name is poison", change: func(b []events.DynamoDBEventRecord) { b[9].EventName = "TRUNCATE" },
			wantKeys: []string{novKey, decKey}, wantRows: 9, failedAt: archivetest.Seq(9), poison: true},
		{name: "write failure before the poison wins", change: poisonAt(8), failPut: failOn(novKey), failedAt: archivetest.Seq(0)},
		{name: "cancelled", cancel: true, failedAt: archivetest.Seq(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := batch()
			if tt.change != nil {
				tt.change(b)
			}
			store := archivetest.NewMemS3()
			store.FailPut = tt.failPut
			ctx := t.Context()
			if tt.cancel {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			a := newArchiver(store, bucket, nil)
			res := a.Archive(ctx, b)
			if res.FailedAt != tt.failedAt || res.Poison != tt.poison || (res.Err != nil) != (tt.failedAt != "") {
				t.Errorf("Archive failedAt %q poison %v err %v; want %q, %v", res.FailedAt, res.Poison, res.Err, tt.failedAt, tt.poison)
			}
			if res.Archived != tt.wantRows || res.Records != 10 {
				t.Errorf("archived %d of %d, want %d of 10", res.Archived, res.Records, tt.wantRows)
			}
			if got := store.Keys(); !reflect.DeepEqual(got, tt.wantKeys) && len(got)+len(tt.wantKeys) > 0 {
				t.Errorf("objects %v, want %v", got, tt.wantKeys)
			}
			rows := 0
			for _, rs := range readAll(t, store) {
				rows += len(rs)
			}
			if rows != tt.wantRows {
				t.Errorf("%d rows in the bucket, want %d", rows, tt.wantRows)
			}

			// The handler reports the same record, by sequence number.
			resp, err := newArchiver(newMemS3WithFail(tt.failPut), bucket, nil).Handle(ctx, events.DynamoDBEvent{Records: b})
			if err != nil {
				t.Fatalf("Handle returned an error: %v", err)
			}
			var want []events.DynamoDBBatchItemFailure
			if tt.failedAt != "" {
				want = []events.DynamoDBBatchItemFailure{{ItemIdentifier: tt.failedAt}}
			}
			if !reflect.DeepEqual(resp.BatchItemFailures, want) {
				t.Errorf("Handle failures %+v, want %+v", resp.BatchItemFailures, want)
			}
		})
	}
}

func newMemS3WithFail(f func(string) error) *archivetest.MemS3 {
	m := archivetest.NewMemS3()
	m.FailPut = f
	return m
}

func TestHandleEmptyBatch(t *testing.T) {
	resp, err := newArchiver(archivetest.NewMemS3(), bucket, nil).Handle(t.Context(), events.DynamoDBEvent{})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("Handle(empty) = %+v, %v", resp, err)
	}
}

// Lambda's way with a shard, replayed: batches of changing sizes, resumed at
// the reported sequence number, with puts that fail before or after they
// land (an S3 timeout after the write), and successful batches delivered a
// second time. However the batches fall, every record ends up archived
// exactly once.
func TestRetriesArchiveEachRecordOnce(t *testing.T) {
	const total = 300
	stream := archivetest.VoteBatch(0, total)
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			store := archivetest.NewMemS3()
			landedButFailed := false
			store.FailPut = func(string) error {
				switch rnd.IntN(5) {
				case 0:
					return errors.New("503 SlowDown")
				case 1:
					landedButFailed = true // checked after the put lands
				}
				return nil
			}
			wrapped := putAfterHook{store, func() error {
				if landedButFailed {
					landedButFailed = false
					return errors.New("timeout after the object landed")
				}
				return nil
			}}
			a := newArchiver(wrapped, bucket, nil)
			pos := 0
			for steps := 0; pos < total; steps++ {
				if steps > 10*total {
					t.Fatal("the shard does not move on")
				}
				n := 1 + rnd.IntN(40)
				batch := stream[pos:min(pos+n, total)]
				resp, _ := a.Handle(t.Context(), events.DynamoDBEvent{Records: batch})
				if len(resp.BatchItemFailures) == 0 {
					if rnd.IntN(4) == 0 {
						continue // delivered again
					}
					pos += len(batch)
					continue
				}
				failed := resp.BatchItemFailures[0].ItemIdentifier
				for i := pos; i < total; i++ {
					if stream[i].Change.SequenceNumber == failed {
						pos = i
						break
					}
				}
			}
			seen := map[string]int{}
			for _, rows := range readAll(t, store) {
				for _, r := range rows {
					seen[r.SequenceNumber]++
				}
			}
			for i := range total {
				if n := seen[archivetest.Seq(i)]; n != 1 {
					t.Fatalf("record %d archived %d times (%d objects)", i, n, len(store.Keys()))
				}
			}
		})
	}
}

// putAfterHook fails a put after it has landed, when after says so.
type putAfterHook struct {
	*archivetest.MemS3
	after func() error
}

var _ archives3.PutObjectAPI = putAfterHook{}

func (p putAfterHook) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := p.MemS3.PutObject(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	if err := p.after(); err != nil {
		return nil, err
	}
	return out, nil
}

// BenchmarkArchive measures the archiver's records per second for batches
// of 100 vote records (conversion, Parquet encoding, an in-memory put).
func BenchmarkArchive(b *testing.B) {
	batch := archivetest.VoteBatch(0, 100)
	a := newArchiver(archivetest.NewMemS3(), bucket, nil)
	b.ReportAllocs()
	for b.Loop() {
		if res := a.Archive(b.Context(), batch); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}
