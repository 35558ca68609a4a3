package archiveparquet_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

// gzipLines gzips one JSON document per line, as DynamoDB's export to S3
// writes its DYNAMODB_JSON files.
func gzipLines(tb testing.TB, docs []any) int {
	tb.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	enc := json.NewEncoder(zw)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Len()
}

func rowsOf(tb testing.TB, batch []events.DynamoDBEventRecord) []archive.Row {
	tb.Helper()
	var rows []archive.Row
	for _, o := range objectsOf(tb, batch) {
		rows = append(rows, o.Rows...)
	}
	return rows
}

// TestArchiveSize measures, for the same 10,000 vote ledger records, the
// archive's Parquet bytes per record against gzip'd DynamoDB-JSON lines:
// the native export's format (items only) and the stream records as Lambda
// receives them (what the archive holds: keys, images and stream metadata).
// It logs the figures (go test -run ArchiveSize -v); the goal is
// Parquet ≤ 0.5× the export. It asserts nothing about the ratio: the
// figures are for the report (see the column breakdown it logs).
//
// With version 1's layout (every image as plain JSON, plus the stream's
// event id) a compacted file took 82.8 B/record, 1.97× the export; the
// typed ledger layout stores the vote's ids and times in their own columns,
// derives the keys from them and drops the event id. bench's archive
// section reports the figures against the goal.
//
// TestDecodeFilesWithStatistics checks that version-1 files written with
// statistics on every column (the first encoder's) still decode.
func TestArchiveSize(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	const n, batchSize = 10000, 100
	batch := archivetest.VoteBatch(0, n)
	rows := rowsOf(t, batch)

	whole, err := archiveparquet.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	batched := 0
	for start := 0; start < n; start += batchSize {
		b, err := archiveparquet.Marshal(rows[start : start+batchSize])
		if err != nil {
			t.Fatal(err)
		}
		batched += len(b)
	}
	exportDocs := make([]any, n)
	streamDocs := make([]any, n)
	for i, r := range batch {
		exportDocs[i] = map[string]any{"Item": r.Change.NewImage}
		streamDocs[i] = r
	}
	export := gzipLines(t, exportDocs)
	stream := gzipLines(t, streamDocs)

	per := func(bytes int) float64 { return float64(bytes) / n }
	t.Logf("%d vote ledger records (INSERTs, ~%d bytes of DynamoDB JSON each):", n, len(mustMarshal(t, exportDocs[0])))
	t.Logf("  gzip'd export lines (DYNAMODB_JSON, items only)  %7.1f B/record", per(export))
	t.Logf("  gzip'd stream records (Lambda JSON)              %7.1f B/record", per(stream))
	t.Logf("  Parquet, one compacted file                      %7.1f B/record  = %.2f× export, %.2f× stream", per(len(whole)), float64(len(whole))/float64(export), float64(len(whole))/float64(stream))
	t.Logf("  Parquet, files of %d records (before compaction) %7.1f B/record  = %.2f× export", batchSize, per(batched), float64(batched)/float64(export))
	f, err := parquet.OpenFile(bytes.NewReader(whole), int64(len(whole)))
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]int64{}
	var names []string
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			name := strings.Join(c.MetaData.PathInSchema, ".")
			if _, ok := cols[name]; !ok {
				names = append(names, name)
			}
			cols[name] += c.MetaData.TotalCompressedSize
		}
	}
	for _, name := range names {
		t.Logf("    %-24s %6.1f B/record", name, float64(cols[name])/n)
	}
	if f.NumRows() != n {
		t.Errorf("the Parquet file holds %d rows, want %d", f.NumRows(), n)
	}
}

func mustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodeFilesWithStatistics(t *testing.T) {
	rows := rowsOf(t, archivetest.VoteBatch(0, 50))
	// The archive's rows as the first encoder wrote them (schema version 1),
	// with parquet-go's default page statistics on every column.
	old := make([]archiveparquet.V1Row, len(rows))
	plain := func(tagged string) string {
		img, err := archive.ParseImage(tagged)
		if err != nil {
			t.Fatal(err)
		}
		return string(mustMarshal(t, img)) // a vote's attributes are all strings: plain JSON keeps them
	}
	for i, r := range rows {
		img := plain(r.NewImage)
		old[i] = archiveparquet.V1Row{Table: r.Table, Month: r.Month, EventID: "e" + r.SequenceNumber, EventName: r.EventName, SequenceNumber: r.SequenceNumber,
			ApproximateCreationTime: r.ApproximateCreationTime, Keys: plain(r.Keys), NewImage: &img}
		rows[i].Stream = "" // version 1 did not store it
	}
	var b bytes.Buffer
	schema := parquet.NewSchema("ddbpipe_archive", parquet.SchemaOf(archiveparquet.V1Row{}))
	if err := parquet.Write(&b, old, schema, parquet.DataPageStatistics(true),
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedBetterCompression}), parquet.PageBufferSize(1<<20)); err != nil {
		t.Fatal(err)
	}
	got, err := archiveparquet.Unmarshal(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("rows decoded from an earlier file differ from the rows written")
	}
	now, err := archiveparquet.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("50 rows: %d bytes with page statistics on every column, %d without them on the blobs", b.Len(), len(now))
	if len(now) >= b.Len() {
		t.Errorf("the encoder's file (%d B) is not smaller than one with statistics everywhere (%d B)", len(now), b.Len())
	}
}
