// Package archiveduckdb is the analyst's local view of the archive: it copies
// the archive's Parquet files from S3 into a local cache (Cache) and queries
// them with DuckDB (Open), the way Athena queries them in AWS.
//
// It uses cgo (github.com/marcboeker/go-duckdb bundles libduckdb), so only
// the CLI and tests import it; the Lambda functions stay CGO_ENABLED=0.
//
// # What a query sees
//
// One view per table base name, named by its last dash-separated word when
// that is unique ("ddbpipe-votes" → votes, "ddbpipe-objects" → objects),
// else by the whole base name with other characters turned into "_"; and the
// view archive over every partition (union_by_name: a column a table lacks
// is null there). Every view has the archive's schema version 2 columns
// (see archiveparquet: table, month, stream, sequence_number, event_name,
// recorded_at, ttl_delete, image, replayed, keys, extra, old_image) and its
// layout's typed columns (votes: poll_id, option_id, voter_id, vote_id,
// cast_at, counted_at, pk, sk_form; objects: object_key, sort_key, version,
// placement, size, sha256, content_type, codec, write_id, created_at,
// deleted), the same names and types as the Glue tables Athena reads. month
// and table come from the partition folder (Hive partitioning). DuckDB reads
// the files' UTC timestamps as TIMESTAMP WITH TIME ZONE; every such column
// is given as a plain TIMESTAMP in UTC instead, as Athena shows it, so the
// same SQL compares them with the same literals.
//
// Files of schema version 1 (camelCase columns, no stream column), which an
// old cache may still hold, are left out and listed in DB.Outdated: rewrite
// them (archive the month again, or compact it) to query them.
//
// Helper macros, for keys, extra and old_image (DynamoDB's type-tagged JSON,
// {"pollId":{"S":"p1"},"n":{"N":"1"}}):
//
//	attr(doc, name)                the attribute name's scalar value as text, whatever
//	                               its type tag (S, N, BOOL, B); null when absent or not a
//	                               scalar: attr(extra, 'note'); names with dots or spaces work
//	json_extract_scalar(doc, path) Athena's function, so the same SQL runs in both; mind
//	                               the type tag: json_extract_scalar(extra, '$.note.S')
//	seq_order(sequence_number)     a sort key that orders sequence numbers numerically
//	                               (lpad(sequence_number, 40, '0'), which Athena has too)
//
// DuckDB's own JSON functions work too: extra->>'$.note.S',
// json_extract_string, json_keys.
package archiveduckdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	_ "github.com/marcboeker/go-duckdb" // registers the "duckdb" database/sql driver

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
)

// Sentinel errors, for errors.Is.
var (
	// ErrEmpty: the archive (or the part a filter selects) holds no data.
	ErrEmpty = errors.New("archiveduckdb: the archive is empty")
	// ErrUnknownTable: a filter names a table the archive does not hold.
	ErrUnknownTable = errors.New("archiveduckdb: no such table in the archive")
)

// QueryError is a query DuckDB refused or could not run, with the SQL it was
// given.
type QueryError struct {
	SQL string
	Err error
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("archiveduckdb: query failed: %v\nSQL:\n%s", e.Err, indent(strings.TrimSpace(e.SQL)))
}

func (e *QueryError) Unwrap() error { return e.Err }

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// View is a view Open created over some of the cached files.
type View struct {
	Name  string   // as SQL names it (unquoted when it can be)
	Table string   // the base name; "" for the view over everything
	Files []string // the files it reads
}

// DB is an in-memory DuckDB with the archive's views.
type DB struct {
	db    *sql.DB
	Views []View
	// Skipped lists files left out because they are not Parquet files (no
	// PAR1 at both ends): one would fail every query of its table.
	Skipped []string
	// Outdated lists archive files of an older schema version (1: camelCase
	// columns, no stream), left out: rewrite them to query them.
	Outdated []string
}

