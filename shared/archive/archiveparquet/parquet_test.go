package archiveparquet_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

func mustJSON(t testing.TB, img archive.Item) string {
	t.Helper()
	j, err := archive.ImageJSON(img)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// sampleRow is a vote's INSERT, as the archiver writes it.
func sampleRow(i int) archive.Row {
	img := archive.Item{
		"pk": fmt.Sprintf("color#%d", i%10), "sk": fmt.Sprintf("voter-%d#v%d", i, i),
		"pollId": "color", "optionId": []string{"red", "green", "blue"}[i%3], "voterId": fmt.Sprintf("voter-%d", i), "voteId": fmt.Sprintf("v%d", i),
		"castAt": time.Date(2026, 11, 14, 9, 30, i%60, i*1000, time.UTC).Format(time.RFC3339Nano), "countedAt": "2026-11-14T09:31:00Z",
	}
	keys, _ := archive.KeyJSON(img, "pk", "sk")
	newImage, _ := archive.ImageJSON(img)
	return archive.Row{
		Table: "ddbpipe-votes", Month: "2026-11", Stream: "2026-11-01T00:00:00.000", EventName: archive.EventInsert,
		SequenceNumber:          fmt.Sprintf("%d", 1000+i),
		ApproximateCreationTime: time.Date(2026, 11, 14, 9, 30, i%60, 0, time.UTC),
		Keys:                    keys, NewImage: newImage,
	}
}

// randomRows are rows of every event kind and image combination, for a
// table of each layout, with images of every attribute type.
func randomRows(t testing.TB, r *rand.Rand, table string, n int) []archive.Row {
	rows := make([]archive.Row, n)
	for i := range rows {
		img := archivetest.RandomLedgerItem(r)
		if table != "ddbpipe-votes" || r.IntN(4) == 0 {
			img = archivetest.RandomItem(r, 5)
		}
		keys := mustJSON(t, archive.Item{"pk": img["pk"], "sk": img["sk"]})
		row := archive.Row{Table: table, Month: "2026-11", Stream: fmt.Sprintf("s%d", r.IntN(2)), SequenceNumber: fmt.Sprint(r.Int64()),
			ApproximateCreationTime: time.Unix(1_790_000_000+int64(i), 0).UTC(), Keys: keys}
		switch r.IntN(5) {
		case 0:
			row.EventName, row.NewImage = archive.EventInsert, mustJSON(t, img)
		case 1:
			row.EventName, row.NewImage, row.OldImage = archive.EventModify, mustJSON(t, img), mustJSON(t, archivetest.RandomItem(r, 3))
		case 2:
			row.EventName, row.OldImage, row.TTLDelete = archive.EventRemove, mustJSON(t, img), r.IntN(2) == 0
		case 3:
			row.EventName = archive.EventRemove // keys only
		default:
			// keys that the image does not hold: stored in the keys column
			row.EventName, row.NewImage = archive.EventModify, mustJSON(t, img)
			row.Keys = mustJSON(t, archive.Item{"pk": "elsewhere"})
		}
		rows[i] = row
	}
	return rows
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	many := make([]archive.Row, 2500) // more than one write chunk
	for i := range many {
		many[i] = sampleRow(i)
	}
	remove := sampleRow(1)
	remove.EventName, remove.NewImage, remove.OldImage, remove.TTLDelete = archive.EventRemove, "", remove.NewImage, true
	modify := sampleRow(2)
	modify.EventName, modify.OldImage = archive.EventModify, mustJSON(t, archive.Item{"note": "h\u00e9llo ✓ \u0000 <&>"})
	keysOnly := sampleRow(3)
	keysOnly.EventName, keysOnly.NewImage = archive.EventRemove, ""
	r := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name string
		rows []archive.Row
	}{
		{name: "no rows", rows: []archive.Row{}},
		{name: "one insert", rows: []archive.Row{sampleRow(0)}},
		{name: "absent images stay absent", rows: []archive.Row{remove, modify, keysOnly}},
		{name: "2500 rows", rows: many},
		{name: "random ledger rows", rows: randomRows(t, r, "ddbpipe-votes", 3000)},
		{name: "random objects rows", rows: randomRows(t, r, "ddbpipe-objects", 2000)},
		{name: "random rows of a table without a layout", rows: randomRows(t, r, "ddbpipe-counters", 2000)},
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
			if len(got) != len(tt.rows) {
				t.Fatalf("round trip: got %d rows, want %d", len(got), len(tt.rows))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tt.rows[i]) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], tt.rows[i])
				}
			}
		})
	}
}

