package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// demoArchive shows flow 3 on the votes the demo counted: the rotator
// subscribed this month's ledger table to the archiver; once the archive
// holds every vote, every clock of the stack is moved past the month and
// its grace, and `tables rotate` verifies, compacts and retires the month; `archive ls`
// and `archive query` then read the archive with DuckDB, and the counts per
// option must equal the counters.
func demoArchive(ctx context.Context, env *stack.Env, counted pollCount, w io.Writer) error {
	state, err := os.MkdirTemp("", "ddbpipe-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	if err := env.WriteEnvFile(filepath.Join(state, "local.env")); err != nil {
		return err
	}
	stateFlag := []string{"-state-dir", state}

	grace := 2
	if g, err := strconv.Atoi(env.Vars["ARCHIVE_GRACE_DAYS"]); err == nil && g > 0 {
		grace = g
	}
	month := time.Now().UTC()
	cold := ledger.End(month).Add(time.Duration(grace+1) * ledger.Day)
	if err := env.MoveClock(time.Until(cold)); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n(every clock of the local stack moved to %s: past %s and its %d-day grace, so the counter takes none of its votes)\n$ ddbpipe tables rotate\n",
		cold.Format(time.RFC3339), ledger.MonthOf(month), grace)
	if err := tablesRotate(ctx, append(stateFlag, "-grace-days", strconv.Itoa(grace)), indent(w), io.Discard); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	fmt.Fprintln(w, "  (DynamoDB Local refuses PITR and TagResource: the rotator logs a note and goes on; in AWS both are applied)")

	fmt.Fprintln(w, "\n$ ddbpipe archive ls")
	if err := archiveLs(ctx, stateFlag, indent(w), w); err != nil {
		return fmt.Errorf("archive ls: %w", err)
	}

	// The analyst's question, as Athena's named query asks it.
	perOption, err := archive.LookupNamedQuery("votes-per-option")
	if err != nil {
		return err
	}
	m := ledger.MonthOf(month)
	fmt.Fprintf(w, "\n$ ddbpipe archive query -named votes-per-option -arg %s -arg %s\n", m, counted.poll)
	if err := archiveQuery(ctx, append(stateFlag, "-named", perOption.Name, "-arg", m, "-arg", counted.poll), indent(w), io.Discard); err != nil {
		return fmt.Errorf("archive query: %w", err)
	}

	// The same query, checked against the counters.
	db, err := archiveduckdb.Open(ctx, filepath.Join(state, "archive-cache", env.Vars["ARCHIVE_BUCKET_NAME"]), archiveduckdb.Filter{})
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.Query(ctx, perOption.SQL, m, counted.poll)
	if err != nil {
		return err
	}
	archived := map[string]int64{}
	for _, row := range res.Rows {
		n, err := strconv.ParseInt(archiveduckdb.Cell(row[1]), 10, 64)
		if err != nil {
			return fmt.Errorf("archive query: count %v: %w", row[1], err)
		}
		archived[archiveduckdb.Cell(row[0])] = n
	}
	for option, n := range counted.totals {
		if archived[option] != n {
			return fmt.Errorf("demo: the archive holds %d votes for %s, the counters %d", archived[option], option, n)
		}
	}
	if len(archived) != len(counted.totals) {
		return fmt.Errorf("demo: the archive has options %v, the counters %v", archived, counted.totals)
	}
	fmt.Fprintf(w, "the archive's counts per option equal the counters' (%d options)\n", len(archived))
	return nil
}

// pollCount is what the counters said about the demo's poll.
type pollCount struct {
	poll   string
	totals map[string]int64
}

// indent prefixes each line written to w with two spaces.
func indent(w io.Writer) io.Writer { return &indenter{w: w, start: true} }

type indenter struct {
	w     io.Writer
	start bool
}

func (in *indenter) Write(p []byte) (int, error) {
	for i, b := range p {
		if in.start {
			if _, err := in.w.Write([]byte("  ")); err != nil {
				return i, err
			}
			in.start = false
		}
		if _, err := in.w.Write([]byte{b}); err != nil {
			return i, err
		}
		in.start = b == '\n'
	}
	return len(p), nil
}
