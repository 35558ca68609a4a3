package archive

import (
	"context"
	"fmt"
	"strings"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// maxSequenceDigits: DynamoDB Streams sequence numbers are 21 to 40 digits.
const maxSequenceDigits = 40

// PadSequence left-pads a sequence number with zeros to 40 digits, so that
// keys holding it sort as the numbers do (ledger.CompareSeq).
func PadSequence(seq string) string {
	if len(seq) >= maxSequenceDigits {
		return seq
	}
	return strings.Repeat("0", maxSequenceDigits-len(seq)) + seq
}

// ObjectKey names the object holding a run of one stream's records in a
// partition, from the run's first sequence number:
//
//	table=<base>/month=<YYYY-MM>/stream-<label>-<first sequence, 40 digits>.parquet
//
// The key depends only on where the run starts, not where it ends. A batch
// that is retried always starts at a record whose object key it recomputes
// (Lambda resumes at the reported sequence number, or re-sends the batch, or
// splits it in two), so the retry overwrites what the failed attempt may have
// written even when the retried batch is shorter or longer: naming the
// object by (first, last) would leave the first attempt's file beside the
// retry's and duplicate its rows. The range is kept in the object's
// metadata and in the manifest instead.
//
// Objects sit directly in the partition folder (no shard= sub-folder), where
// Athena, Glue partition projection and DuckDB's hive globs all find them.
// A Lambda stream event does not name its shard; sequence numbers are
// unique across a stream's shards, so the stream label stands in for it.
func ObjectKey(p Partition, stream, firstSequence string) string {
	return p.Prefix() + "stream-" + safeLabel(stream) + "-" + PadSequence(firstSequence) + ".parquet"
}

// safeLabel keeps the characters of a stream label that need no escaping in
// an S3 key or a URL ("2026-11-01T00:00:00.000" → "2026-11-01T000000.000").
func safeLabel(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return -1
	}, s)
}

// Object is one file the archiver writes: a run of consecutive records of
// one stream that fall in one partition.
type Object struct {
	Key           string
	Partition     Partition
	Stream        string
	FirstSequence string
	LastSequence  string // the greatest sequence number in Rows
	Rows          []Row
	// Images are, for each of Rows, the image its typed columns describe
	// (the new image, else the old one, else the keys) as its record held
	// it, so that the file's encoder splits the record's values into
	// columns rather than read them back from the row's JSON.
	Images []Item
}

// ObjectWriter stores the archiver's objects: it writes an Object's rows
// as one file at o.Key, replacing any file there (a retried batch rewrites
// the same key), and returns the file as a manifest records it.
// shared/archive/archives3 implements it over S3.
type ObjectWriter interface {
	WriteObject(ctx context.Context, o Object) (File, error)
}

// RecordError reports the first record of a batch that cannot be archived:
// a poison record. Its sequence number is where the batch failed.
type RecordError struct {
	Index          int
	SequenceNumber string
	Err            error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("archive: record %d (sequence %s): %v", e.Index, e.SequenceNumber, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Group turns a batch of records, in stream order, into the objects that
// hold them: one per run of consecutive records of the same stream and
// partition (a monthly table's batch is one run; the objects table's batch
// splits where the month turns).
//
// When a record cannot be archived, Group returns the objects of the records
// before it and a *RecordError for it: those objects may be written, and the
// batch fails at the poison record's sequence number, so that the event
// source's retries, bisection and on-failure destination deal with it and
// the records after it.
func Group(recs []Record) ([]Object, error) {
	var objs []Object
	for i, r := range recs {
		if r.Stream == "" || safeLabel(r.Stream) == "" {
			return objs, &RecordError{Index: i, SequenceNumber: r.SequenceNumber, Err: fmt.Errorf("%w: no stream label", ErrInvalidRecord)}
		}
		row, err := NewRow(r)
		if err != nil {
			return objs, &RecordError{Index: i, SequenceNumber: r.SequenceNumber, Err: err}
		}
		p := Partition{Table: row.Table, Month: row.Month}
		if n := len(objs); n > 0 && objs[n-1].Partition == p && objs[n-1].Stream == r.Stream {
			o := &objs[n-1]
			o.Rows, o.Images = append(o.Rows, row), append(o.Images, r.mainImage())
			if ledger.CompareSeq(r.SequenceNumber, o.LastSequence) > 0 {
				o.LastSequence = r.SequenceNumber
			}
			continue
		}
		objs = append(objs, Object{
			Key: ObjectKey(p, r.Stream, r.SequenceNumber), Partition: p, Stream: r.Stream,
			FirstSequence: r.SequenceNumber, LastSequence: r.SequenceNumber, Rows: []Row{row}, Images: []Item{r.mainImage()},
		})
	}
	return objs, nil
}