// A replayed file is sorted by its layout's SortBy columns and says so in
// its row groups' sorting_columns; its rows decode unchanged.
func TestReplayedFileIsSorted(t *testing.T) {
	rows := make([]archive.Row, 3000)
	for i := range rows {
		rows[i] = sampleRow(i)
		rows[i].Replayed = true
	}
	b, err := archiveparquet.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	got, err := archiveparquet.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows, want %d", len(got), len(rows))
	}
	option := func(r archive.Row) string {
		img, _ := archive.ParseImage(r.NewImage)
		return img["optionId"].(string)
	}
	seen := map[string]bool{}
	for i, r := range got {
		seen[r.Keys] = true
		if i > 0 && option(got[i-1]) > option(r) {
			t.Fatalf("row %d: option %s after %s: not sorted by option_id", i, option(r), option(got[i-1]))
		}
	}
	if len(seen) != len(rows) {
		t.Errorf("%d distinct rows, want %d", len(seen), len(rows))
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range f.Metadata().RowGroups[0].SortingColumns {
		names = append(names, f.Schema().Columns()[sc.ColumnIdx][0])
	}
	if want := archive.LedgerLayout.SortBy; !reflect.DeepEqual(names, want) {
		t.Errorf("sorting_columns = %v, want %v", names, want)
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
	if v, ok := f.Lookup(archiveparquet.LayoutKey); !ok || v != "ledger" {
		t.Errorf("layout metadata = %q, %v; want ledger", v, ok)
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if got := c.MetaData.Codec.String(); got != "ZSTD" {
				t.Errorf("column %v codec %s, want ZSTD", c.MetaData.PathInSchema, got)
			}
		}
	}
}

// The common columns the package documentation lists are every layout's,
// with the types it gives; each layout adds its typed columns and nothing
// else.
func TestSchemaIsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "parquet.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(f.Doc.Text(), "optional: null where")
	line := regexp.MustCompile(`(?m)^\t(\w+)\s+(optional )?(\w+)`)
	sqlType := map[string]string{"string": "string", "timestamp": "timestamp", "boolean": "boolean"}
	var want [][2]string
	for _, m := range line.FindAllStringSubmatch(table, -1) {
		want = append(want, [2]string{m[1], sqlType[m[3]]})
	}
	if len(want) != 12 {
		t.Fatalf("the package documentation lists %d common columns, want 12: %v", len(want), want)
	}
	for _, l := range archive.Layouts {
		got := map[string]string{}
		for _, c := range archiveparquet.ColumnTypes(l) {
			got[c[0]] = c[1]
		}
		for _, w := range want {
			if got[w[0]] != w[1] {
				t.Errorf("layout %s: column %s is %q, documented %q", l.Name, w[0], got[w[0]], w[1])
			}
			delete(got, w[0])
		}
		typed := map[string]string{}
		for _, c := range l.Columns {
			typed[c.Name] = c.Kind.String()
		}
		if !reflect.DeepEqual(got, typed) && !(len(got) == 0 && len(typed) == 0) {
			t.Errorf("layout %s: other columns %v, want its typed columns %v", l.Name, got, typed)
		}
	}
}

// Files written before the typed layouts (schema version 1) still decode:
// their images become type-tagged, with the types the plain JSON kept.
func TestDecodeVersion1(t *testing.T) {
	row := sampleRow(7)
	row.OldImage = mustJSON(t, archive.Item{"n": archive.Number("12"), "tags": []string{"a"}, "ok": true})
	var b bytes.Buffer
	if err := archiveparquet.EncodeV1(&b, []archive.Row{row}); err != nil {
		t.Fatal(err)
	}
	got, err := archiveparquet.Unmarshal(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := row
	want.Stream = "" // version 1 kept the event id, not the stream label
	want.OldImage = mustJSON(t, archive.Item{"n": "12", "tags": []any{"a"}, "ok": true})
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("version-1 row\n got %+v\nwant %+v", got, want)
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