// Open starts DuckDB over the archive files under root (a table=/month=
// tree, as Cache.Root), narrowed by f, and creates the views and macros.
// The tables named in known (base names, e.g. the stack's ledger prefix and
// objects table) get a view even when the archive holds none of their files
// yet: empty, with their layout's columns, so a query of a fresh stack's
// archive answers no rows instead of failing. It fails with ErrEmpty when
// there is no file to read and no known table.
func Open(ctx context.Context, root string, f Filter, known ...string) (*DB, error) {
	selected := func(t string) bool { return f.Table == "" || f.Table == t || ViewNames([]string{t})[t] == f.Table }
	byTable, skipped, err := scan(root, f)
	if errors.Is(err, ErrUnknownTable) && slices.ContainsFunc(known, func(t string) bool { return t != "" && selected(t) }) {
		byTable, err = map[string][]string{}, nil // a known table with no file yet
	}
	if err != nil {
		return nil, err
	}
	var missing []string // known tables without a file, as f selects them
	for _, t := range known {
		if _, ok := byTable[t]; ok || t == "" || slices.Contains(missing, t) || !selected(t) {
			continue
		}
		missing = append(missing, t)
	}
	if len(byTable) == 0 && len(missing) == 0 {
		return nil, fmt.Errorf("%w: no Parquet files under %s", ErrEmpty, root)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("archiveduckdb: start duckdb: %w", err)
	}
	d := &DB{db: db, Skipped: skipped}
	tables := make([]string, 0, len(byTable))
	var all []string
	for t, files := range byTable {
		tables = append(tables, t)
		all = append(all, files...)
	}
	sort.Strings(tables)
	sort.Strings(all)
	names := ViewNames(append(slices.Clone(tables), missing...))
	for _, t := range tables {
		d.Views = append(d.Views, View{Name: names[t], Table: t, Files: byTable[t]})
	}
	if len(all) > 0 {
		d.Views = append(d.Views, View{Name: "archive", Files: all})
	}
	// Without the ICU extension (the bundled libduckdb has none) a cast of
	// a TIMESTAMP WITH TIME ZONE to TIMESTAMP gives its UTC time; with it,
	// the session's time zone's: make that UTC too. A DuckDB that does not
	// know the setting has no ICU, and casts in UTC already.
	_, _ = db.ExecContext(ctx, "SET TimeZone = 'UTC'")
	for _, s := range macros {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, &QueryError{SQL: s, Err: err}
		}
	}
	if len(all) > 0 {
		if err := d.dropOutdated(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if len(d.Views) == 0 && len(missing) == 0 {
		db.Close()
		return nil, fmt.Errorf("%w: only files of an older schema under %s (%d; rewrite them)", ErrEmpty, root, len(d.Outdated))
	}
	for _, v := range d.Views {
		// Describing the view reads every file's schema (union_by_name): a
		// damaged file fails here, and DuckDB's message names it.
		sel, err := d.selectFiles(ctx, v.Files)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("archiveduckdb: read the schema of view %s over %d files: %w", v.Name, len(v.Files), err)
		}
		if _, err := db.ExecContext(ctx, "CREATE VIEW "+quoteIdent(v.Name)+" AS "+sel); err != nil {
			db.Close()
			return nil, fmt.Errorf("archiveduckdb: create view %s over %d files: %w", v.Name, len(v.Files), err)
		}
	}
	for _, t := range missing {
		if slices.ContainsFunc(d.Views, func(v View) bool { return v.Name == names[t] }) {
			continue
		}
		if _, err := db.ExecContext(ctx, "CREATE VIEW "+quoteIdent(names[t])+" AS "+emptySelect(archive.LayoutFor(t))); err != nil {
			db.Close()
			return nil, fmt.Errorf("archiveduckdb: create the empty view %s: %w", names[t], err)
		}
		d.Views = append(d.Views, View{Name: names[t], Table: t})
	}
	if !slices.ContainsFunc(d.Views, func(v View) bool { return v.Name == "archive" }) {
		// Nothing archived at all: the view over everything is the empty
		// views together.
		var parts []string
		for _, v := range d.Views {
			parts = append(parts, "SELECT * FROM "+quoteIdent(v.Name))
		}
		if _, err := db.ExecContext(ctx, "CREATE VIEW archive AS "+strings.Join(parts, " UNION ALL BY NAME ")); err != nil {
			db.Close()
			return nil, fmt.Errorf("archiveduckdb: create the empty view archive: %w", err)
		}
		d.Views = append(d.Views, View{Name: "archive"})
	}
	return d, nil
}

