package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

var backfillSeq atomic.Int64

// backfillWorld is a ledger month in DynamoDB Local whose stream records
// reach the archive (the local S3 server) only when the test says so,
// through the archiver's code path.
type backfillWorld struct {
	t        *testing.T
	ctx      context.Context
	db       *dynamodb.Client
	s3       *s3.Client
	bucket   string
	table    string // <base>-2026-11
	p        archive.Partition
	archiver *archivelambda.Archiver
	seq      int
	state    string // a state folder whose local.env names the servers
}

func newBackfillWorld(t *testing.T) *backfillWorld {
	st := stacktest.Need(t)
	cfg := stacktest.Config(t, st, nil)
	w := &backfillWorld{t: t, ctx: t.Context(), db: awsenv.DynamoDB(cfg), s3: s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })}
	n := backfillSeq.Add(1)
	w.bucket = fmt.Sprintf("cli-backfill-%d-%d", time.Now().UnixNano(), n)
	base := fmt.Sprintf("bf%d%d-votes", time.Now().UnixNano()%1e7, n)
	w.table, w.p = base+"-2026-11", archive.Partition{Table: base, Month: "2026-11"}
	if _, err := w.s3.CreateBucket(w.ctx, &s3.CreateBucketInput{Bucket: aws.String(w.bucket)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		files, _ := archives3.ListFiles(ctx, w.s3, w.bucket, "")
		for _, f := range files {
			_, _ = w.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(f.Key)})
		}
		_, _ = w.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(w.bucket)})
	})
	w.createTable(archiveddb.CreateInput(archive.Spec{Name: w.table}))
	w.archiver = &archivelambda.Archiver{Files: archives3.Writer{S3: w.s3, Bucket: w.bucket}}
	w.seq = 1000

	w.state = t.TempDir()
	var env strings.Builder
	for k, v := range st.Vars() {
		fmt.Fprintf(&env, "export %s='%s'\n", k, v)
	}
	fmt.Fprintf(&env, "export ARCHIVE_BUCKET_NAME='%s'\n", w.bucket)
	if err := os.WriteFile(filepath.Join(w.state, "local.env"), []byte(env.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *backfillWorld) createTable(in *dynamodb.CreateTableInput) {
	w.t.Helper()
	in.DeletionProtectionEnabled = aws.Bool(false)
	if _, err := w.db.CreateTable(w.ctx, in); err != nil {
		w.t.Fatalf("create %s: %v", aws.ToString(in.TableName), err)
	}
	w.t.Cleanup(func() {
		_, _ = w.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: in.TableName})
	})
	for range 100 {
		out, err := w.db.DescribeTable(w.ctx, &dynamodb.DescribeTableInput{TableName: in.TableName})
		if err == nil && out.Table.TableStatus == ddbtypes.TableStatusActive {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.t.Fatalf("%s never became active", aws.ToString(in.TableName))
}

// vote is one ledger item's attributes.
func vote(voter, option string) map[string]string {
	return map[string]string{"pk": "poll#" + voter[len(voter)-1:], "sk": voter + "#v", "pollId": "poll", "optionId": option, "voterId": voter, "voteId": "v-" + voter}
}

// put writes the item into the table; the stream record it makes is
// returned, for the test to archive or to lose.
func (w *backfillWorld) put(item map[string]string, event string, at time.Time) events.DynamoDBEventRecord {
	w.t.Helper()
	av := map[string]ddbtypes.AttributeValue{}
	for k, v := range item {
		av[k] = &ddbtypes.AttributeValueMemberS{Value: v}
	}
	if _, err := w.db.PutItem(w.ctx, &dynamodb.PutItemInput{TableName: aws.String(w.table), Item: av}); err != nil {
		w.t.Fatal(err)
	}
	return w.record(item, event, at)
}

// record is the stream record of a change to item, recorded at at.
func (w *backfillWorld) record(item map[string]string, event string, at time.Time) events.DynamoDBEventRecord {
	w.seq++
	img := map[string]events.DynamoDBAttributeValue{}
	for k, v := range item {
		img[k] = events.NewStringAttribute(v)
	}
	rec := events.DynamoDBEventRecord{
		EventName: event, EventID: fmt.Sprintf("e%d", w.seq),
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + w.table + "/stream/2026-11-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: at},
			SequenceNumber:              fmt.Sprint(w.seq),
			Keys:                        map[string]events.DynamoDBAttributeValue{"pk": img["pk"], "sk": img["sk"]},
		},
	}
	if event != archive.EventRemove {
		rec.Change.NewImage = img
	}
	return rec
}

