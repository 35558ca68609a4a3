package archiveparquet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// v1Row is a row of the files schema version 1 wrote (before the typed
// layouts), which Decode still reads. Its schema (Parquet types):
//
//	table                    BYTE_ARRAY STRING, dictionary
//	month                    BYTE_ARRAY STRING, dictionary
//	eventId                  BYTE_ARRAY STRING
//	eventName                BYTE_ARRAY STRING, dictionary
//	sequenceNumber           BYTE_ARRAY STRING
//	approximateCreationTime  INT64 TIMESTAMP(MILLIS, UTC), delta
//	keys                     BYTE_ARRAY STRING (plain JSON)
//	newImage                 optional BYTE_ARRAY STRING (plain JSON; null when absent)
//	oldImage                 optional BYTE_ARRAY STRING (plain JSON; null when absent)
//	ttlDelete                BOOLEAN
//
// Its JSON dropped DynamoDB's type tags: a number, a binary or a string set
// read back from it is a string or a list. Decode gives such values their
// nearest type (string, list, map) and the version-1 event id is dropped;
// the stream label was never stored (the object key holds it).
type v1Row struct {
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

var v1Schema = parquet.NewSchema("ddbpipe_archive", parquet.SchemaOf(v1Row{}))

// EncodeV1 writes rows in the version-1 schema, for tests of Decode and for
// the size comparison in the bench only: the archive writes version 2.
func EncodeV1(w io.Writer, rows []archive.Row) error {
	pw := parquet.NewGenericWriter[v1Row](w, v1Schema, parquet.Compression(codec),
		parquet.KeyValueMetadata(SchemaVersionKey, "1"))
	for _, r := range rows {
		plain := func(s string) (*string, error) {
			if s == "" {
				return nil, nil
			}
			img, err := archive.ParseImage(s)
			if err != nil {
				return nil, err
			}
			p, err := json.Marshal(untagged(map[string]any(img)))
			if err != nil {
				return nil, err
			}
			ps := string(p)
			return &ps, nil
		}
		k, err := plain(r.Keys)
		if err != nil {
			return err
		}
		n, err := plain(r.NewImage)
		if err != nil {
			return err
		}
		o, err := plain(r.OldImage)
		if err != nil {
			return err
		}
		if _, err := pw.Write([]v1Row{{Table: r.Table, Month: r.Month, EventID: r.Stream + "-" + r.SequenceNumber, EventName: r.EventName,
			SequenceNumber: r.SequenceNumber, ApproximateCreationTime: r.ApproximateCreationTime.UTC(), Keys: *k,
			NewImage: n, OldImage: o, TTLDelete: r.TTLDelete}}); err != nil {
			return fmt.Errorf("archiveparquet: encode v1 rows: %w", err)
		}
	}
	return pw.Close()
}

// untagged is v's plain JSON value, as version 1 stored it.
func untagged(v any) any {
	switch v := v.(type) {
	case archive.Number:
		return string(v)
	case []archive.Number:
		out := make([]string, len(v))
		for i, n := range v {
			out[i] = string(n)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = untagged(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = untagged(x)
		}
		return out
	case archive.Item:
		return untagged(map[string]any(v))
	}
	return v
}

func decodeV1(f *parquet.File) (rows []archive.Row, err error) {
	pr := parquet.NewGenericReader[v1Row](f)
	defer func() {
		if cerr := pr.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("archiveparquet: close reader: %w", cerr)
		}
	}()
	rows = make([]archive.Row, 0, f.NumRows())
	buf := make([]v1Row, 1024)
	for {
		n, rerr := pr.Read(buf)
		for _, fr := range buf[:n] {
			row, err := fromV1(fr)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		if errors.Is(rerr, io.EOF) {
			return rows, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("archiveparquet: read rows: %w", rerr)
		}
	}
}

func fromV1(f v1Row) (archive.Row, error) {
	tagged := func(p *string) (string, error) {
		if p == nil || *p == "" {
			return "", nil
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(*p)))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return "", fmt.Errorf("archiveparquet: version-1 image at sequence %s: %w", f.SequenceNumber, err)
		}
		return archive.ImageJSON(archive.Item(plainValue(m).(map[string]any)))
	}
	r := archive.Row{Table: f.Table, Month: f.Month, EventName: f.EventName, SequenceNumber: f.SequenceNumber,
		ApproximateCreationTime: f.ApproximateCreationTime.UTC(), TTLDelete: f.TTLDelete}
	var err error
	if r.Keys, err = tagged(&f.Keys); err != nil {
		return r, err
	}
	if r.NewImage, err = tagged(f.NewImage); err != nil {
		return r, err
	}
	r.OldImage, err = tagged(f.OldImage)
	return r, err
}

// plainValue gives a plain JSON value its nearest DynamoDB type.
func plainValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		return archive.Number(v.String())
	case []any:
		for i, x := range v {
			v[i] = plainValue(x)
		}
		return v
	case map[string]any:
		for k, x := range v {
			v[k] = plainValue(x)
		}
		return v
	}
	return v
}
