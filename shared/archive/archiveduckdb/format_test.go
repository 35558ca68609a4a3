package archiveduckdb_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
)

// Every type a query over the archive can produce prints as DuckDB's own
// CLI prints it, in every format: no Go struct, no zone added or lost.
func TestShowPrintsDuckDBsOwnText(t *testing.T) {
	db, err := archiveduckdb.Open(t.Context(), t.TempDir(), archiveduckdb.Filter{}, "ddbpipe-votes")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const query = `SELECT INTERVAL '8.811574 seconds' AS lag, INTERVAL '1 year 2 months 3 days 04:05:06.5' AS span,
  1.50::DECIMAL(10,2) AS price, 12345678901234567890.123::DECIMAL(38,3) AS wide,
  [1, 2] AS list, {'x': 1, 'y': 'z'} AS rec, MAP {'k': 1} AS m,
  TIMESTAMPTZ '2026-11-01 00:00:00+00' AS tz, TIMESTAMP '2026-11-01 00:00:00.5' AS ts, DATE '2026-11-01' AS day,
  'c0e8b0a4-3c0b-4a4e-9a43-2f4d1b7c8e21'::UUID AS id, NULL::INTEGER AS nothing, ? AS arg;`
	res, err := db.Show(t.Context(), query, "a,b")
	if err != nil {
		t.Fatal(err)
	}
	wantText := []string{"00:00:08.811574", "1 year 2 months 3 days 04:05:06.5", "1.50", "12345678901234567890.123",
		"[1, 2]", "{'x': 1, 'y': z}", "{k=1}", "2026-11-01 00:00:00+00", "2026-11-01 00:00:00.5", "2026-11-01",
		"c0e8b0a4-3c0b-4a4e-9a43-2f4d1b7c8e21", "NULL", "a,b"}
	wantJSON := `{"lag":"00:00:08.811574","span":"1 year 2 months 3 days 04:05:06.5","price":1.50,"wide":12345678901234567890.123,` +
		`"list":[1,2],"rec":{"x":1,"y":"z"},"m":{"k":1},"tz":"2026-11-01 00:00:00+00","ts":"2026-11-01 00:00:00.5","day":"2026-11-01",` +
		`"id":"c0e8b0a4-3c0b-4a4e-9a43-2f4d1b7c8e21","nothing":null,"arg":"a,b"}`

	for _, tt := range []struct {
		format string
		check  func(t *testing.T, out string)
	}{
		{archiveduckdb.FormatTable, func(t *testing.T, out string) {
			lines := strings.Split(out, "\n")
			if len(lines) < 4 || lines[3] != "(1 row)" {
				t.Fatalf("table:\n%s", out)
			}
			cells := strings.Fields(strings.Join(strings.Fields(lines[2]), " "))
			row := strings.Join(cells, " ")
			if want := strings.Join(wantText, " "); row != want {
				t.Errorf("table row\n got %s\nwant %s", row, want)
			}
		}},
		{archiveduckdb.FormatCSV, func(t *testing.T, out string) {
			want := "lag,span,price,wide,list,rec,m,tz,ts,day,id,nothing,arg\n" +
				`00:00:08.811574,1 year 2 months 3 days 04:05:06.5,1.50,12345678901234567890.123,"[1, 2]","{'x': 1, 'y': z}",{k=1},` +
				`2026-11-01 00:00:00+00,2026-11-01 00:00:00.5,2026-11-01,c0e8b0a4-3c0b-4a4e-9a43-2f4d1b7c8e21,,"a,b"` + "\n"
			if out != want {
				t.Errorf("csv\n got %s\nwant %s", out, want)
			}
		}},
		{archiveduckdb.FormatJSON, func(t *testing.T, out string) {
			if out != "["+wantJSON+"]\n" || !json.Valid([]byte(out)) {
				t.Errorf("json\n got %s\nwant [%s]", out, wantJSON)
			}
		}},
		{archiveduckdb.FormatJSONLines, func(t *testing.T, out string) {
			if out != wantJSON+"\n" {
				t.Errorf("jsonl\n got %s\nwant %s", out, wantJSON)
			}
		}},
	} {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := archiveduckdb.WriteResult(&b, res, tt.format); err != nil {
				t.Fatal(err)
			}
			tt.check(t, b.String())
		})
	}
}

// A statement that cannot stand as a subquery runs as it is; a bad one
// fails with its own error, not the wrapper's.
func TestShowFallsBackAndKeepsErrors(t *testing.T) {
	db, err := archiveduckdb.Open(t.Context(), t.TempDir(), archiveduckdb.Filter{}, "ddbpipe-votes")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Show(t.Context(), "PRAGMA version")
	if err != nil || len(res.Columns) == 0 {
		t.Fatalf("PRAGMA version: %v, %+v", err, res)
	}
	var b bytes.Buffer
	if err := archiveduckdb.WriteResult(&b, res, archiveduckdb.FormatTable); err != nil || !strings.Contains(b.String(), "(1 row)") {
		t.Errorf("PRAGMA version printed %q, %v", b.String(), err)
	}
	_, err = db.Show(t.Context(), "SELECT no_such_column FROM (SELECT 1 AS a)")
	var qe *archiveduckdb.QueryError
	if !errors.As(err, &qe) || strings.Contains(err.Error(), "COLUMNS(*)") || !strings.Contains(err.Error(), "no_such_column") {
		t.Errorf("error %v: want the statement's own QueryError", err)
	}
}