// emptySelect is a query of no rows with a layout's columns (the partition
// columns among them), typed as a view over its files types them.
func emptySelect(l archive.Layout) string {
	var cols []string
	for _, c := range archiveparquet.ColumnTypes(l) {
		typ := "VARCHAR"
		switch c[1] {
		case "bigint":
			typ = "BIGINT"
		case "int":
			typ = "INTEGER"
		case "timestamp":
			typ = "TIMESTAMP"
		case "boolean":
			typ = "BOOLEAN"
		}
		cols = append(cols, "CAST(NULL AS "+typ+") AS "+quoteIdent(c[0]))
	}
	return "SELECT " + strings.Join(cols, ", ") + " WHERE false"
}

// Close stops DuckDB.
func (d *DB) Close() error { return d.db.Close() }

// macros are the helper functions of the package doc.
var macros = []string{
	`CREATE MACRO json_extract_scalar(doc, path) AS
	  CASE WHEN json_type(doc, path) IN ('OBJECT', 'ARRAY') THEN NULL ELSE json_extract_string(doc, path) END`,
	`CREATE MACRO attr_path(name) AS '$."' || replace(name, '"', '\"') || '"'`,
	`CREATE MACRO attr(doc, name) AS coalesce(
	  json_extract_string(doc, attr_path(name) || '.S'),
	  json_extract_string(doc, attr_path(name) || '.N'),
	  json_extract_string(doc, attr_path(name) || '.BOOL'),
	  json_extract_string(doc, attr_path(name) || '.B'))`,
	`CREATE MACRO seq_order(s) AS lpad(s, 40, '0')`,
}

// dropOutdated leaves out the files whose schema version (the key-value
// metadata archiveparquet writes) is not the current one, and views left
// without files.
func (d *DB) dropOutdated(ctx context.Context) error {
	var all []string
	for _, v := range d.Views {
		if v.Table == "" {
			all = v.Files
		}
	}
	version := map[string]string{}
	q := "SELECT file_name, decode(value) FROM parquet_kv_metadata(" + fileList(all) + ") WHERE decode(key) = " + quoteString(archiveparquet.SchemaVersionKey)
	rows, err := d.db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("archiveduckdb: read the files' metadata: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var f, v string
		if err := rows.Scan(&f, &v); err != nil {
			return fmt.Errorf("archiveduckdb: read the files' metadata: %w", err)
		}
		version[filepath.FromSlash(f)] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("archiveduckdb: read the files' metadata: %w", err)
	}
	views := d.Views[:0]
	for _, v := range d.Views {
		var keep []string
		for _, f := range v.Files {
			switch {
			case version[f] == archiveparquet.SchemaVersion:
				keep = append(keep, f)
			case v.Table != "":
				d.Outdated = append(d.Outdated, f)
			}
		}
		if len(keep) > 0 {
			v.Files = keep
			views = append(views, v)
		}
	}
	d.Views = views
	sort.Strings(d.Outdated)
	return nil
}

func fileList(files []string) string {
	lits := make([]string, len(files))
	for i, f := range files {
		lits[i] = quoteString(filepath.ToSlash(f))
	}
	return "[" + strings.Join(lits, ", ") + "]"
}

