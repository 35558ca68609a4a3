// Package archiveparquet is the archive's Parquet codec: the schema of the
// archive files (fileRow) and the encoding and decoding of archive.Rows as
// zstd-compressed Parquet.
package archiveparquet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// ErrSchema: a Parquet file that is not an archive file (its columns differ
// from the documented schema).
var ErrSchema = errors.New("archiveparquet: not an archive file")

// ContentType is the media type the archive's objects are stored with.
const ContentType = "application/vnd.apache.parquet"

// SchemaVersionKey is the Parquet key-value metadata naming the row schema.
const (
	SchemaVersionKey = "ddbpipe.archive.schema"
	SchemaVersion    = "1"
)

// fileRow is archive.Row as a Parquet row. The schema (Parquet types):
//
//	table                    BYTE_ARRAY STRING, dictionary
//	month                    BYTE_ARRAY STRING, dictionary
//	eventId                  BYTE_ARRAY STRING
//	eventName                BYTE_ARRAY STRING, dictionary
//	sequenceNumber           BYTE_ARRAY STRING
//	approximateCreationTime  INT64 TIMESTAMP(MILLIS, UTC), delta
//	keys                     BYTE_ARRAY STRING (JSON text)
//	newImage                 optional BYTE_ARRAY STRING (JSON text; null when absent)
//	oldImage                 optional BYTE_ARRAY STRING (JSON text; null when absent)
//	ttlDelete                BOOLEAN
//
// Every column is zstd-compressed. The images are plain strings rather than
// the JSON logical type so that every reader (Athena's string, DuckDB's
// VARCHAR) takes them as text; json_extract works on either.
type fileRow struct {
	Table                   string    `parquet:"table,dict"`
	Month                   string    `parquet:"month,dict"`
	EventID                 string    `parquet:"eventId"`
	EventName               string    `parquet:"eventName,dict"`
	SequenceNumber          string    `parquet:"sequenceNumber"`
	ApproximateCreationTime time.Time `parquet:"approximateCreationTime,timestamp(millisecond),delta"`
	Keys                    string    `parquet:"keys"`
	NewImage                *string   `parquet:"newImage,optional"`
	OldImage                *string   `parquet:"oldImage,optional"`
	TTLDelete               bool      `parquet:"ttlDelete"`
}

// fileSchema names the message "ddbpipe_archive" rather than the Go type.
var fileSchema = parquet.NewSchema("ddbpipe_archive", parquet.SchemaOf(fileRow{}))

// Schema returns the archive files' Parquet schema, for documentation and
// for readers that check it.
func Schema() string { return fileSchema.String() }

func toFileRow(r archive.Row) fileRow {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return fileRow{
		Table: r.Table, Month: r.Month, EventID: r.EventID, EventName: r.EventName, SequenceNumber: r.SequenceNumber,
		ApproximateCreationTime: r.ApproximateCreationTime.UTC(), Keys: r.Keys,
		NewImage: opt(r.NewImage), OldImage: opt(r.OldImage), TTLDelete: r.TTLDelete,
	}
}

func fromFileRow(f fileRow) archive.Row {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return archive.Row{
		Table: f.Table, Month: f.Month, EventID: f.EventID, EventName: f.EventName, SequenceNumber: f.SequenceNumber,
		ApproximateCreationTime: f.ApproximateCreationTime.UTC(), Keys: f.Keys,
		NewImage: str(f.NewImage), OldImage: str(f.OldImage), TTLDelete: f.TTLDelete,
	}
}

// codec compresses every column. One value for the process: it pools its
// zstd encoders, which are costly to build (megabytes of tables each).
var codec = &zstd.Codec{Level: zstd.SpeedBetterCompression}

// pageSize: 1 MiB data pages (parquet-mr's default) compress a few percent
// better than parquet-go's default and still let readers skip pages.
const pageSize = 1 << 20

// maxRowsPerRowGroup keeps a compacted file's row groups to a size readers
// can skip through (128 Ki rows, a few MB of votes).
const maxRowsPerRowGroup = 128 << 10

// noBounds are the columns whose column-index bounds are not written:
// random ids and JSON documents, whose min and max prune nothing (no reader
// skips a page on "newImage > '{...}'"). Their bounds are long strings
// repeated in the column index: they made a 100-record file 16% larger
// (140 → 118 bytes per vote). The columns readers do filter on (table,
// month, eventName, sequenceNumber, approximateCreationTime) keep theirs.
// Page headers carry no statistics (parquet-go's default: the column index
// is what readers skip pages by). Readers, and Decode, read files with or
// without either alike.
var noBounds = []string{"eventId", "keys", "newImage", "oldImage"}

// Encode writes rows, in order, as one zstd-compressed Parquet file.
func Encode(w io.Writer, rows []archive.Row) error {
	opts := []parquet.WriterOption{
		fileSchema,
		parquet.Compression(codec),
		parquet.PageBufferSize(pageSize),
		parquet.MaxRowsPerRowGroup(maxRowsPerRowGroup),
		parquet.CreatedBy("ddbpipe", SchemaVersion, ""),
		parquet.KeyValueMetadata(SchemaVersionKey, SchemaVersion),
	}
	for _, col := range noBounds {
		opts = append(opts, parquet.SkipPageBounds(col))
	}
	pw := parquet.NewGenericWriter[fileRow](w, opts...)
	const chunk = 1024
	buf := make([]fileRow, 0, chunk)
	for start := 0; start < len(rows); start += chunk {
		buf = buf[:0]
		for _, r := range rows[start:min(start+chunk, len(rows))] {
			buf = append(buf, toFileRow(r))
		}
		if _, err := pw.Write(buf); err != nil {
			return fmt.Errorf("archiveparquet: encode rows: %w", err)
		}
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("archiveparquet: finish file: %w", err)
	}
	return nil
}

// Marshal is Encode into memory.
func Marshal(rows []archive.Row) ([]byte, error) {
	var b bytes.Buffer
	if err := Encode(&b, rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads every row of an archive file, checking first that its
// columns are the documented schema (ErrSchema otherwise).
func Decode(r io.ReaderAt, size int64) (rows []archive.Row, err error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("archiveparquet: open file: %w", err)
	}
	if !parquet.EqualNodes(f.Schema(), fileSchema) {
		return nil, fmt.Errorf("%w: columns %s", ErrSchema, strings.Join(columnNames(f.Schema()), ", "))
	}
	pr := parquet.NewGenericReader[fileRow](f)
	defer func() {
		if cerr := pr.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("archiveparquet: close reader: %w", cerr)
		}
	}()
	rows = make([]archive.Row, 0, f.NumRows())
	buf := make([]fileRow, 1024)
	for {
		n, rerr := pr.Read(buf)
		for _, fr := range buf[:n] {
			rows = append(rows, fromFileRow(fr))
		}
		if errors.Is(rerr, io.EOF) {
			return rows, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("archiveparquet: read rows: %w", rerr)
		}
	}
}

// Unmarshal is Decode from memory.
func Unmarshal(data []byte) ([]archive.Row, error) {
	return Decode(bytes.NewReader(data), int64(len(data)))
}

func columnNames(s *parquet.Schema) []string {
	var names []string
	for _, f := range s.Fields() {
		names = append(names, f.Name())
	}
	return names
}
