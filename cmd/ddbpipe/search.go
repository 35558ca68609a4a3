package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchddb"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// searchStack is what the search commands reach: the engine, the objects
// table as the search flow reads it, and the store that reads payloads.
type searchStack struct {
	engine *searchos.Engine
	table  searchddb.Table
	store  *objects.Store
}

// openSearch opens the search index and the objects table the environment
// (or the local stack's local.env) names.
func openSearch(ctx context.Context, root, state string) (searchStack, error) {
	getenv, err := stackEnv(root, state, asOperator)
	if err != nil {
		return searchStack{}, err
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return searchStack{}, err
	}
	alias := first(getenv, searchos.AliasVar, "SEARCH_INDEX_NAME")
	table := first(getenv, "OBJECTS_TABLE_NAME", "OBJECTS_TABLE")
	bucket := first(getenv, "OBJECTS_BUCKET_NAME", "OBJECTS_BUCKET")
	if alias == "" || table == "" || bucket == "" {
		return searchStack{}, errors.New("no search index, objects table or bucket: export SEARCH_INDEX, OBJECTS_TABLE_NAME and OBJECTS_BUCKET_NAME (the stack's outputs), or run `ddbpipe local up`")
	}
	engine, err := searchos.FromAWS(cfg, first(getenv, searchos.EndpointVar, "SEARCH_DOMAIN_ENDPOINT"), alias)
	if errors.Is(err, search.ErrDisabled) {
		return searchStack{}, errors.New("no search endpoint: this stack runs without search (SearchEnabled=false), or export SEARCH_ENDPOINT (the stack's SearchDomainEndpoint output)")
	}
	if err != nil {
		return searchStack{}, err
	}
	store := objectslambda.NewReader(cfg, table, bucket, nil)
	return searchStack{engine: engine, table: searchddb.New(awsenv.DynamoDB(cfg), table), store: store}, nil
}

func searchFlags(name string, stderr io.Writer) (*flag.FlagSet, *string, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, fs.String("root", "", "repository root"), fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
}

// searchReindex is `search reindex`: a new index built from the table
// while the stream writes, then swapped in (search.Reindex).
func searchReindex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, root, state := searchFlags("search reindex", stderr)
	keep := fs.Bool("keep-old", false, "keep the replaced index (its aliases are moved all the same)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("search reindex: takes no arguments, got %q", fs.Args())
	}
	s, err := openSearch(ctx, *root, *state)
	if err != nil {
		return err
	}
	if err := s.engine.Ensure(ctx); err != nil {
		return err
	}
	progress := newProgress(stderr)
	r := &search.Reindex{
		Indexes: s.engine, Table: s.table, Payloads: s.store,
		Name:   s.engine.Alias() + "-" + time.Now().UTC().Format("20060102t150405"),
		Settle: searchos.TargetsTTL() + time.Second, KeepOld: *keep,
		Progress: func(p search.ReindexProgress) {
			if p.Refreshing {
				progress.update(fmt.Sprintf("reindex: %d documents written; waiting for the engine to make them searchable (%s)", p.Written, p.Elapsed.Round(time.Second)))
				return
			}
			progress.update(fmt.Sprintf("reindex: %d keys read, %d documents written, %d already newer (%s)", p.Scanned, p.Written, p.Newer, p.Elapsed.Round(time.Second)))
		},
	}
	fmt.Fprintf(stderr, "reindex into %s: waiting %s for every indexer to write to it too, then reading the table…\n", r.Name, r.Settle)
	res, err := r.Run(ctx)
	progress.done()
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "reindexed into %s: %d keys read, %d documents written (%d live, tombstones for the rest), %d already newer from the stream, %d refused, %d bulk requests, %s\n",
		res.Index, res.Scanned, res.Written, res.Written-res.Refused, res.Newer, res.Refused, res.Requests, res.Elapsed.Round(time.Millisecond))
	what := "deleted"
	if *keep {
		what = "kept"
	}
	if len(res.Replaced) > 0 {
		fmt.Fprintf(stdout, "searches now read %s; replaced %s (%s)\n", res.Index, strings.Join(res.Replaced, ", "), what)
	}
	return nil
}