// selectFiles reads files as the archive's rows: Hive partitions typed as
// text, every TIMESTAMP WITH TIME ZONE column (DuckDB's type for Parquet's
// UTC-adjusted timestamps) as a plain TIMESTAMP in UTC (what Athena gives).
// It finds those columns by describing the files, so a layout's new
// timestamp column needs no change here.
func (d *DB) selectFiles(ctx context.Context, files []string) (string, error) {
	from := " FROM read_parquet(" + fileList(files) +
		", hive_partitioning = true, union_by_name = true, hive_types = {'table': VARCHAR, 'month': VARCHAR})"
	rows, err := d.db.QueryContext(ctx, "DESCRIBE SELECT *"+from)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var tz []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		// column_name, column_type, ...
		if name, typ := Cell(vals[0]), Cell(vals[1]); typ == "TIMESTAMP WITH TIME ZONE" {
			q := quoteColumn(name)
			tz = append(tz, "CAST("+q+" AS TIMESTAMP) AS "+q)
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(tz) == 0 {
		return "SELECT *" + from, nil
	}
	return "SELECT * REPLACE (" + strings.Join(tz, ", ") + ")" + from, nil
}

// quoteColumn always quotes: column names such as "table" are keywords.
func quoteColumn(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func quoteIdent(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// ViewNames names each table base name's view: its last dash-separated word
// when no other table shares it, else the whole name; lower case, with
// other characters turned into "_". "archive" is taken by the view over
// every table.
func ViewNames(tables []string) map[string]string {
	ident := func(s string) string {
		s = strings.Trim(notIdent.ReplaceAllString(strings.ToLower(s), "_"), "_")
		if s == "" || s[0] >= '0' && s[0] <= '9' {
			s = "t_" + s
		}
		return s
	}
	short := map[string]int{}
	for _, t := range tables {
		short[ident(lastWord(t))]++
	}
	names := map[string]string{}
	for _, t := range tables {
		n := ident(lastWord(t))
		if short[n] > 1 || n == "archive" {
			n = ident(t)
		}
		names[t] = n
	}
	return names
}

func lastWord(s string) string { return s[strings.LastIndex(s, "-")+1:] }

// resolveTable finds the base name a user means: the base name itself or
// its view name.
func resolveTable(tables []string, name string) (string, bool) {
	names := ViewNames(tables)
	for _, t := range tables {
		if t == name || names[t] == name {
			return t, true
		}
	}
	return "", false
}

func describeTables(tables []string) []string {
	names := ViewNames(tables)
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = fmt.Sprintf("%s (view %s)", t, names[t])
	}
	return out
}

// scan finds the .parquet files of each table under root, narrowed by f,
// and the ones it skipped because they are not Parquet files.
func scan(root string, f Filter) (byTable map[string][]string, skipped []string, err error) {
	byTable = map[string][]string{}
	tdirs, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return byTable, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("archiveduckdb: read cache: %w", err)
	}
	var tables []string
	for _, td := range tdirs {
		if td.IsDir() && strings.HasPrefix(td.Name(), "table=") {
			tables = append(tables, strings.TrimPrefix(td.Name(), "table="))
		}
	}
	want := ""
	if f.Table != "" {
		t, ok := resolveTable(tables, f.Table)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q (the cache holds %s)", ErrUnknownTable, f.Table, strings.Join(describeTables(tables), ", "))
		}
		want = t
	}
	for _, t := range tables {
		if want != "" && t != want {
			continue
		}
		mdirs, err := os.ReadDir(filepath.Join(root, "table="+t))
		if err != nil {
			return nil, nil, fmt.Errorf("archiveduckdb: read cache: %w", err)
		}
		for _, md := range mdirs {
			month, ok := strings.CutPrefix(md.Name(), "month=")
			if !md.IsDir() || !ok || f.Month != "" && month != f.Month {
				continue
			}
			dir := filepath.Join(root, "table="+t, md.Name())
			entries, err := os.ReadDir(dir)
			if err != nil {
				return nil, nil, fmt.Errorf("archiveduckdb: read cache: %w", err)
			}
			for _, e := range entries {
				if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".parquet") || hidden(e.Name()) {
					continue
				}
				path := filepath.Join(dir, e.Name())
				info, err := e.Info()
				if err != nil || !isParquet(path, info.Size()) {
					skipped = append(skipped, path)
					continue
				}
				byTable[t] = append(byTable[t], path)
			}
		}
	}
	return byTable, skipped, nil
}

