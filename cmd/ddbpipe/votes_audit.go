package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

// votesAudit is `ddbpipe votes audit`: the counters' totals against the
// votes the archive holds (every month's ledger), per poll and option.
func votesAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("votes audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	af := archiveFlags{identity: asOperator}
	af.registerStack(fs)
	fs.DurationVar(&af.wait, "wait", 0, "first wait, up to this long (e.g. 1m), until the votes queue is empty and the tally and the archive hold every ledger record")
	table := fs.String("table", "", "counters table (default: $COUNTERS_TABLE_NAME or the local stack's)")
	poll := fs.String("poll", "", "only this poll (default: every poll)")
	asJSON := fs.Bool("json", false, `print {"polls":n,"differ":n,"lines":[{"pollId","optionId","counted","archived"}...]}`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: ddbpipe votes audit [-poll P] [-wait D] [-json]

Compares each poll's totals in the counters (what votes results reads) with
the votes the archive holds for it, every month, each vote once (what
archive query counts). Votes on their way (in the queue, or not yet counted
or archived) differ for a moment: -wait lets them settle first. Exits 1 when
an option differs.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("votes audit: unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	store, err := votesStore(ctx, af.root, af.state, *table)
	if err != nil {
		return err
	}
	polls, err := auditedPolls(ctx, store, *poll)
	if err != nil {
		return err
	}
	archived, err := archivedPerOption(ctx, af, stderr)
	if err != nil {
		return err
	}
	counted := make([]votes.Totals, 0, len(polls))
	for _, p := range polls {
		t, err := votes.Results(ctx, store, p.ID, time.Now)
		if err != nil {
			return err
		}
		counted = append(counted, t)
	}
	lines, differ := votes.Audit(counted, archived)
	if err := printAudit(stdout, *asJSON, len(polls), lines, differ); err != nil {
		return err
	}
	if differ > 0 {
		return fmt.Errorf("the counters and the archive differ on %d of %d options (votes still on their way differ for a moment: try -wait 1m)", differ, len(lines))
	}
	return nil
}

// auditedPolls is the poll named, or every poll when none is.
func auditedPolls(ctx context.Context, store *votesddb.Votes, poll string) ([]votes.Poll, error) {
	if poll == "" {
		return store.AllPolls(ctx)
	}
	p, err := store.Poll(ctx, poll)
	if errors.Is(err, votes.ErrNoPoll) {
		return nil, fmt.Errorf("no poll %q (`ddbpipe polls ls` lists the polls)", poll)
	}
	if err != nil {
		return nil, err
	}
	return []votes.Poll{p}, nil
}

// archivedPerOption counts the archive's votes per poll and option, each
// vote once, after -wait.
func archivedPerOption(ctx context.Context, af archiveFlags, stderr io.Writer) (map[string]map[string]int64, error) {
	db, _, err := af.open(ctx, "", false, catchUp{queue: true, counted: true, archived: true}, stderr)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	res, err := db.Query(ctx, archive.VotesPerPollOption)
	if err != nil {
		return nil, fmt.Errorf("votes audit: count the archive's votes: %w", err)
	}
	archived := map[string]map[string]int64{}
	for _, row := range res.Rows {
		p, o, n := fmt.Sprint(row[0]), fmt.Sprint(row[1]), int64(0)
		if _, err := fmt.Sscan(fmt.Sprint(row[2]), &n); err != nil {
			return nil, fmt.Errorf("votes audit: the archive's count %v: %w", row[2], err)
		}
		if archived[p] == nil {
			archived[p] = map[string]int64{}
		}
		archived[p][o] = n
	}
	return archived, nil
}

// printAudit writes the audit's lines as a table (a summary when all
// agree) or as JSON.
func printAudit(w io.Writer, asJSON bool, polls int, lines []votes.AuditLine, differ int) error {
	if asJSON {
		if lines == nil {
			lines = []votes.AuditLine{}
		}
		return json.NewEncoder(w).Encode(struct {
			Polls  int               `json:"polls"`
			Differ int               `json:"differ"`
			Lines  []votes.AuditLine `json:"lines"`
		}{polls, differ, lines})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "poll\toption\tcounted\tarchived\t\t")
	for _, l := range lines {
		mark := ""
		if !l.Agrees() {
			mark = fmt.Sprintf("differs by %+d", l.Counted-l.Archived)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", l.PollID, l.OptionID, l.Counted, l.Archived, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if differ == 0 {
		fmt.Fprintf(w, "%d polls, %d options: the counters and the archive agree\n", polls, len(lines))
	}
	return nil
}