// searchVerify is `search verify`: the table against the index, key by
// key; exit 1 on any drift.
func searchVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, root, state := searchFlags("search verify", stderr)
	show := fs.Int("show", 10, "drifting keys to print of each kind")
	asJSON := fs.Bool("json", false, "print the drift as JSON")
	wait := fs.Duration("wait", 0, "compare again, with backoff, until there is no drift or this long has passed (the index follows the table moments behind)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wait < 0 {
		return fmt.Errorf("search verify: -wait %s: want a duration of 0 or more", *wait)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("search verify: takes no arguments, got %q", fs.Args())
	}
	s, err := openSearch(ctx, *root, *state)
	if err != nil {
		return err
	}
	d, err := verifyUntil(ctx, s, *wait)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(d); err != nil {
			return err
		}
	} else {
		printDrift(stdout, d, *show)
	}
	if !d.None() {
		return fmt.Errorf("search verify: %d keys drift (run `ddbpipe search reindex` to rebuild the index)", d.Count())
	}
	return nil
}

// verifyUntil compares the table with the index until they agree or wait
// is over; the last comparison stands. A missing index is drift too while
// there is time: a new stack's index is made by the indexer's first batch.
func verifyUntil(ctx context.Context, s searchStack, wait time.Duration) (search.Drift, error) {
	var d search.Drift
	var verr error
	err := pollUntil(ctx, wait, func(last bool) (bool, error) {
		d, verr = search.Verify(ctx, s.table, s.engine)
		if errors.Is(verr, search.ErrNoIndex) && !last {
			return false, nil
		}
		return d.None(), verr
	})
	return d, errors.Join(err, verr)
}

// pollUntil calls try, with backoff (100 ms doubling to 2 s), until it is
// done or fails, or wait has passed: the call at the deadline is told it
// is the last.
func pollUntil(ctx context.Context, wait time.Duration, try func(last bool) (done bool, err error)) error {
	deadline := time.Now().Add(wait)
	pause := retry.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	for n := 1; ; n++ {
		last := !time.Now().Before(deadline)
		if done, err := try(last); done || err != nil || last {
			return err
		}
		if err := retry.Sleep(ctx, min(pause.Delay(n), time.Until(deadline))); err != nil {
			return err
		}
	}
}

func printDrift(w io.Writer, d search.Drift, show int) {
	fmt.Fprintf(w, "table: %d live keys; index: %d documents\n", d.TableKeys, d.IndexDocs)
	if d.None() {
		fmt.Fprintln(w, "no drift: every live key at its version, nothing else")
		return
	}
	list := func(title string, n int, line func(i int) string) {
		if n == 0 {
			return
		}
		fmt.Fprintf(w, "%s: %d\n", title, n)
		for i := range min(n, show) {
			fmt.Fprintf(w, "  %s\n", line(i))
		}
	}
	list("missing from the index", len(d.Missing), func(i int) string { return fmt.Sprintf("%s v%d", showKey(d.Missing[i].Key), d.Missing[i].Version) })
	list("in the index, not live in the table", len(d.Extra), func(i int) string { return fmt.Sprintf("%s v%d", showKey(d.Extra[i].Key), d.Extra[i].Version) })
	list("index behind the table", len(d.Behind), func(i int) string {
		return fmt.Sprintf("%s: table v%d, index v%d", showKey(d.Behind[i].Key), d.Behind[i].Table, d.Behind[i].Index)
	})
	list("index ahead of the table", len(d.Ahead), func(i int) string {
		return fmt.Sprintf("%s: table v%d, index v%d", showKey(d.Ahead[i].Key), d.Ahead[i].Table, d.Ahead[i].Index)
	})
}

// progress shows a long run's progress on stderr: one line rewritten in
// place on a terminal (at most 4 times a second), else a line every 5 s,
// so a log gets no carriage returns.
type progress struct {
	w        io.Writer
	terminal bool
	mu       sync.Mutex // updates may come from a run's workers
	last     time.Time
	line     string
}

func newProgress(w io.Writer) *progress { return &progress{w: w, terminal: votesIsTerminal(w)} }

func (p *progress) update(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line = line
	every := 5 * time.Second
	if p.terminal {
		every = 250 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends the progress with its last line, when it showed any.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.terminal && p.line != "":
		fmt.Fprintf(p.w, "\r%s\n", p.line)
	case p.line != "" && !p.last.IsZero():
		fmt.Fprintln(p.w, p.line)
	}
}

// finish ends the progress with line, whether it showed any before.
func (p *progress) finish(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s\n", line)
		return
	}
	fmt.Fprintln(p.w, line)
}
