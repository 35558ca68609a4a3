package archiveparquet_test

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

// randomBatch is n random records of table (archivetest.RandomRecord), in
// stream order.
func randomBatch(tb testing.TB, r *rand.Rand, table string, n int) []events.DynamoDBEventRecord {
	batch := make([]events.DynamoDBEventRecord, n)
	for i := range batch {
		batch[i] = archivetest.RandomRecord(tb, r, table, i)
	}
	return batch
}

// objectsOf is what the archiver makes of a batch: its records converted
// (archivelambda.FromLambda) and grouped into objects (archive.Group).
func objectsOf(tb testing.TB, batch []events.DynamoDBEventRecord) []archive.Object {
	tb.Helper()
	recs := make([]archive.Record, len(batch))
	for i, r := range batch {
		rec, err := archivelambda.FromLambda(r)
		if err != nil {
			tb.Fatal(err)
		}
		recs[i] = rec
	}
	objs, err := archive.Group(recs)
	if err != nil {
		tb.Fatal(err)
	}
	return objs
}

// The archiver's files split the images its records held into columns;
// a file of the same rows read back from their JSON is the same, byte for
// byte, and decodes to the rows.
func TestEncodeObjectIsEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	tables := []string{"ddbpipe-votes-2026-11", "ddbpipe-objects", "ddbpipe-counters"}
	for _, table := range tables {
		t.Run(table, func(t *testing.T) {
			objs := objectsOf(t, randomBatch(t, r, table, 600))
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			for _, o := range objs {
				got, err := archiveparquet.MarshalObject(o)
				if err != nil {
					t.Fatal(err)
				}
				want, err := archiveparquet.Marshal(o.Rows)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: the file of the records' images (%d bytes) differs from the file of their rows' JSON (%d bytes)", o.Key, len(got), len(want))
				}
				rows, err := archiveparquet.Unmarshal(got)
				if err != nil || !reflect.DeepEqual(rows, o.Rows) {
					t.Fatalf("%s read back: %v", o.Key, err)
				}
			}
		})
	}
	if _, err := archiveparquet.MarshalObject(archive.Object{Key: "k", Rows: make([]archive.Row, 1)}); err == nil {
		t.Error("MarshalObject of an object without its images: no error")
	}
}

// BenchmarkImageToParquetRow measures a stream image's way into the
// archive, short of the file: a batch of 100 Lambda stream records
// converted (archivelambda.FromLambda), grouped into their object
// (archive.Group) and encoded as the Parquet rows the file's writer is
// handed. One op is one batch.
func BenchmarkImageToParquetRow(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch []events.DynamoDBEventRecord
	}{
		{"votes", archivetest.VoteBatch(0, 100)},
		{"every type", randomBatch(b, rand.New(rand.NewPCG(1, 2)), "ddbpipe-counters", 100)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				objs := objectsOf(b, bc.batch)
				if len(objs) != 1 {
					b.Fatalf("%d objects, want 1", len(objs))
				}
				if _, err := archiveparquet.ParquetRows(objs[0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bc.batch)), "ns/record")
		})
	}
}
