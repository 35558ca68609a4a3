package archiveduckdb

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// Formats WriteResult takes.
const (
	FormatTable     = "table"
	FormatCSV       = "csv"
	FormatJSON      = "json"
	FormatJSONLines = "jsonl"
)

// WriteResult writes r as an aligned text table, CSV (with a header row),
// a JSON array of objects (one per row, columns as keys, one a line; [] for
// no row) or JSON lines (the same objects, without the array).
func WriteResult(w io.Writer, r *Result, format string) error {
	switch format {
	case FormatTable, "":
		return writeTable(w, r)
	case FormatCSV:
		return writeCSV(w, r)
	case FormatJSON:
		return writeJSON(w, r, true)
	case FormatJSONLines:
		return writeJSON(w, r, false)
	}
	return fmt.Errorf("archiveduckdb: unknown format %q (want table, csv, json or jsonl)", format)
}

// maxCell keeps a table's columns readable; csv and json are never cut.
const maxCell = 80

func writeTable(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(r.Columns, "\t"))
	under := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		under[i] = strings.Repeat("-", utf8.RuneCountInString(c))
	}
	fmt.Fprintln(tw, strings.Join(under, "\t"))
	for row := range r.rows() {
		cells := make([]string, len(r.Columns))
		for i := range cells {
			s, _ := r.text(row, i)
			s = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
			if utf8.RuneCountInString(s) > maxCell {
				s = string([]rune(s)[:maxCell-1]) + "…"
			}
			cells[i] = s
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "rows"
	if r.rows() == 1 {
		noun = "row"
	}
	_, err := fmt.Fprintf(w, "(%d %s)\n", r.rows(), noun)
	return err
}

func writeCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(r.Columns); err != nil {
		return err
	}
	rec := make([]string, len(r.Columns))
	for row := range r.rows() {
		for i := range rec {
			s, null := r.text(row, i)
			if null {
				s = ""
			}
			rec[i] = s
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeJSON(w io.Writer, r *Result, array bool) error {
	var b strings.Builder
	if array && r.rows() == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	for n := range r.rows() {
		b.Reset()
		switch {
		case !array:
		case n == 0:
			b.WriteByte('[')
		default:
			b.WriteString(",\n")
		}
		b.WriteByte('{')
		for i := range r.Columns {
			k, err := json.Marshal(r.Columns[i])
			if err != nil {
				return fmt.Errorf("archiveduckdb: encode column name: %w", err)
			}
			val, err := r.json(n, i)
			if err != nil {
				return fmt.Errorf("archiveduckdb: encode column %s: %w", r.Columns[i], err)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(k)
			b.WriteByte(':')
			b.Write(val)
		}
		b.WriteByte('}')
		if !array {
			b.WriteByte('\n')
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	if array {
		_, err := io.WriteString(w, "]\n")
		return err
	}
	return nil
}

// rows is the number of rows of r.
func (r *Result) rows() int {
	if r.shown != nil {
		return len(r.shown)
	}
	return len(r.Rows)
}

// text is the value at row, column i as text, and whether it is NULL.
func (r *Result) text(row, i int) (string, bool) {
	if r.shown != nil {
		v := r.shown[row][i]
		if v.null {
			return "NULL", true
		}
		return v.text, false
	}
	v := r.Rows[row][i]
	return cell(v, r.Types[i]), v == nil
}

// json is the value at row, column i as JSON.
func (r *Result) json(row, i int) ([]byte, error) {
	if r.shown != nil {
		return []byte(r.shown[row][i].json), nil
	}
	return json.Marshal(jsonValue(r.Rows[row][i], r.Types[i]))
}

// cell is a value of a column of DuckDB type typ as text.
func cell(v any, typ string) string {
	if t, ok := v.(time.Time); ok && typ == "DATE" {
		return t.UTC().Format("2006-01-02")
	}
	return Cell(v)
}

// Cell is a value as text: times in UTC, NULL for nil.
func Cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		x = x.UTC()
		if x.Nanosecond() == 0 {
			return x.Format("2006-01-02 15:04:05")
		}
		return x.Format("2006-01-02 15:04:05.000")
	case *big.Int:
		return x.String()
	}
	return fmt.Sprint(v)
}

func jsonValue(v any, typ string) any {
	switch x := v.(type) {
	case time.Time:
		if typ == "DATE" {
			return x.UTC().Format("2006-01-02")
		}
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return string(x)
	case *big.Int:
		return json.Number(x.String())
	}
	return v
}
