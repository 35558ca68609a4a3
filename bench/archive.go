package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// benchArchive measures the cold tier on one month of vote ledger records:
// the archiver's throughput through its Lambda handler into the local S3,
// the archive's bytes per record against gzip'd DynamoDB-JSON lines (the
// native export's format) before and after compaction, objects per 100,000
// records, and a DuckDB query over the compacted month.
func benchArchive(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	b := newArchiveBench(env, scale)
	defer b.close()
	for _, step := range []func(context.Context) error{
		b.archive,     // 1. the archiver, one shard's batches in order
		b.compact,     // 2. compaction, as the rotator does it
		b.exportSizes, // 3. the export's format and stream records, gzip'd
		b.openDuckDB,  // 4. DuckDB over the compacted month: copy, open
		b.queryMonth,  // 4b. … and query it
		b.queryPoll,   // 5. the analyst's question for one poll
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return b.report(), nil
}

// archiveBatchSize is the DynamoDB event source's default batch.
const archiveBatchSize = 100

// archiveQueryRuns is how many times the month's query is timed.
const archiveQueryRuns = 5

// archivePoll is the poll of the analyst's question.
const archivePoll = "color"

// archiveBench is one run of benchArchive: its inputs, then what each step
// measured, in the order the steps fill it in.
type archiveBench struct {
	env    *stack.Env
	n      int
	bucket string
	table  string
	part   archive.Partition
	recs   []events.DynamoDBEventRecord
	log    *slog.Logger

	archiveTime             time.Duration
	before, after           []archive.File
	bytesBefore, bytesAfter int64
	dataAfter               int
	compaction              archive.Compaction
	compactTime             time.Duration
	export, streamLines     float64
	dir                     string
	db                      *archiveduckdb.DB
	syncTime, openTime      time.Duration
	queryTime               time.Duration
	groups                  int64
	read, footer            int64
}

func newArchiveBench(env *stack.Env, scale float64) *archiveBench {
	b := &archiveBench{
		env:    env,
		n:      max(1000, int(100_000*scale)),
		bucket: env.Vars["ARCHIVE_BUCKET_NAME"],
		table:  "bench-votes-2026-11",
		log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	b.part = archive.PartitionOf(b.table, time.Time{})
	b.recs = make([]events.DynamoDBEventRecord, b.n)
	for i := range b.recs {
		b.recs[i] = benchVoteRecord(b.table, i)
	}
	return b
}

// close closes the DuckDB and removes its cache.
func (b *archiveBench) close() {
	if b.db != nil {
		b.db.Close()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// archive sends one shard's batches in order through Archiver.Handle.
func (b *archiveBench) archive(ctx context.Context) error {
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: b.env.Clients.S3, Bucket: b.bucket}, Log: b.log}
	start := time.Now()
	for from := 0; from < b.n; from += archiveBatchSize {
		resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: b.recs[from:min(from+archiveBatchSize, b.n)]})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			return fmt.Errorf("archive batch at %d: %+v, %v", from, resp, err)
		}
	}
	b.archiveTime = time.Since(start)
	before, err := archives3.ListFiles(ctx, b.env.Clients.S3, b.bucket, b.part.Prefix())
	if err != nil {
		return err
	}
	b.before = before
	for _, f := range before {
		b.bytesBefore += f.Bytes
	}
	return nil
}

// compact compacts the month, as the rotator does when the month retires.
func (b *archiveBench) compact(ctx context.Context) error {
	start := time.Now()
	parts := &archives3.Partitions{S3: b.env.Clients.S3, Bucket: b.bucket, Log: b.log}
	c, err := parts.Compact(ctx, b.part, archive.DefaultCompactionPolicy, b.table, archive.Verification{At: time.Now(), OK: true, TableItems: b.n, ArchivedItems: b.n})
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	b.compaction = c
	b.compactTime = time.Since(start)
	after, err := archives3.ListFiles(ctx, b.env.Clients.S3, b.bucket, b.part.Prefix())
	if err != nil {
		return err
	}
	b.after = after
	for _, f := range after {
		if f.Key != b.part.ManifestKey() {
			b.bytesAfter += f.Bytes
			b.dataAfter++
		}
	}
	return nil
}

// exportSizes measures the export's format for the same items, and the
// same records as gzip'd stream-record JSON lines: what the archive holds
// (event id, keys, images, sequence), in a row format.
func (b *archiveBench) exportSizes(context.Context) error {
	export, err := gzipLines(len(b.recs), func(i int) any { return map[string]any{"Item": b.recs[i].Change.NewImage} })
	if err != nil {
		return err
	}
	streamLines, err := gzipLines(len(b.recs), func(i int) any { return b.recs[i] })
	if err != nil {
		return err
	}
	b.export, b.streamLines = float64(export), float64(streamLines)
	return nil
}