// Result is a query's answer: column names and types (DuckDB's names) and
// the rows, as database/sql scans them (nil for NULL).
type Result struct {
	Columns []string
	Types   []string
	Rows    [][]any
	// shown holds each value as DuckDB itself writes it (Show), which
	// WriteResult prints instead of Rows.
	shown [][]shown
}

// shown is one value as DuckDB writes it: its cast to VARCHAR (what
// DuckDB's CLI prints) and its to_json. Null is SQL's NULL.
type shown struct {
	text, json string
	null       bool
}

// Show runs one SQL statement for a person to read: every value as
// DuckDB itself writes it, its cast to VARCHAR for tables and CSV (what
// DuckDB's CLI prints: intervals, decimals, lists, structs, maps, UUIDs,
// timestamps with their zone) and its to_json for JSON, so no type of the
// archive prints as a Go value. The statement runs once, as a subquery; one
// that cannot be one (a PRAGMA, say) runs as Query runs it, and an error is
// the statement's own, as Query reports it.
func (d *DB) Show(ctx context.Context, query string, args ...any) (*Result, error) {
	inner := strings.TrimRight(strings.TrimSpace(query), "; \t\r\n")
	wrapped := "SELECT COLUMNS(*)::VARCHAR, to_json(COLUMNS(*))::VARCHAR, typeof(COLUMNS(*)) FROM (\n" + inner + "\n)"
	rows, err := d.db.QueryContext(ctx, wrapped, args...)
	if err != nil {
		return d.Query(ctx, query, args...)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, &QueryError{SQL: query, Err: err}
	}
	n := len(cols) / 3
	res := &Result{Columns: cols[:n], Types: make([]string, n)}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, &QueryError{SQL: query, Err: err}
		}
		row := make([]shown, n)
		for i := range row {
			res.Types[i] = vals[2*n+i].String
			row[i] = shown{text: vals[i].String, json: vals[n+i].String, null: !vals[i].Valid}
			switch {
			case !vals[n+i].Valid:
				row[i].json = "null" // NULL, and what has no JSON form (NaN)
			case exactNumber(res.Types[i]) && json.Valid([]byte(row[i].text)):
				// to_json makes a DECIMAL a double; its text keeps every digit.
				row[i].json = row[i].text
			}
		}
		res.shown = append(res.shown, row)
	}
	if err := rows.Err(); err != nil {
		return nil, &QueryError{SQL: query, Err: err}
	}
	return res, nil
}

// exactNumber reports whether a DuckDB type's text is an exact number
// that to_json would round through a double.
func exactNumber(typ string) bool {
	return strings.HasPrefix(typ, "DECIMAL") || typ == "HUGEINT" || typ == "UHUGEINT"
}

// Query runs one SQL statement with its "?" arguments.
func (d *DB) Query(ctx context.Context, query string, args ...any) (*Result, error) {
	rows, err := d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, &QueryError{SQL: query, Err: err}
	}
	defer rows.Close()
	cols, err := rows.ColumnTypes()
	if err != nil {
		return nil, &QueryError{SQL: query, Err: err}
	}
	res := &Result{}
	for _, c := range cols {
		res.Columns = append(res.Columns, c.Name())
		res.Types = append(res.Types, c.DatabaseTypeName())
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, &QueryError{SQL: query, Err: err}
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, &QueryError{SQL: query, Err: err}
	}
	return res, nil
}