func (w *backfillWorld) archive(recs ...events.DynamoDBEventRecord) {
	w.t.Helper()
	if res := w.archiver.Archive(w.ctx, recs); res.Err != nil {
		w.t.Fatal(res.Err)
	}
}

// verify compares the archive's partition, replayed, with a Scan of the table.
func (w *backfillWorld) verify() archive.Report {
	w.t.Helper()
	c, err := (&archives3.Partitions{S3: w.s3, Bucket: w.bucket}).Read(w.ctx, w.p)
	if err != nil {
		w.t.Fatal(err)
	}
	scan, err := (&archiveddb.Tables{DB: w.db, Local: true}).Scan(w.ctx, w.table, false)
	if err != nil {
		w.t.Fatal(err)
	}
	return archive.Verify(c.State, scan.State)
}

func (w *backfillWorld) cli(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	err := run(w.ctx, append(append([]string{"archive", "backfill"}, args...), "-state-dir", w.state), &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

func (w *backfillWorld) backfillFiles() []string {
	files, err := archives3.ListFiles(w.ctx, w.s3, w.bucket, w.p.Prefix())
	if err != nil {
		w.t.Fatal(err)
	}
	var keys []string
	for _, f := range files {
		if strings.Contains(f.Key, "/backfill-") {
			keys = append(keys, f.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

// TestArchiveBackfillHealsALedgerMonth: a month whose stream lost records
// (5 INSERTs, a MODIFY, a REMOVE never archived) is healed by `archive
// backfill`, which writes only those 7 items; the archive then replays to
// the table. A stream record recorded after the watermark wins over the
// backfill's row; a late one recorded before it loses. A second backfill
// writes nothing.
func TestArchiveBackfillHealsALedgerMonth(t *testing.T) {
	w := newBackfillWorld(t)
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	var delivered []events.DynamoDBEventRecord
	for i := range 30 {
		voter := fmt.Sprintf("voter-%02d", i)
		rec := w.put(vote(voter, "red"), archive.EventInsert, start.Add(time.Duration(i)*time.Minute))
		if i%6 == 5 { // 5, 11, 17, 23, 29: their records were trimmed
			continue
		}
		delivered = append(delivered, rec)
	}
	ghost := vote("voter-ghost", "red")
	delivered = append(delivered, w.record(ghost, archive.EventInsert, start)) // in the archive; its REMOVE was lost
	w.archive(delivered[:10]...)
	w.archive(delivered[10:]...)
	w.put(vote("voter-00", "blue"), archive.EventModify, start.Add(time.Hour)) // the MODIFY is lost

	before := w.verify()
	if len(before.Missing) != 5 || len(before.Different) != 1 || len(before.Extra) != 1 {
		t.Fatalf("before the backfill: %s, want 5 missing, 1 different, 1 extra", before)
	}

	out, err := w.cli("-table", w.table, "-dry-run")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "difference: 7 rows: 5 missing, 1 different, 1 removed") || !strings.Contains(out, "dry run: nothing written") ||
		!strings.Contains(out, `REMOVE {"pk":{"S":"poll#t"},"sk":{"S":"voter-ghost#v"}}`) || !strings.Contains(out, "scanned:    30 items") {
		t.Errorf("dry run output:\n%s", out)
	}
	if f := w.backfillFiles(); len(f) != 0 {
		t.Fatalf("the dry run wrote %v", f)
	}

	out, err = w.cli("-table", w.table)
	if err != nil {
		t.Fatalf("backfill: %v\n%s", err, out)
	}
	files := w.backfillFiles()
	if len(files) != 1 || !strings.Contains(out, "wrote:      s3://"+w.bucket+"/"+files[0]+" (7 rows") ||
		!strings.Contains(out, "archive:    2 files, 26 rows, 26 items") {
		t.Fatalf("backfill files %v; output:\n%s", files, out)
	}
	t.Logf("backfill output:\n%s", out)
	if rep := w.verify(); !rep.OK() || rep.TableItems != 30 {
		t.Fatalf("after the backfill: %s", rep)
	}
	rows, err := archives3.ReadRows(w.ctx, w.s3, w.bucket, files[0])
	if err != nil {
		t.Fatal(err)
	}
	var watermark time.Time
	for _, r := range rows {
		if r.Stream != archive.BackfillStream || r.Replayed {
			t.Errorf("row %+v, want a backfill row", r)
		}
		watermark = r.ApproximateCreationTime
	}

	// Again: nothing to write.
	if out, err := w.cli("-table", w.table); err != nil || !strings.Contains(out, "nothing to write") || len(w.backfillFiles()) != 1 {
		t.Errorf("second backfill (%v):\n%s", err, out)
	}

	// The stream flows on: voter-05 changes after the watermark (recorded
	// after it: it wins over the backfill's image); a record of voter-11
	// from before the watermark arrives late, with a greater sequence
	// number (the Scan saw the table after it: the backfill's row wins).
	after := w.put(vote("voter-05", "green"), archive.EventModify, watermark.Add(time.Second))
	late := w.record(vote("voter-11", "stale"), archive.EventModify, watermark.Add(-time.Hour))
	w.archive(after, late)
	if rep := w.verify(); !rep.OK() {
		t.Errorf("after a change recorded after the watermark and a late record from before it: %s", rep)
	}
	// ReplayRows (what compaction writes) agrees.
	c, err := archives3.ListFiles(w.ctx, w.s3, w.bucket, w.p.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	var all []archive.Row
	for _, f := range c {
		rows, err := archives3.ReadRows(w.ctx, w.s3, w.bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	checked := 0
	for _, r := range archive.ReplayRows(all) {
		img, _ := archive.ParseImage(r.NewImage)
		switch r.Keys {
		case `{"pk":{"S":"poll#5"},"sk":{"S":"voter-05#v"}}`:
			checked++
			if img["optionId"] != "green" || r.Stream == archive.BackfillStream {
				t.Errorf("voter-05 replays to %+v, want the stream's green", r)
			}
		case `{"pk":{"S":"poll#1"},"sk":{"S":"voter-11#v"}}`:
			checked++
			if img["optionId"] != "red" || r.Stream != archive.BackfillStream {
				t.Errorf("voter-11 replays to %+v, want the backfill's red", r)
			}
		}
	}
	if checked != 2 {
		t.Errorf("ReplayRows: %d of voter-05 and voter-11 found", checked)
	}
}

func TestArchiveBackfillErrors(t *testing.T) {
	w := newBackfillWorld(t)
	noStream := w.table[:len(w.table)-len("-2026-11")] + "-nostream"
	w.createTable(&dynamodb.CreateTableInput{
		TableName:            aws.String(noStream),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no table flag", nil, "-table is required"},
		{"a missing table", []string{"-table", w.table + "-nope"}, "does not exist"},
		{"a missing bucket", []string{"-table", w.table, "-bucket", w.bucket + "-nope"}, `archive bucket "` + w.bucket + `-nope"`},
		{"a table without a stream", []string{"-table", noStream}, "has no stream"},
		{"a table the archive holds nothing of", []string{"-table", w.table}, "the archive holds nothing of " + w.p.Table},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := w.cli(tt.args...)
			if err == nil || !strings.Contains(err.Error()+out, tt.want) {
				t.Errorf("err %v, output %s; want %q", err, out, tt.want)
			}
		})
	}
	// -force: an archive that holds nothing gets the whole table.
	w.put(vote("voter-01", "red"), archive.EventInsert, time.Now())
	if out, err := w.cli("-table", w.table, "-force"); err != nil || !strings.Contains(out, "1 rows: 1 missing") {
		t.Errorf("-force (%v):\n%s", err, out)
	}
}

// A table that is not monthly (as the objects table): its archive is split
// by the month each record was made in, so the backfill compares the table
// with every month of its archive, and writes what they all miss into the
// watermark's month.
func TestArchiveBackfillATableThatIsNotMonthly(t *testing.T) {
	w := newBackfillWorld(t)
	w.table = strings.TrimSuffix(w.table, "-votes-2026-11") + "-things"
	w.createTable(archiveddb.CreateInput(archive.Spec{Name: w.table}))
	october, november := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	kept := w.put(vote("voter-a", "red"), archive.EventInsert, october) // archived in October, unchanged since
	removed := w.record(vote("voter-b", "red"), archive.EventInsert, october)
	removedAgain := w.record(vote("voter-b", "red"), archive.EventRemove, november) // the archive knows it is gone
	changed := w.put(vote("voter-c", "red"), archive.EventInsert, october)
	w.put(vote("voter-c", "blue"), archive.EventModify, november) // lost
	w.put(vote("voter-d", "red"), archive.EventInsert, november)  // lost
	w.archive(kept, removed, changed)
	w.archive(removedAgain)

	watermark := time.Date(2026, 12, 2, 3, 4, 5, 600, time.UTC)
	job := backfillJob{DB: w.db, Local: true, S3: w.s3, Bucket: w.bucket, Table: w.table, Segments: 2, Now: func() time.Time { return watermark }}
	res, err := job.run(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := archive.Partition{Table: w.table, Month: "2026-12"}
	if res.Partition != want || res.Counts != (archive.Backfill{Missing: 1, Different: 1}) || res.ArchiveFiles != 2 || res.Archived != 2 ||
		res.Key != archive.BackfillKey(want, watermark) || !res.Watermark.Equal(watermark.Truncate(time.Second)) {
		t.Fatalf("backfill %+v, want voter-c and voter-d into %+v", res, want)
	}
	var buf bytes.Buffer
	res.print(&buf, 5)
	t.Logf("\n%s", buf.String())

	// Every month of the table's archive, replayed, is the table.
	files, err := archives3.ListFiles(w.ctx, w.s3, w.bucket, "table="+w.table+"/")
	if err != nil {
		t.Fatal(err)
	}
	replay := archive.NewReplay()
	for _, f := range files {
		rows, err := archives3.ReadRows(w.ctx, w.s3, w.bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := replay.Add(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	scan, err := (&archiveddb.Tables{DB: w.db, Local: true}).Scan(w.ctx, w.table, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep := archive.Verify(replay.State(), scan.State); !rep.OK() {
		t.Errorf("after the backfill: %s", rep)
	}
	// Two backfills never share a watermark: with the clock stopped on the
	// first one's second, a second backfill waits, then gives up.
	if _, err := job.run(w.ctx); err == nil || !strings.Contains(err.Error(), "a backfill with the watermark 2026-12-02T03:04:05Z exists already") {
		t.Errorf("a backfill in the same second: %v", err)
	}
	job.Now = func() time.Time { return watermark.Add(time.Hour) }
	if again, err := job.run(w.ctx); err != nil || again.Counts.Rows() != 0 || again.Key != "" {
		t.Errorf("second backfill: %+v, %v; want nothing written", again.Counts, err)
	}
}
