package archiveduckdb_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
)

var (
	nov = time.Date(2026, 11, 1, 0, 5, 0, 0, time.UTC)
	dec = time.Date(2026, 12, 1, 0, 5, 0, 0, time.UTC)
)

// mustLedgerArchive writes two months of vote ledgers (November's in
// batches of 10, December's in one batch) and a few objects-table changes
// into a local folder, through the archiver, and returns the folder and the
// votes.
func mustLedgerArchive(t *testing.T) (string, []vote) {
	t.Helper()
	dir := t.TempDir()
	put := dirPutter{dir}
	novVotes := votes("ddbpipe-votes-2026-11", nov, 120)
	decVotes := votes("ddbpipe-votes-2026-12", dec, 45)
	mustArchive(t, put, "local", novVotes, 10)
	mustArchive(t, put, "local", decVotes, 100)

	s := events.NewStringAttribute
	v1 := map[string]events.DynamoDBAttributeValue{"pk": s("docs/a.txt"), "sk": s("v#1"), "size": events.NewNumberAttribute("12"), "kind": s("inline")}
	v2 := map[string]events.DynamoDBAttributeValue{
		"pk": s("docs/a.txt"), "sk": s("v#1"), "size": events.NewNumberAttribute("14"), "kind": s("inline"),
		"note": s("hello"), "rev": events.NewNumberAttribute("2"), "flag": events.NewBooleanAttribute(true),
	}
	other := map[string]events.DynamoDBAttributeValue{"pk": s("docs/b.txt"), "sk": s("v#1")}
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: put, Bucket: "local"}}
	res := a.Archive(t.Context(), []events.DynamoDBEventRecord{
		objectChange(1, "INSERT", "docs/a.txt", "v#1", at, v1, nil),
		objectChange(2, "INSERT", "docs/b.txt", "v#1", at, other, nil),
		objectChange(3, "MODIFY", "docs/a.txt", "v#1", at.Add(time.Hour), v2, v1),
		objectChange(4, "REMOVE", "docs/a.txt", "v#1", at.Add(72*time.Hour), nil, v2),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return dir, append(novVotes, decVotes...)
}

func mustOpen(t *testing.T, dir string, f archiveduckdb.Filter) *archiveduckdb.DB {
	t.Helper()
	db, err := archiveduckdb.Open(t.Context(), dir, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustQuery(t *testing.T, db *archiveduckdb.DB, sql string, args ...any) *archiveduckdb.Result {
	t.Helper()
	res, err := db.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// duckType is the DuckDB type of a column of an Athena type (ColumnTypes),
// as a view shows it.
var duckType = map[string]string{"string": "VARCHAR", "bigint": "BIGINT", "int": "INTEGER", "boolean": "BOOLEAN", "timestamp": "TIMESTAMP"}

// TestSchema reads the archiver's files with DuckDB: the columns are
// archiveparquet.ColumnTypes of the table's layout, in order, with the
// types Athena's Glue tables give them; the files' UTC timestamps (DuckDB's
// TIMESTAMP WITH TIME ZONE) are plain TIMESTAMPs in the views.
func TestSchema(t *testing.T) {
	dir, _ := mustLedgerArchive(t)
	db := mustOpen(t, dir, archiveduckdb.Filter{})
	all := map[string]string{}
	for _, tt := range []struct {
		view, table string
		layout      archive.Layout
	}{
		{"votes", "ddbpipe-votes", archive.LedgerLayout},
		{"objects", "ddbpipe-objects", archive.ObjectsLayout},
	} {
		var want, wantFile [][]any
		for _, c := range archiveparquet.ColumnTypes(tt.layout) {
			typ := duckType[c[1]]
			want = append(want, []any{c[0], typ})
			if typ == "TIMESTAMP" {
				typ = "TIMESTAMP WITH TIME ZONE"
			}
			wantFile = append(wantFile, []any{c[0], typ})
			all[c[0]] = duckType[c[1]]
		}
		// The file itself, with no Hive partitioning: what any reader sees.
		file := filepath.Join(dir, "table="+tt.table, "month=2026-11", "*.parquet")
		got := mustQuery(t, db, "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))", file)
		if !reflect.DeepEqual(got.Rows, wantFile) {
			t.Errorf("%s file columns\n got %v\nwant %v", tt.table, got.Rows, wantFile)
		}
		got = mustQuery(t, db, "SELECT column_name, column_type FROM (DESCRIBE "+tt.view+")")
		if !reflect.DeepEqual(got.Rows, want) {
			t.Errorf("view %s columns\n got %v\nwant %v", tt.view, got.Rows, want)
		}
	}
	// The view over everything: every table's columns, by name.
	got := mustQuery(t, db, "SELECT column_name, column_type FROM (DESCRIBE archive)")
	gotAll := map[string]string{}
	for _, r := range got.Rows {
		gotAll[r[0].(string)] = r[1].(string)
	}
	if !reflect.DeepEqual(gotAll, all) {
		t.Errorf("view archive columns\n got %v\nwant %v", gotAll, all)
	}
}

func TestViewsAndCounts(t *testing.T) {
	dir, vs := mustLedgerArchive(t)
	db := mustOpen(t, dir, archiveduckdb.Filter{})
	var names []string
	for _, v := range db.Views {
		names = append(names, v.Name)
	}
	if want := []string{"objects", "votes", "archive"}; !reflect.DeepEqual(names, want) {
		t.Errorf("views %v, want %v", names, want)
	}

	wantPerPoll := map[string]int64{}
	for _, v := range vs {
		wantPerPoll[v.poll+"/"+v.table[len(v.table)-7:]]++
	}
	res := mustQuery(t, db, `SELECT poll_id || '/' || month, count(*) FROM votes GROUP BY 1`)
	gotPerPoll := map[string]int64{}
	for _, r := range res.Rows {
		gotPerPoll[r[0].(string)] = r[1].(int64)
	}
	if !reflect.DeepEqual(gotPerPoll, wantPerPoll) {
		t.Errorf("votes per poll and month\n got %v\nwant %v", gotPerPoll, wantPerPoll)
	}

	tests := []struct {
		name, sql string
		want      int64
	}{
		{"every row", "SELECT count(*) FROM archive", 132 + 49 + 4},
		{"hive partition", "SELECT count(*) FROM archive WHERE month = '2026-11'", 132 + 4},
		{"table column", `SELECT count(*) FROM archive WHERE "table" = 'ddbpipe-objects'`, 4},
		{"typed column", `SELECT count(*) FROM votes WHERE poll_id = 'lunch'`, 40 + 15},
		{"sk forms", `SELECT count(*) FROM votes WHERE sk_form = 2 AND poll_id = '` + onePerVoterPoll + `'`, 12 + 4},
		{"json_extract_scalar as in Athena", `SELECT count(*) FROM objects WHERE json_extract_scalar(extra, '$.note.S') = 'hello'`, 2},
		{"json_extract_scalar of an object", `SELECT count(*) FROM objects WHERE json_extract_scalar(extra, '$.note') IS NOT NULL`, 0},
		{"attr of a string", `SELECT count(*) FROM objects WHERE attr(extra, 'note') = 'hello'`, 2},
		{"attr of a number", `SELECT count(*) FROM objects WHERE attr(extra, 'rev') = '2'`, 2},
		{"attr of a boolean", `SELECT count(*) FROM objects WHERE attr(extra, 'flag') = 'true'`, 2},
		{"attr of a missing attribute", `SELECT count(*) FROM objects WHERE attr(extra, 'nope') IS NOT NULL`, 0},
		{"object keys", `SELECT count(*) FROM objects WHERE object_key = 'docs/a.txt'`, 3},
		{"old images", `SELECT count(*) FROM objects WHERE old_image IS NOT NULL AND attr(old_image, 'pk') = 'docs/a.txt'`, 1},
		{"sequence order", `SELECT count(*) FROM (SELECT seq_order(sequence_number) AS s, lag(s) OVER (ORDER BY s) AS p FROM votes WHERE month = '2026-11') WHERE p >= s`, 0},
		{"recorded_at is UTC", `SELECT count(*) FROM votes WHERE recorded_at = TIMESTAMP '2026-11-01 00:05:02'`, 1},
		{"cast_at is UTC", `SELECT count(*) FROM votes WHERE cast_at = TIMESTAMP '2026-11-01 00:05:00'`, 1},
		{"counted_at is UTC", `SELECT count(*) FROM votes WHERE counted_at = TIMESTAMP '2026-11-01 00:05:02'`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustQuery(t, db, tt.sql)
			if got := res.Rows[0][0].(int64); got != tt.want {
				t.Errorf("%s = %d, want %d", tt.sql, got, tt.want)
			}
		})
	}

	// A filter narrows the views to one table and month.
	dbNov := mustOpen(t, dir, archiveduckdb.Filter{Table: "votes", Month: "2026-11"})
	if res := mustQuery(t, dbNov, "SELECT count(*) FROM archive"); res.Rows[0][0].(int64) != 132 {
		t.Errorf("filtered archive holds %v rows, want 132", res.Rows[0][0])
	}
}

// TestNamedQueries runs the named queries (the SQL template.yaml gives
// Athena) against DuckDB over the archiver's files of two months; the
// integration test runs them over a compacted month too.
func TestNamedQueries(t *testing.T) {
	dir, vs := mustLedgerArchive(t)
	db := mustOpen(t, dir, archiveduckdb.Filter{})
	checkNamedQueries(t, db, vs, "2026-11")
	checkNamedQueries(t, db, vs, "2026-12")
}

// TestOutdated: files of schema version 1 in an old cache are left out and
// listed, the rest answers; a cache of old files only is empty, and says why.
func TestOutdated(t *testing.T) {
	dir, _ := mustLedgerArchive(t)
	old := filepath.Join(dir, "table=ddbpipe-votes", "month=2026-10", "stream-old-0001.parquet")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	r, err := archive.NewRow(archive.Record{Table: "ddbpipe-votes-2026-10", EventID: "e7", EventName: "INSERT", SequenceNumber: "7",
		Stream: "s", CreatedAt: time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC), Keys: archive.Item{"pk": "p#1", "sk": "v"}, NewImage: archive.Item{"pk": "p#1", "sk": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := archiveparquet.EncodeV1(&b, []archive.Row{r}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	db := mustOpen(t, dir, archiveduckdb.Filter{})
	if !reflect.DeepEqual(db.Outdated, []string{old}) {
		t.Errorf("outdated %v, want %v", db.Outdated, []string{old})
	}
	if res := mustQuery(t, db, "SELECT count(*) FROM votes"); res.Rows[0][0].(int64) != 181 {
		t.Errorf("votes count = %v, want 181", res.Rows[0][0])
	}
	_, err = archiveduckdb.Open(t.Context(), dir, archiveduckdb.Filter{Month: "2026-10"})
	if !errors.Is(err, archiveduckdb.ErrEmpty) || !strings.Contains(err.Error(), "older schema") {
		t.Errorf("Open over old files only: %v, want ErrEmpty saying why", err)
	}
}

func TestQueryErrors(t *testing.T) {
	dir, _ := mustLedgerArchive(t)
	db := mustOpen(t, dir, archiveduckdb.Filter{})
	for _, sql := range []string{
		"SELEC count(*) FROM votes",
		"SELECT nosuchcolumn FROM votes",
		"SELECT * FROM nosuchview",
		"SELECT CAST(poll_id AS INTEGER) FROM votes",
	} {
		_, err := db.Query(t.Context(), sql)
		var qe *archiveduckdb.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%s: error %v, want a *QueryError", sql, err)
			continue
		}
		if qe.SQL != sql || !strings.Contains(err.Error(), sql) {
			t.Errorf("%s: the error does not show the SQL: %v", sql, err)
		}
	}
	// The database still answers after a failed query.
	if res := mustQuery(t, db, "SELECT count(*) FROM votes"); res.Rows[0][0].(int64) != 181 {
		t.Errorf("count after errors = %v", res.Rows[0][0])
	}
}

func TestOpenErrors(t *testing.T) {
	dir, _ := mustLedgerArchive(t)
	tests := []struct {
		name string
		dir  string
		f    archiveduckdb.Filter
		want error
	}{
		{"no folder", filepath.Join(t.TempDir(), "none"), archiveduckdb.Filter{}, archiveduckdb.ErrEmpty},
		{"empty folder", t.TempDir(), archiveduckdb.Filter{}, archiveduckdb.ErrEmpty},
		{"unknown table", dir, archiveduckdb.Filter{Table: "ledger"}, archiveduckdb.ErrUnknownTable},
		{"month with no data", dir, archiveduckdb.Filter{Month: "2025-01"}, archiveduckdb.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := archiveduckdb.Open(t.Context(), tt.dir, tt.f)
			if err == nil {
				db.Close()
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Open = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestNotParquet: a file that is not Parquet in a partition is left out
// (and listed), the rest still answers; a damaged Parquet file fails Open
// with the file named.
func TestNotParquet(t *testing.T) {
	dir, _ := mustLedgerArchive(t)
	bad := filepath.Join(dir, "table=ddbpipe-votes", "month=2026-12", "stream-x-0001.parquet")
	if err := os.WriteFile(bad, []byte(`{"not":"parquet"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := mustOpen(t, dir, archiveduckdb.Filter{})
	if !reflect.DeepEqual(db.Skipped, []string{bad}) {
		t.Errorf("skipped %v, want %v", db.Skipped, []string{bad})
	}
	if res := mustQuery(t, db, "SELECT count(*) FROM votes"); res.Rows[0][0].(int64) != 181 {
		t.Errorf("votes count = %v, want 181", res.Rows[0][0])
	}

	// PAR1 at both ends, garbage between.
	damaged := "PAR1" + strings.Repeat("x", 64) + "\x10\x00\x00\x00PAR1"
	if err := os.WriteFile(bad, []byte(damaged), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := archiveduckdb.Open(t.Context(), dir, archiveduckdb.Filter{})
	if err == nil || !strings.Contains(err.Error(), "stream-x-0001.parquet") {
		t.Errorf("Open over a damaged file: %v, want an error naming it", err)
	}
	// The other tables open.
	db = mustOpen(t, dir, archiveduckdb.Filter{Table: "objects"})
	if res := mustQuery(t, db, "SELECT count(*) FROM objects"); res.Rows[0][0].(int64) != 4 {
		t.Errorf("objects count = %v, want 4", res.Rows[0][0])
	}
}

// TestOddNames: table names, attribute names and values with quotes,
// spaces, dots and non-ASCII letters go through views, macros and
// parameters unharmed.
func TestOddNames(t *testing.T) {
	dir := t.TempDir()
	table := `it's a "table".ü`
	s := events.NewStringAttribute
	img := map[string]events.DynamoDBAttributeValue{
		"pk": s("a'b\"c"), "sk": s("x/y z"), `we"ird.name`: s("dotted 'value'"), "ü ñ": s("unicode"),
	}
	rec := events.DynamoDBEventRecord{
		EventName: "INSERT", EventID: "odd-1",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-11-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: nov},
			SequenceNumber:              "42",
			Keys:                        map[string]events.DynamoDBAttributeValue{"pk": img["pk"], "sk": img["sk"]},
			NewImage:                    img,
		},
	}
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: dirPutter{dir}, Bucket: "local"}}
	if res := a.Archive(t.Context(), []events.DynamoDBEventRecord{rec}); res.Err != nil {
		t.Fatal(res.Err)
	}
	db := mustOpen(t, dir, archiveduckdb.Filter{Table: table})
	if len(db.Views) != 2 || db.Views[0].Name != "it_s_a_table" {
		t.Fatalf("views %+v, want it_s_a_table and archive", db.Views)
	}
	view := db.Views[0].Name
	res := mustQuery(t, db, `SELECT "table", attr(extra, 'we"ird.name'), attr(extra, 'ü ñ'), attr(keys, 'pk')
		FROM `+quote(view)+` WHERE attr(keys, 'sk') = ?`, "x/y z")
	want := [][]any{{table, "dotted 'value'", "unicode", `a'b"c`}}
	if !reflect.DeepEqual(res.Rows, want) {
		t.Errorf("odd names\n got %q\nwant %q", res.Rows, want)
	}
}

func quote(ident string) string { return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"` }

func TestViewNames(t *testing.T) {
	tests := []struct {
		name   string
		tables []string
		want   map[string]string
	}{
		{"stack tables", []string{"ddbpipe-votes", "ddbpipe-objects"}, map[string]string{"ddbpipe-votes": "votes", "ddbpipe-objects": "objects"}},
		{"two stacks", []string{"a-votes", "b-votes", "a-objects"}, map[string]string{"a-votes": "a_votes", "b-votes": "b_votes", "a-objects": "objects"}},
		{"no dash", []string{"Ledger"}, map[string]string{"Ledger": "ledger"}},
		{"reserved name", []string{"x-archive"}, map[string]string{"x-archive": "x_archive"}},
		{"digits and dots", []string{"2026.data"}, map[string]string{"2026.data": "t_2026_data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := archiveduckdb.ViewNames(tt.tables); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ViewNames(%v) = %v, want %v", tt.tables, got, tt.want)
			}
		})
	}
}

// TestOpenKnownTablesEmpty: the stack's tables have views before the
// archive holds a file of theirs, empty and with the columns their files
// would give, so queries and named queries answer no rows.
func TestOpenKnownTablesEmpty(t *testing.T) {
	dir, _ := mustLedgerArchive(t)
	full := mustOpen(t, dir, archiveduckdb.Filter{})
	known := []string{"ddbpipe-votes", "ddbpipe-objects"}
	for _, tt := range []struct {
		name string
		dir  string
	}{
		{"no folder", filepath.Join(t.TempDir(), "none")},
		{"empty folder", t.TempDir()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := archiveduckdb.Open(t.Context(), tt.dir, archiveduckdb.Filter{}, known...)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, view := range []string{"votes", "objects", "archive"} {
				describe := "SELECT column_name, column_type FROM (DESCRIBE " + view + ")"
				got, want := mustQuery(t, db, describe), mustQuery(t, full, describe)
				if view == "archive" {
					// By name: the order of a union's columns is its own.
					got.Rows, want.Rows = sortedRows(got.Rows), sortedRows(want.Rows)
				}
				if !reflect.DeepEqual(got.Rows, want.Rows) {
					t.Errorf("empty view %s columns\n got %v\nwant %v", view, got.Rows, want.Rows)
				}
				if n := mustQuery(t, db, "SELECT count(*) FROM "+view).Rows[0][0]; n != int64(0) {
					t.Errorf("empty view %s: %v rows", view, n)
				}
			}
			nq, err := archive.LookupNamedQuery("voter-history")
			if err != nil {
				t.Fatal(err)
			}
			sql, err := nq.Expand(map[string]string{"ArchiveTable": "archive", "VotesTable": "ddbpipe-votes", "ObjectsTable": "ddbpipe-objects"})
			if err != nil {
				t.Fatal(err)
			}
			if res := mustQuery(t, db, sql, "2026-11", "voter-1"); len(res.Rows) != 0 {
				t.Errorf("voter-history on an empty archive: %v", res.Rows)
			}
		})
	}
	// A table the filter leaves out gets no view.
	db, err := archiveduckdb.Open(t.Context(), t.TempDir(), archiveduckdb.Filter{Table: "votes"}, known...)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names []string
	for _, v := range db.Views {
		names = append(names, v.Name)
	}
	if want := []string{"votes", "archive"}; !reflect.DeepEqual(names, want) {
		t.Errorf("views with -table votes: %v, want %v", names, want)
	}
}

func sortedRows(rows [][]any) [][]any {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b []any) int { return strings.Compare(fmt.Sprint(a...), fmt.Sprint(b...)) })
	return out
}
