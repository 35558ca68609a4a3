package archiveparquet_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
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

// The schema, exactly as parquet-go prints it.
func TestSchemaText(t *testing.T) {
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

// docColumn is a column as a document describes it, in the Parquet
// schema's words: name, physical type, logical type, optional.
type docColumn struct {
	Name, Physical, Logical string
	Optional                bool
}

// schemaColumns reads the columns of archiveparquet.Schema().
func schemaColumns(t *testing.T) []docColumn {
	t.Helper()
	field := regexp.MustCompile(`^(required|optional) (\w+) (\w+)(?: \((\w+).*\))?;$`)
	var cols []docColumn
	for _, l := range strings.Split(archiveparquet.Schema(), "\n") {
		if m := field.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			cols = append(cols, docColumn{Name: m[3], Physical: m[2], Logical: m[4], Optional: m[1] == "optional"})
		}
	}
	if len(cols) == 0 {
		t.Fatalf("no column in the schema:\n%s", archiveparquet.Schema())
	}
	return cols
}

// docComment returns the doc comment of a Go file's package (typeName "")
// or of one of its types.
func docComment(t *testing.T, path, typeName string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if typeName == "" {
		if f.Doc == nil {
			t.Fatalf("%s has no package comment", path)
		}
		return f.Doc.Text()
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE && len(g.Specs) == 1 && g.Specs[0].(*ast.TypeSpec).Name.Name == typeName && g.Doc != nil {
			return g.Doc.Text()
		}
	}
	t.Fatalf("%s: no documented type %s", path, typeName)
	return ""
}

// tableAfter returns the tab-indented lines that follow the line holding
// header, up to the first line that is not indented.
func tableAfter(t *testing.T, doc, header string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, header)
	if !ok {
		t.Fatalf("no %q in\n%s", header, doc)
	}
	var rows [][]string
	for _, l := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(l, "\t") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// The columns the documentation lists — the archive package's Rows table
// (what analysts read) and fileRow's schema comment here — are the
// Parquet schema's: same names, order, types and nullability.
func TestSchemaIsDocumented(t *testing.T) {
	want := schemaColumns(t)

	// shared/archive's package documentation, "# Rows":
	//	column   type       value
	//	newImage string     JSON of the new image; null when absent
	archiveTypes := map[string][2]string{"string": {"binary", "STRING"}, "timestamp": {"int64", "TIMESTAMP"}, "bool": {"boolean", ""}}
	var fromArchive []docColumn
	for _, f := range tableAfter(t, docComment(t, "../archive.go", ""), "column ") {
		if len(f) < 2 {
			t.Fatalf("archive doc: row %q", f)
		}
		ty, ok := archiveTypes[f[1]]
		if !ok {
			t.Errorf("archive doc: column %s has type %q, not one of string, timestamp, bool", f[0], f[1])
		}
		fromArchive = append(fromArchive, docColumn{Name: f[0], Physical: ty[0], Logical: ty[1],
			Optional: strings.Contains(strings.Join(f[2:], " "), "null when absent")})
	}
	if !reflect.DeepEqual(fromArchive, want) {
		t.Errorf("shared/archive's package doc lists\n %+v\nthe Parquet schema has\n %+v", fromArchive, want)
	}

	// fileRow's comment:
	//	newImage  optional BYTE_ARRAY STRING (JSON text; null when absent)
	var fromFileRow []docColumn
	for _, f := range tableAfter(t, docComment(t, "parquet.go", "fileRow"), "The schema (Parquet types):") {
		c := docColumn{Name: f[0]}
		f = f[1:]
		if len(f) > 0 && f[0] == "optional" {
			c.Optional, f = true, f[1:]
		}
		if len(f) == 0 {
			t.Fatalf("fileRow doc: column %s has no type", c.Name)
		}
		c.Physical = strings.ToLower(strings.ReplaceAll(f[0], "BYTE_ARRAY", "binary"))
		if len(f) > 1 {
			c.Logical, _, _ = strings.Cut(strings.TrimSuffix(f[1], ","), "(")
		}
		fromFileRow = append(fromFileRow, c)
	}
	if !reflect.DeepEqual(fromFileRow, want) {
		t.Errorf("fileRow's comment lists\n %+v\nthe Parquet schema has\n %+v", fromFileRow, want)
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
