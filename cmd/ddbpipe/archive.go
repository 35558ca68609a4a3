package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// archiveFlags are the flags both archive commands take.
type archiveFlags struct {
	root, state, bucket, table, month string
	// identity signs on a local stack that judges IAM: the analyst's,
	// unless the command is an operator's (votes audit).
	identity string
	wait     time.Duration
}

func (a *archiveFlags) register(fs *flag.FlagSet) {
	a.registerStack(fs)
	fs.StringVar(&a.table, "table", "", "only this table: a base name (ddbpipe-votes) or its view name (votes)")
	fs.StringVar(&a.month, "month", "", "only this month, YYYY-MM")
	fs.DurationVar(&a.wait, "wait", 0, "first wait, up to this long (e.g. 1m), until the votes queue is empty and the archive holds every record of the open months' ledger streams")
}

// registerStack registers the flags that find the stack and its archive
// (what votes audit shares with the archive commands).
func (a *archiveFlags) registerStack(fs *flag.FlagSet) {
	fs.StringVar(&a.root, "root", "", "repository root")
	fs.StringVar(&a.state, "state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
	fs.StringVar(&a.bucket, "bucket", "", "archive bucket (default: $ARCHIVE_BUCKET_NAME or the local stack's)")
}

// archiveEnv is what the archive commands need from the environment.
type archiveEnv struct {
	getenv func(string) string
	s3     *s3.Client
	bucket string
	state  string // the state folder, for the cache
}

func (a *archiveFlags) env(ctx context.Context) (*archiveEnv, error) {
	if a.month != "" {
		if _, err := ledger.Opens(a.month); err != nil {
			return nil, fmt.Errorf("-month %q: want YYYY-MM", a.month)
		}
	}
	identity := a.identity
	if identity == "" {
		identity = asAnalyst
	}
	getenv, err := stackEnv(a.root, a.state, identity)
	if err != nil {
		return nil, err
	}
	bucket := a.bucket
	if bucket == "" {
		bucket = getenv("ARCHIVE_BUCKET_NAME")
	}
	if bucket == "" {
		return nil, errors.New("no archive bucket: pass -bucket, export ARCHIVE_BUCKET_NAME, or run `ddbpipe local up`")
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return nil, err
	}
	state, err := stateFolder(a.root, a.state)
	if err != nil && a.root == "" && a.state == "" {
		// Outside the repository (a deployed stack's analyst): the cache
		// goes to the user's cache folder.
		state, err = userStateFolder()
	}
	if err != nil {
		return nil, err
	}
	return &archiveEnv{getenv: getenv, s3: awsenv.S3(cfg), bucket: bucket, state: state}, nil
}

// userStateFolder is the folder the archive commands keep their cache in
// when they run outside the repository: <user cache dir>/ddbpipe.
func userStateFolder() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no folder for the archive cache (run inside the repository, or pass -state-dir): %w", err)
	}
	return filepath.Join(dir, "ddbpipe"), nil
}

// parseInterspersed parses flags that may come after positional arguments
// (`archive query "SELECT ..." -table votes`) and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// argFlags collects repeated -arg values: a named query's parameters.
type argFlags []string

func (a *argFlags) String() string     { return strings.Join(*a, ",") }
func (a *argFlags) Set(v string) error { *a = append(*a, v); return nil }

func archiveQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("archive query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af archiveFlags
	af.register(fs)
	format := fs.String("format", "table", "output: table, csv, json (an array of objects, [] for no row) or jsonl (one object per line)")
	named := fs.String("named", "", "run a named query (the Athena named queries of template.yaml); -list shows them")
	list := fs.Bool("list", false, "list the named queries and the helper macros, and exit")
	cache := fs.String("cache", "", "local copy of the archive (default: <state-dir>/archive-cache)")
	offline := fs.Bool("offline", false, "query the local copy as it is, without listing the bucket")
	var params argFlags
	fs.Var(&params, "arg", "a value for the query's next ? (repeat for several)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: ddbpipe archive query [flags] "SELECT ..."   or   ddbpipe archive query -named NAME [-arg V]...

Views: one per table (votes, objects: the base name's last word; the Glue
tables' twins, with the same typed columns) and archive (every table).
Macros: attr(doc, name), seq_order(seq), json_extract_scalar(doc, path) as in
Athena. Examples:
  ddbpipe archive query "SELECT poll_id, count(*) FROM votes WHERE month = '2026-11' GROUP BY 1"
  ddbpipe archive query -named votes-per-option -arg 2026-11 -arg color

Flags:`)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *list {
		return listNamed(stdout)
	}
	switch *format {
	case archiveduckdb.FormatTable, archiveduckdb.FormatCSV, archiveduckdb.FormatJSON, archiveduckdb.FormatJSONLines:
	default:
		return fmt.Errorf("-format %q: want table, csv or json (or jsonl: one object per line)", *format)
	}
	query, nq, err := queryToRun(*named, pos, params)
	if errors.Is(err, errUsage) {
		fs.Usage()
	}
	if err != nil {
		return err
	}

	db, env, err := af.open(ctx, *cache, *offline, catchUp{queue: true, archived: true}, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	var qargs []any
	if *named != "" {
		if query, err = nq.Expand(namedVars(env.getenv, db.Views)); err != nil {
			return err
		}
		for _, p := range params {
			qargs = append(qargs, p)
		}
	}
	res, err := db.Show(ctx, query, qargs...)
	if err != nil {
		return err
	}
	return archiveduckdb.WriteResult(stdout, res, *format)
}

// queryToRun is the SQL statement given, or the named query looked up
// with its arguments checked (its tables are filled in once the archive is
// known); errUsage when neither is given.
func queryToRun(named string, pos []string, params argFlags) (string, archive.NamedQuery, error) {
	switch {
	case named != "" && len(pos) > 0:
		return "", archive.NamedQuery{}, errors.New("give either -named or a SQL statement, not both")
	case named != "":
		nq, err := archive.LookupNamedQuery(named)
		if err != nil {
			return "", nq, err
		}
		return "", nq, nq.CheckArgs(params)
	case len(pos) == 1:
		return pos[0], archive.NamedQuery{}, nil
	case len(pos) == 0:
		return "", archive.NamedQuery{}, errUsage
	default:
		return "", archive.NamedQuery{}, fmt.Errorf("one SQL statement, quoted; got %d arguments (%q...)", len(pos), pos[1])
	}
}

// open brings the local copy of the archive up to date (unless offline),
// after waiting (-wait) until the pipeline caught up as c says, and opens
// it in DuckDB with a view per table.
func (af *archiveFlags) open(ctx context.Context, cacheDir string, offline bool, c catchUp, stderr io.Writer) (*archiveduckdb.DB, *archiveEnv, error) {
	env, err := af.env(ctx)
	if err != nil {
		return nil, nil, err
	}
	cache := &archiveduckdb.Cache{Dir: cacheDir, S3: env.s3, Bucket: env.bucket, Progress: progressTo(stderr)}
	if cache.Dir == "" {
		cache.Dir = filepath.Join(env.state, "archive-cache")
	}
	filter := archiveduckdb.Filter{Table: af.table, Month: af.month}
	if err := waitCaughtUp(ctx, af.root, af.state, c, af.wait, stderr); err != nil {
		return nil, nil, err
	}
	// The stack's tables have views even before the archive holds a file
	// of theirs: a fresh stack's query answers no rows.
	known := []string{env.getenv("LEDGER_TABLE_PREFIX"), env.getenv("OBJECTS_TABLE_NAME")}
	if !offline {
		res, err := cache.Sync(ctx, filter)
		switch {
		case errors.Is(err, archiveduckdb.ErrEmpty) && slices.ContainsFunc(known, func(t string) bool { return t != "" }):
			if filter == (archiveduckdb.Filter{}) {
				// The bucket holds nothing: neither does its copy (a
				// local stack started again, in memory, keeps its state
				// folder).
				if err := os.RemoveAll(cache.Root()); err != nil {
					return nil, nil, err
				}
			}
		case err != nil:
			return nil, nil, err
		}
		for _, k := range res.Skipped {
			fmt.Fprintf(stderr, "archive: skipped s3://%s/%s: not a Parquet file\n", env.bucket, k)
		}
	}
	db, err := archiveduckdb.Open(ctx, cache.Root(), filter, known...)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range db.Skipped {
		fmt.Fprintf(stderr, "archive: skipped %s: not a Parquet file\n", p)
	}
	return db, env, nil
}

// namedVars fills a named query's table variables: the local stack's names
// when known, else the tables whose views are votes and objects.
func namedVars(getenv func(string) string, views []archiveduckdb.View) map[string]string {
	vars := map[string]string{"ArchiveTable": "archive", "VotesTable": getenv("LEDGER_TABLE_PREFIX"), "ObjectsTable": getenv("OBJECTS_TABLE_NAME")}
	for _, v := range views {
		switch {
		case v.Name == "votes" && vars["VotesTable"] == "":
			vars["VotesTable"] = v.Table
		case v.Name == "objects" && vars["ObjectsTable"] == "":
			vars["ObjectsTable"] = v.Table
		}
	}
	return vars
}

func listNamed(w io.Writer) error {
	for _, q := range archive.NamedQueries {
		params := ""
		for _, p := range q.Params {
			params += " -arg <" + p + ">"
		}
		fmt.Fprintf(w, "%s%s\n  %s\n\n%s\n", q.Name, params, q.Description, indentSQL(q.SQL))
	}
	_, err := fmt.Fprint(w, `Helper macros (DuckDB):
  attr(doc, name)                 an attribute of keys, extra or old_image (type-tagged JSON) as text,
                                  whatever its type: attr(extra, 'note')
  json_extract_scalar(doc, path)  Athena's function: json_extract_scalar(extra, '$.note.S')
  seq_order(sequence_number)      sorts sequence numbers numerically
`)
	return err
}

func indentSQL(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") + "\n"
}

// progressTo shows a download's progress on w: one line rewritten in
// place on a terminal, plain lines every few seconds in a log (progress).
func progressTo(w io.Writer) func(archiveduckdb.SyncProgress) {
	show := newProgress(w)
	return func(p archiveduckdb.SyncProgress) {
		show.update(fmt.Sprintf("archive: downloading %d/%d files, %s of %s", p.Done, p.Total, humanBytes(p.Bytes), humanBytes(p.TotalBytes)))
		if p.Done == p.Total {
			show.done()
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func archiveLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("archive ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af archiveFlags
	af.register(fs)
	files := fs.Bool("files", false, "list each partition's files too")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	env, err := af.env(ctx)
	if err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, af.root, af.state, catchUp{queue: true, archived: true}, af.wait, stderr); err != nil {
		return err
	}
	l, err := archiveduckdb.List(ctx, env.s3, env.bucket, archiveduckdb.Filter{Table: af.table, Month: af.month})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tMONTH\tFILES\tROWS\tBYTES\tMANIFEST")
	var totalFiles int
	var totalRows, totalBytes int64
	for _, pl := range l.Partitions {
		m, hasManifest, merr := archiveduckdb.Manifest(ctx, env.s3, env.bucket, pl)
		rows := map[string]int64{}
		if hasManifest && merr == nil {
			for _, f := range m.Files {
				rows[f.Key] = f.Rows
			}
		}
		var sum int64
		unknown := false
		for _, o := range pl.Data {
			n, ok := rows[o.Key]
			if !ok {
				if n, err = archiveduckdb.Rows(ctx, env.s3, env.bucket, o.Key); err != nil {
					return err
				}
				rows[o.Key] = n
			}
			if n < 0 {
				unknown = true
				continue
			}
			sum += n
		}
		rowText := fmt.Sprint(sum)
		if unknown {
			rowText += "+?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", pl.Partition.Table, pl.Partition.Month, len(pl.Data), rowText, humanBytes(pl.Bytes()),
			manifestStatus(m, hasManifest, merr, pl))
		if *files {
			for _, o := range pl.Data {
				n := "?"
				if rows[o.Key] >= 0 {
					n = fmt.Sprint(rows[o.Key])
				}
				fmt.Fprintf(tw, "\t\t\t%s\t%s\t%s\n", n, humanBytes(o.Bytes), o.Key[len(pl.Partition.Prefix()):])
			}
			for _, k := range pl.Other {
				fmt.Fprintf(tw, "\t\t\t\t\t%s (not Parquet: ignored by readers)\n", k[len(pl.Partition.Prefix()):])
			}
		}
		totalFiles += len(pl.Data)
		totalRows += sum
		totalBytes += pl.Bytes()
	}
	fmt.Fprintf(tw, "total\t%d partitions\t%d\t%d\t%s\t\n", len(l.Partitions), totalFiles, totalRows, humanBytes(totalBytes))
	return tw.Flush()
}

// manifestStatus says whether a partition's files are its manifest's.
func manifestStatus(m archive.Manifest, ok bool, err error, pl archiveduckdb.PartitionListing) string {
	switch {
	case err != nil:
		return "invalid: " + err.Error()
	case !ok:
		return "none (month open or not retired)"
	}
	listed := make([]archive.File, len(pl.Data))
	for i, o := range pl.Data {
		listed[i] = archive.File{Key: o.Key, Bytes: o.Bytes}
	}
	d := m.Drift(listed)
	status := "ok"
	if !d.OK() {
		var parts []string
		for _, p := range []struct {
			n    int
			what string
		}{{len(d.Missing), "missing"}, {len(d.Changed), "changed"}, {len(d.Unlisted), "unlisted"}, {len(d.Leftover), "leftover"}} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		status = "drift: " + strings.Join(parts, ", ")
	}
	if v := m.Verification; v != nil {
		verdict := "verified"
		if !v.OK {
			verdict = "verification failed"
		}
		if v.Snapshot {
			verdict += " (snapshot)"
		}
		status += fmt.Sprintf(", %s %s", verdict, v.At.UTC().Format("2006-01-02"))
	}
	return status
}
