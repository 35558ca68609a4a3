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
// view archive over every partition, as Athena's Glue table. Every view has
// the columns of the archive's rows (see shared/archive), with table and
// month taken from the partition folder (Hive partitioning) and
// approximateCreationTime as a plain TIMESTAMP in UTC (Athena's timestamp).
//
// Helper macros:
//
//	attr(doc, name)                the attribute name of a keys or image JSON, as text:
//	                               attr(newImage, 'pollId'); names with dots or spaces work
//	json_extract_scalar(doc, path) Athena's function, so the same SQL runs in both:
//	                               json_extract_scalar(newImage, '$.pollId')
//	seq_order(sequenceNumber)      a sort key that orders sequence numbers numerically
//
// DuckDB's own JSON functions work too: newImage->>'$.pollId',
// json_extract_string, json_keys.
package archiveduckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	_ "github.com/marcboeker/go-duckdb" // registers the "duckdb" database/sql driver
)

// Sentinel errors, for errors.Is.
var (
	// ErrEmpty: the archive (or the part a filter selects) holds no data.
	ErrEmpty = errors.New("duckarchive: the archive is empty")
	// ErrUnknownTable: a filter names a table the archive does not hold.
	ErrUnknownTable = errors.New("duckarchive: no such table in the archive")
)

// QueryError is a query DuckDB refused or could not run, with the SQL it was
// given.
type QueryError struct {
	SQL string
	Err error
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("duckarchive: query failed: %v\nSQL:\n%s", e.Err, indent(strings.TrimSpace(e.SQL)))
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
}

// Open starts DuckDB over the archive files under root (a table=/month=
// tree, as Cache.Root), narrowed by f, and creates the views and macros.
// It fails with ErrEmpty when there is no file to read.
func Open(ctx context.Context, root string, f Filter) (*DB, error) {
	byTable, skipped, err := scan(root, f)
	if err != nil {
		return nil, err
	}
	if len(byTable) == 0 {
		return nil, fmt.Errorf("%w: no Parquet files under %s", ErrEmpty, root)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("duckarchive: start duckdb: %w", err)
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
	names := ViewNames(tables)
	for _, t := range tables {
		d.Views = append(d.Views, View{Name: names[t], Table: t, Files: byTable[t]})
	}
	d.Views = append(d.Views, View{Name: "archive", Files: all})
	for _, s := range []string{
		`CREATE MACRO json_extract_scalar(doc, path) AS json_extract_string(doc, path)`,
		`CREATE MACRO attr(doc, name) AS json_extract_string(doc, '$."' || replace(name, '"', '\"') || '"')`,
		`CREATE MACRO seq_order(s) AS lpad(s, 40, '0')`,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, &QueryError{SQL: s, Err: err}
		}
	}
	for _, v := range d.Views {
		// Creating the view reads every file's schema (union_by_name): a
		// damaged file fails here, and DuckDB's message names it.
		if _, err := db.ExecContext(ctx, "CREATE VIEW "+quoteIdent(v.Name)+" AS "+selectFiles(v.Files)); err != nil {
			db.Close()
			return nil, fmt.Errorf("duckarchive: create view %s over %d files: %w", v.Name, len(v.Files), err)
		}
	}
	return d, nil
}

// Close stops DuckDB.
func (d *DB) Close() error { return d.db.Close() }

// selectFiles reads files as the archive's rows: Hive partitions typed as
// text, the creation time as a plain UTC timestamp (what Athena gives).
func selectFiles(files []string) string {
	lits := make([]string, len(files))
	for i, f := range files {
		lits[i] = quoteString(filepath.ToSlash(f))
	}
	return "SELECT * REPLACE (CAST(approximateCreationTime AS TIMESTAMP) AS approximateCreationTime) FROM read_parquet([" +
		strings.Join(lits, ", ") + "], hive_partitioning = true, union_by_name = true, hive_types = {'table': VARCHAR, 'month': VARCHAR})"
}

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
		return nil, nil, fmt.Errorf("duckarchive: read cache: %w", err)
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
			return nil, nil, fmt.Errorf("duckarchive: read cache: %w", err)
		}
		for _, md := range mdirs {
			month, ok := strings.CutPrefix(md.Name(), "month=")
			if !md.IsDir() || !ok || f.Month != "" && month != f.Month {
				continue
			}
			dir := filepath.Join(root, "table="+t, md.Name())
			entries, err := os.ReadDir(dir)
			if err != nil {
				return nil, nil, fmt.Errorf("duckarchive: read cache: %w", err)
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
