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

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/tools/pngchart"
)

// benchArchive measures the cold tier on one month of vote ledger records:
// the archiver's throughput through its Lambda handler into the local S3,
// the archive's bytes per record against gzip'd DynamoDB-JSON lines (the
// native export's format) before and after compaction, objects per 100,000
// records, and a DuckDB query over the compacted month.
func benchArchive(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	n := max(1000, int(100_000*scale))
	const batchSize = 100 // the DynamoDB event source's default batch
	bucket := env.Vars["ARCHIVE_BUCKET_NAME"]
	table := "bench-votes-2026-11"
	part := archive.PartitionOf(table, time.Time{})
	s := &section{title: "Archive (Parquet on S3, compaction, DuckDB)"}

	// 1. The archiver, one shard's batches in order, through Handle.
	recs := make([]events.DynamoDBEventRecord, n)
	for i := range recs {
		recs[i] = benchVoteRecord(table, i)
	}
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: env.Clients.S3, Bucket: bucket}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	start := time.Now()
	for from := 0; from < n; from += batchSize {
		resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: recs[from:min(from+batchSize, n)]})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			return nil, fmt.Errorf("archive batch at %d: %+v, %v", from, resp, err)
		}
	}
	archiveTime := time.Since(start)
	before, err := archives3.ListFiles(ctx, env.Clients.S3, bucket, part.Prefix())
	if err != nil {
		return nil, err
	}
	var bytesBefore int64
	for _, f := range before {
		bytesBefore += f.Bytes
	}

	// 2. Compaction, as the rotator does it when the month retires.
	start = time.Now()
	parts := &archives3.Partitions{S3: env.Clients.S3, Bucket: bucket, Log: a.Log}
	c, err := parts.Compact(ctx, part, archive.DefaultCompactionPolicy, table, archive.Verification{At: time.Now(), OK: true, TableItems: n, ArchivedItems: n})
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	compactTime := time.Since(start)
	after, err := archives3.ListFiles(ctx, env.Clients.S3, bucket, part.Prefix())
	if err != nil {
		return nil, err
	}
	var bytesAfter int64
	var dataAfter int
	for _, f := range after {
		if f.Key != part.ManifestKey() {
			bytesAfter += f.Bytes
			dataAfter++
		}
	}

	// 3. The export's format for the same items.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	enc := json.NewEncoder(zw)
	for _, r := range recs {
		if err := enc.Encode(map[string]any{"Item": r.Change.NewImage}); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	export := float64(gz.Len())

	// 3b. The same records as gzip'd stream-record JSON lines: what the
	// archive holds (event id, keys, images, sequence), in a row format.
	gz.Reset()
	zw = gzip.NewWriter(&gz)
	enc = json.NewEncoder(zw)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	streamLines := float64(gz.Len())

	// 4. DuckDB over the compacted month: copy, open, query.
	dir, err := os.MkdirTemp("", "ddbpipe-bench-archive-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cache := &archiveduckdb.Cache{Dir: dir, S3: env.Clients.S3, Bucket: bucket}
	f := archiveduckdb.Filter{Table: part.Table, Month: part.Month}
	start = time.Now()
	if _, err := cache.Sync(ctx, f); err != nil {
		return nil, err
	}
	syncTime := time.Since(start)
	start = time.Now()
	db, err := archiveduckdb.Open(ctx, cache.Root(), f)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	openTime := time.Since(start)
	q, err := archive.LookupNamedQuery("votes-per-poll-per-day")
	if err != nil {
		return nil, err
	}
	var queryTime time.Duration
	var groups, counted int64
	const runs = 5
	for range runs {
		start = time.Now()
		res, err := db.Query(ctx, q.SQL, part.Month)
		if err != nil {
			return nil, err
		}
		queryTime += time.Since(start)
		groups, counted = int64(len(res.Rows)), 0
		for _, r := range res.Rows {
			counted += r[3].(int64)
		}
	}
	if counted != int64(n) {
		return nil, fmt.Errorf("votes-per-poll-per-day counted %d votes, want %d", counted, n)
	}

	// 5. The analyst's question, "votes per option for poll P in month M":
	// its answer must be exact, and what it reads is the column chunks of
	// the columns it touches in the month's files.
	const poll = "color"
	want := map[string]int64{}
	for _, r := range recs {
		if r.Change.NewImage["pollId"].String() == poll {
			want[r.Change.NewImage["optionId"].String()]++
		}
	}
	perOption, err := archive.LookupNamedQuery("votes-per-option")
	if err != nil {
		return nil, err
	}
	res, err := db.Query(ctx, perOption.SQL, part.Month, poll)
	if err != nil {
		return nil, err
	}
	got := map[string]int64{}
	for _, r := range res.Rows {
		got[r[0].(string)] = r[1].(int64)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return nil, fmt.Errorf("votes-per-option for %s: %v, want %v", poll, got, want)
	}
	read, footer, err := queryBytes(ctx, env, bucket, after, "poll_id", "option_id", "event_name", "replayed")
	if err != nil {
		return nil, err
	}

	per := func(b float64) float64 { return b / float64(n) }
	per100k := func(objects int) float64 { return float64(objects) * 100_000 / float64(n) }
	s.printf("%d vote ledger INSERTs (one month, one stream shard), archived in batches of %d through `Archiver.Handle` into versitygw.\n\n", n, batchSize)
	s.printf("| measure | value | goal |\n|---|---|---|\n")
	s.printf("| archiver throughput (one shard, batches in order) | %.0f records/s (%s) | |\n", float64(n)/archiveTime.Seconds(), archiveTime.Round(time.Millisecond))
	s.printf("| gzip'd DynamoDB-JSON lines (export format), items only | %.1f B/record | |\n", per(export))
	s.printf("| gzip'd stream records as Lambda gets them (JSON lines: event id, keys, images, sequence) | %.1f B/record | |\n", per(streamLines))
	s.printf("| Parquet, per-batch files | %.1f B/record = %.2f× export | |\n", per(float64(bytesBefore)), float64(bytesBefore)/export)
	s.printf("| Parquet, compacted | %.1f B/record = %.2f× export, %.2f× the stream records | ≤ 0.55× |\n", per(float64(bytesAfter)), float64(bytesAfter)/export, float64(bytesAfter)/streamLines)
	s.printf("| objects per 100,000 records before compaction | %.0f | |\n", per100k(len(before)))
	s.printf("| objects per 100,000 records after compaction (+ `_manifest.json`) | %.1f | ≤ 2 |\n", per100k(dataAfter))
	s.printf("| compaction (read %d files, merge, write %d, manifest, delete) | %s | |\n", c.Merged, c.FilesAfter, compactTime.Round(time.Millisecond))
	s.printf("| DuckDB: copy the compacted month to the local cache | %s | |\n", syncTime.Round(time.Millisecond))
	s.printf("| DuckDB: open (views over the files) | %s | |\n", openTime.Round(time.Millisecond))
	s.printf("| DuckDB: `votes-per-poll-per-day` over the month (%d groups, mean of %d) | %s | |\n", groups, runs, (queryTime / runs).Round(100*time.Microsecond))
	s.printf("| `votes-per-option` for poll %q: data read (column chunks of poll_id, option_id, event_name, replayed; no page skipped) | %.0f B per 100,000 records (%d B) | ≤ 1 KB |\n", poll, float64(read)*100_000/float64(n), read)
	s.printf("| the same query: footer and page index of the month's files (read once per file) | %d B | |\n", footer)
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
			{Label: "Parquet, per-batch files", Value: per(float64(bytesBefore))},
			{Label: "Parquet, compacted", Value: per(float64(bytesAfter))},
			{Label: "goal (0.55× export)", Value: per(export) * 0.55},
		},
	})
	return s, nil
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
// shaped as dynamostore writes it (pk <poll>#<shard>, sk <voter>#<voteId>).
func benchVoteRecord(table string, i int) events.DynamoDBEventRecord {
	rnd := rand.New(rand.NewPCG(uint64(i), 7))
	poll := []string{"color", "best-pet", "lunch", "city"}[i%4]
	option := []string{"red", "green", "blue", "cat", "dog", "paris"}[(i*7)%6]
	voter := fmt.Sprintf("voter-%d", rnd.IntN(20000))
	voteID := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rnd.Uint32(), rnd.IntN(1<<16), rnd.IntN(1<<12), rnd.IntN(1<<12), rnd.Uint64()&(1<<48-1))
	pk, sk := fmt.Sprintf("%s#%d", poll, rnd.IntN(16)), voter+"#"+voteID
	cast := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 25 * time.Second)
	s := events.NewStringAttribute
	return events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventSource: "aws:dynamodb", EventVersion: "1.1", EventName: "INSERT",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-11-01T00:00:00.000",
		EventID:        fmt.Sprintf("%016x%016x", rnd.Uint64(), rnd.Uint64()),
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: cast.Add(time.Second).Truncate(time.Second)},
			SequenceNumber:              fmt.Sprintf("4421584500000000%012d", 17450439091+3*i),
			StreamViewType:              "NEW_AND_OLD_IMAGES",
			Keys:                        map[string]events.DynamoDBAttributeValue{"pk": s(pk), "sk": s(sk)},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"pk": s(pk), "sk": s(sk), "voteId": s(voteID), "pollId": s(poll), "optionId": s(option), "voterId": s(voter),
				"castAt":    s(cast.Format(time.RFC3339Nano)),
				"countedAt": s(cast.Add(1500 * time.Millisecond).Format(time.RFC3339Nano)),
			},
		},
	}
}
