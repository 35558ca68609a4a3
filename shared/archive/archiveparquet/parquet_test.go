package archiveparquet_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
)

func sampleRow(i int) archive.Row {
	return archive.Row{
		Table: "ddbpipe-votes", Month: "2026-11", EventID: fmt.Sprintf("ev-%d", i), EventName: archive.EventInsert,
		SequenceNumber:          fmt.Sprintf("%d", 1000+i),
		ApproximateCreationTime: time.Date(2026, 11, 14, 9, 30, i%60, 0, time.UTC),
		Keys:                    fmt.Sprintf(`{"pk":"color#%d","sk":"v%d"}`, i%16, i),
		NewImage:                fmt.Sprintf(`{"optionId":"red","pk":"color#%d","sk":"v%d"}`, i%16, i),
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	many := make([]archive.Row, 2500) // more than one write chunk
	for i := range many {
		many[i] = sampleRow(i)
	}
	remove := sampleRow(1)
	remove.EventName, remove.NewImage, remove.OldImage, remove.TTLDelete = archive.EventRemove, "", `{"pk":"x"}`, true
	modify := sampleRow(2)
	modify.EventName, modify.OldImage = archive.EventModify, `{"note":"h\u00e9llo ✓ \u0000 <&>"}`
	modify.NewImage = `{"emptyString":""}`
	tests := []struct {
		name string
		rows []archive.Row
	}{
		{name: "no rows", rows: []archive.Row{}},
		{name: "one insert", rows: []archive.Row{sampleRow(0)}},
		{name: "absent images stay absent", rows: []archive.Row{remove, modify}},
		{name: "2500 rows", rows: many},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := archiveparquet.Marshal(tt.rows)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("PAR1")) || !bytes.HasSuffix(b, []byte("PAR1")) {
				t.Fatalf("not a Parquet file: % x…", b[:min(8, len(b))])
			}
			got, err := archiveparquet.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.rows) {
				t.Errorf("round trip: got %d rows, want %d; first got %+v", len(got), len(tt.rows), got[:min(1, len(got))])
			}
		})
	}
}

func TestFileMetadataAndCompression(t *testing.T) {
	b, err := archiveparquet.Marshal([]archive.Row{sampleRow(0)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Lookup(archiveparquet.SchemaVersionKey); !ok || v != archiveparquet.SchemaVersion {
		t.Errorf("schema version metadata = %q, %v", v, ok)
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if got := c.MetaData.Codec.String(); got != "ZSTD" {
				t.Errorf("column %v codec %s, want ZSTD", c.MetaData.PathInSchema, got)
			}
		}
	}
}

func TestSchemaIsDocumented(t *testing.T) {
	want := []string{
		"message ddbpipe_archive {",
		"required binary table (STRING);",
		"required binary month (STRING);",
		"required binary eventId (STRING);",
		"required binary eventName (STRING);",
		"required binary sequenceNumber (STRING);",
		"required int64 approximateCreationTime (TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS));",
		"required binary keys (STRING);",
		"optional binary newImage (STRING);",
		"optional binary oldImage (STRING);",
		"required boolean ttlDelete;",
		"}",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(archiveparquet.Schema()), "\n") {
		got = append(got, strings.TrimSpace(l))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schema\n got %q\nwant %q", got, want)
	}
}

func TestDecodeRejectsOtherFiles(t *testing.T) {
	type other struct {
		Table string `parquet:"table"`
		Extra int64  `parquet:"extra"`
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[other](&b)
	if _, err := w.Write([]other{{Table: "x", Extra: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := archiveparquet.Unmarshal(b.Bytes()); !errors.Is(err, archiveparquet.ErrSchema) {
		t.Errorf("other schema: %v, want ErrSchema", err)
	}
	for _, junk := range [][]byte{nil, []byte("PAR1"), []byte("not parquet at all")} {
		if _, err := archiveparquet.Unmarshal(junk); err == nil {
			t.Errorf("Unmarshal(%q) succeeded", junk)
		}
	}
}