// gzipLines is the size of n values as gzip'd JSON lines.
func gzipLines(n int, value func(i int) any) (int, error) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	enc := json.NewEncoder(zw)
	for i := range n {
		if err := enc.Encode(value(i)); err != nil {
			return 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return gz.Len(), nil
}

// openDuckDB copies the compacted month to a local cache and opens DuckDB
// over it.
func (b *archiveBench) openDuckDB(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "ddbpipe-bench-archive-")
	if err != nil {
		return err
	}
	b.dir = dir
	cache := &archiveduckdb.Cache{Dir: dir, S3: b.env.Clients.S3, Bucket: b.bucket}
	f := archiveduckdb.Filter{Table: b.part.Table, Month: b.part.Month}
	start := time.Now()
	if _, err := cache.Sync(ctx, f); err != nil {
		return err
	}
	b.syncTime = time.Since(start)
	start = time.Now()
	db, err := archiveduckdb.Open(ctx, cache.Root(), f)
	if err != nil {
		return err
	}
	b.db = db
	b.openTime = time.Since(start)
	return nil
}

// queryMonth times votes-per-poll-per-day over the month, and checks that
// it counts every vote.
func (b *archiveBench) queryMonth(ctx context.Context) error {
	q, err := archive.LookupNamedQuery("votes-per-poll-per-day")
	if err != nil {
		return err
	}
	var counted int64
	for range archiveQueryRuns {
		start := time.Now()
		res, err := b.db.Query(ctx, q.SQL, b.part.Month)
		if err != nil {
			return err
		}
		b.queryTime += time.Since(start)
		b.groups, counted = int64(len(res.Rows)), 0
		for _, r := range res.Rows {
			counted += r[3].(int64)
		}
	}
	if counted != int64(b.n) {
		return fmt.Errorf("votes-per-poll-per-day counted %d votes, want %d", counted, b.n)
	}
	return nil
}

// queryPoll asks the analyst's question, "votes per option for poll P in
// month M": its answer must be exact, and what it reads is the column
// chunks of the columns it touches in the month's files.
func (b *archiveBench) queryPoll(ctx context.Context) error {
	want := map[string]int64{}
	for _, r := range b.recs {
		if r.Change.NewImage[ledger.AttrPollID].String() == archivePoll {
			want[r.Change.NewImage[ledger.AttrOptionID].String()]++
		}
	}
	perOption, err := archive.LookupNamedQuery("votes-per-option")
	if err != nil {
		return err
	}
	res, err := b.db.Query(ctx, perOption.SQL, b.part.Month, archivePoll)
	if err != nil {
		return err
	}
	got := map[string]int64{}
	for _, r := range res.Rows {
		got[r[0].(string)] = r[1].(int64)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("votes-per-option for %s: %v, want %v", archivePoll, got, want)
	}
	b.read, b.footer, err = queryBytes(ctx, b.env, b.bucket, b.after, "poll_id", "option_id", "event_name", "replayed")
	return err
}

// report is the section: the table of measures and the chart of bytes per
// record.
func (b *archiveBench) report() *section {
	s := &section{title: "Archive (Parquet on S3, compaction, DuckDB)"}
	n := b.n
	per := func(x float64) float64 { return x / float64(n) }
	per100k := func(objects int) float64 { return float64(objects) * 100_000 / float64(n) }
	export, streamLines := b.export, b.streamLines
	s.printf("%d vote ledger INSERTs (one month, one stream shard), archived in batches of %d through `Archiver.Handle` into versitygw.\n\n", n, archiveBatchSize)
	s.printf("| measure | value | goal |\n|---|---|---|\n")
	s.printf("| archiver throughput (one shard, batches in order) | %.0f records/s (%s) | |\n", float64(n)/b.archiveTime.Seconds(), b.archiveTime.Round(time.Millisecond))
	s.printf("| gzip'd DynamoDB-JSON lines (export format), items only | %.1f B/record | |\n", per(export))
	s.printf("| gzip'd stream records as Lambda gets them (JSON lines: event id, keys, images, sequence) | %.1f B/record | |\n", per(streamLines))
	s.printf("| Parquet, per-batch files | %.1f B/record = %.2f× export | |\n", per(float64(b.bytesBefore)), float64(b.bytesBefore)/export)
	s.printf("| Parquet, compacted | %.1f B/record = %.2f× export, %.2f× the stream records | ≤ 0.55× |\n", per(float64(b.bytesAfter)), float64(b.bytesAfter)/export, float64(b.bytesAfter)/streamLines)
	s.printf("| objects per 100,000 records before compaction | %.0f | |\n", per100k(len(b.before)))
	s.printf("| objects per 100,000 records after compaction (+ `_manifest.json`) | %.1f | ≤ 2 |\n", per100k(b.dataAfter))
	s.printf("| compaction (read %d files, merge, write %d, manifest, delete) | %s | |\n", b.compaction.Merged, b.compaction.FilesAfter, b.compactTime.Round(time.Millisecond))
	s.printf("| DuckDB: copy the compacted month to the local cache | %s | |\n", b.syncTime.Round(time.Millisecond))
	s.printf("| DuckDB: open (views over the files) | %s | |\n", b.openTime.Round(time.Millisecond))
	s.printf("| DuckDB: `votes-per-poll-per-day` over the month (%d groups, mean of %d) | %s | |\n", b.groups, archiveQueryRuns, (b.queryTime / archiveQueryRuns).Round(100*time.Microsecond))
	s.printf("| `votes-per-option` for poll %q: data read (column chunks of poll_id, option_id, event_name, replayed; no page skipped) | %.0f B per 100,000 records (%d B) | ≤ 1 KB |\n", archivePoll, float64(b.read)*100_000/float64(n), b.read)
	s.printf("| the same query: footer and page index of the month's files (read once per file) | %d B | |\n", b.footer)
	s.printf("\nThe archive stores the ledger in its typed layout (schema version 2): the vote's ids and times in columns, the keys derived\n")
	s.printf("from them, no event id; a retired month is one file of its replayed state sorted by poll, option and time, where one poll's\n")
	s.printf("votes are a few runs of a dictionary-encoded column. The answers above are checked against the generated votes: exact.\n")
	s.printf("See shared/archive/archiveparquet/size_test.go for the per-column breakdown.\n\n")
	s.charts = append(s.charts, pngchart.Chart{
		Title: "Archive bytes per vote record",
		Unit:  " B",
		Bars: []pngchart.Bar{
			{Label: "gzip'd export lines", Value: per(export)},
			{Label: "gzip'd stream records", Value: per(streamLines)},
			{Label: "Parquet, per-batch files", Value: per(float64(b.bytesBefore))},
			{Label: "Parquet, compacted", Value: per(float64(b.bytesAfter))},
			{Label: "goal (0.55× export)", Value: per(export) * 0.55},
		},
	})
	return s
}

