package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

// stackEnv looks names up in the process environment first, then in the
// local stack's local.env (when there is one), so the same commands work
// against AWS (export COUNTERS_TABLE_NAME=...) and locally.
func stackEnv(root, state string) (func(string) string, error) {
	vars := map[string]string{}
	dir, err := stateFolder(root, state)
	if err == nil {
		if v, err := loadEnvFile(filepath.Join(dir, "local.env")); err == nil {
			vars = v
		}
	}
	return func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return vars[k]
	}, nil
}

// votesStore opens the votes store named by the flags or the environment.
func votesStore(ctx context.Context, root, state, table string) (*votesddb.Votes, error) {
	getenv, err := stackEnv(root, state)
	if err != nil {
		return nil, err
	}
	if table == "" {
		table = getenv("COUNTERS_TABLE_NAME")
	}
	if table == "" {
		return nil, errors.New("no counters table: pass -table, export COUNTERS_TABLE_NAME, or run `ddbpipe local up`")
	}
	cfg, err := awsenv.FromVars(ctx, getenv)
	if err != nil {
		return nil, err
	}
	return votesddb.New(awsenv.DynamoDB(cfg), table, getenv("LEDGER_TABLE_PREFIX")), nil
}

func pollsCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("polls create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root")
	state := fs.String("state-dir", "", "the state folder of `local up`")
	table := fs.String("table", "", "counters table (default: $COUNTERS_TABLE_NAME or the local stack's)")
	id := fs.String("poll", "", "poll id (required)")
	options := fs.String("options", "", "comma-separated option ids (required)")
	shards := fs.Int("shards", 8, "write shards of each counter")
	one := fs.Bool("one-vote-per-voter", false, "reject a second vote by the same voter")
	opens := fs.String("opens", "", "RFC 3339 time the poll opens (default: now)")
	closes := fs.String("closes", "", "RFC 3339 time the poll closes (default: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := votes.Poll{ID: *id, Shards: *shards, OneVotePerVoter: *one}
	if *options != "" {
		for _, o := range strings.Split(*options, ",") {
			p.Options = append(p.Options, strings.TrimSpace(o))
		}
	}
	for _, tf := range []struct {
		flag, v string
		dst     *time.Time
	}{{"-opens", *opens, &p.Opens}, {"-closes", *closes, &p.Closes}} {
		if tf.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, tf.v)
		if err != nil {
			return fmt.Errorf("%s %q: want an RFC 3339 time like 2026-12-01T00:00:00Z", tf.flag, tf.v)
		}
		*tf.dst = t.UTC()
	}
	if err := p.Validate(); err != nil {
		return err
	}
	store, err := votesStore(ctx, *root, *state, *table)
	if err != nil {
		return err
	}
	if err := store.CreatePoll(ctx, p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "poll %s created: %d options, %d shards\n", p.ID, len(p.Options), p.Shards)
	return nil
}

func votesResults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("votes results", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root")
	state := fs.String("state-dir", "", "the state folder of `local up`")
	table := fs.String("table", "", "counters table (default: $COUNTERS_TABLE_NAME or the local stack's)")
	id := fs.String("poll", "", "poll id (required)")
	asJSON := fs.Bool("json", false, `print {"pollId":...,"totals":{...},"total":n}`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("-poll is required")
	}
	store, err := votesStore(ctx, *root, *state, *table)
	if err != nil {
		return err
	}
	t, err := votes.Results(ctx, store, *id, time.Now)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			PollID string           `json:"pollId"`
			Totals map[string]int64 `json:"totals"`
			Total  int64            `json:"total"`
		}{t.PollID, t.Totals, t.Total})
	}
	opts := make([]string, 0, len(t.Totals))
	for o := range t.Totals {
		opts = append(opts, o)
	}
	sort.Slice(opts, func(i, j int) bool {
		return t.Totals[opts[i]] > t.Totals[opts[j]] || t.Totals[opts[i]] == t.Totals[opts[j]] && opts[i] < opts[j]
	})
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "poll %s (%d shards read)\n", t.PollID, t.Shards)
	for _, o := range opts {
		share := 0.0
		if t.Total > 0 {
			share = 100 * float64(t.Totals[o]) / float64(t.Total)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.1f%%\n", o, t.Totals[o], share)
	}
	fmt.Fprintf(tw, "  total\t%d\t\n", t.Total)
	return tw.Flush()
}