// queryBytes adds up, over the data files listed, the compressed column
// chunks of the named columns (what a query touching only those columns
// reads at most: dictionary and data pages, no page skipped), and the
// files' footers (with the page index) that a reader reads first.
func queryBytes(ctx context.Context, env *stack.Env, bucket string, files []archive.File, columns ...string) (data, footer int64, err error) {
	want := map[string]bool{}
	for _, c := range columns {
		want[c] = true
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Key, ".parquet") {
			continue
		}
		out, err := env.Clients.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.Key)})
		if err != nil {
			return 0, 0, err
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			return 0, 0, err
		}
		pf, err := parquet.OpenFile(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", f.Key, err)
		}
		for _, rg := range pf.Metadata().RowGroups {
			for _, c := range rg.Columns {
				if want[strings.Join(c.MetaData.PathInSchema, ".")] {
					data += c.MetaData.TotalCompressedSize
				}
			}
		}
		footer += int64(len(body)) - dataEnd(pf)
	}
	return data, footer, nil
}

// dataEnd is where the file's last column chunk ends: the page index and
// the footer follow it.
func dataEnd(f *parquet.File) int64 {
	var end int64
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			start := c.MetaData.DataPageOffset
			if c.MetaData.DictionaryPageOffset > 0 && c.MetaData.DictionaryPageOffset < start {
				start = c.MetaData.DictionaryPageOffset
			}
			end = max(end, start+c.MetaData.TotalCompressedSize)
		}
	}
	return end
}

// benchVoteRecord is the stream record of the i-th vote of a ledger table,
// shaped as votesddb writes it (pk <poll>#<shard>, sk <voter>#<voteId>).
func benchVoteRecord(table string, i int) events.DynamoDBEventRecord {
	rnd := rand.New(rand.NewPCG(uint64(i), 7))
	poll := []string{"color", "best-pet", "lunch", "city"}[i%4]
	option := []string{"red", "green", "blue", "cat", "dog", "paris"}[(i*7)%6]
	voter := fmt.Sprintf("voter-%d", rnd.IntN(20000))
	voteID := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rnd.Uint32(), rnd.IntN(1<<16), rnd.IntN(1<<12), rnd.IntN(1<<12), rnd.Uint64()&(1<<48-1))
	pk, sk := fmt.Sprintf("%s#%d", poll, rnd.IntN(16)), voter+"#"+voteID
	cast := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 25 * time.Second)
	item := ledger.Item{PK: pk, SK: sk, VoteID: voteID, PollID: poll, OptionID: option, VoterID: voter, CastAt: cast, CountedAt: cast.Add(1500 * time.Millisecond)}
	img := map[string]events.DynamoDBAttributeValue{}
	for name, v := range item.Attributes() {
		img[name] = events.NewStringAttribute(v)
	}
	return events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventSource: "aws:dynamodb", EventVersion: "1.1", EventName: "INSERT",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-11-01T00:00:00.000",
		EventID:        fmt.Sprintf("%016x%016x", rnd.Uint64(), rnd.Uint64()),
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: cast.Add(time.Second).Truncate(time.Second)},
			SequenceNumber:              fmt.Sprintf("4421584500000000%012d", 17450439091+3*i),
			StreamViewType:              "NEW_AND_OLD_IMAGES",
			Keys:                        map[string]events.DynamoDBAttributeValue{ledger.AttrPK: img[ledger.AttrPK], ledger.AttrSK: img[ledger.AttrSK]},
			NewImage:                    img,
		},
	}
}
