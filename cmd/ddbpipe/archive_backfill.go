package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

const backfillUsage = `usage: ddbpipe archive backfill -table TABLE [-dry-run] [flags]

Heals the archive of a table whose stream lost records (the archiver fell
more than 24 hours behind and the stream trimmed them: Lambda skips trimmed
records without an error; a poison record; a deleted archive file). It reads
the archive's replayed state, takes a watermark (now, to the second), scans
the table (a parallel, consistent Scan) and writes ONLY the difference as one
file, table=<base>/month=<YYYY-MM>/backfill-<sequence>.parquet:

  missing    in the table, not in the archive  -> MODIFY with the item's image
  different  in both, with another image      -> MODIFY with the item's image
  removed    in the archive, not in the table -> REMOVE

Items archived identically get no row, so running it again writes nothing,
and the live month's vote counts stay exact. The stream keeps flowing: a
stream record recorded at or after the watermark wins over the backfill's
row when the archive is replayed (and compacted); one from before loses.
Run it once the archiver has caught up (IteratorAge near zero): a record
still on its way gets a backfill row too, and the live month would hold that
item twice until it is compacted.

TABLE is the DynamoDB table: a ledger month (ddbpipe-votes-2026-11) goes to
its month's partition; the objects table (no month in its items) goes to the
partition of the watermark's month, compared with every month of its archive.

On AWS, a table with point-in-time recovery can be read from an export instead
of a Scan (no read capacity used, any instant of the last 35 days):
  aws dynamodb export-table-to-point-in-time --table-arn ARN --s3-bucket B \
      --export-format DYNAMODB_JSON --export-time <watermark>
then compared the same way; this command does the Scan (DynamoDB Local has no
export). A Scan of an on-demand table costs one read unit per 4 KB read.

Flags:`

// archiveBackfill is `ddbpipe archive backfill`.
func archiveBackfill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("archive backfill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root")
	state := fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
	bucket := fs.String("bucket", "", "archive bucket (default: $ARCHIVE_BUCKET_NAME or the local stack's)")
	table := fs.String("table", "", "the DynamoDB table to backfill, e.g. ddbpipe-votes-2026-11 or ddbpipe-objects")
	dryRun := fs.Bool("dry-run", false, "print the difference, write nothing")
	show := fs.Int("show", 20, "with -dry-run: how many keys of each kind to print")
	segments := fs.Int("segments", 4, "segments of the parallel Scan")
	force := fs.Bool("force", false, "backfill a table the archive holds nothing of yet")
	fs.Usage = func() {
		fmt.Fprintln(stderr, backfillUsage)
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *table == "" {
		fs.Usage()
		return fmt.Errorf("%w: -table is required", errUsage)
	}
	// A backfill is an operator's repair (OperatorPolicy: the tables'
	// Scan, the archive's files).
	getenv, err := stackEnv(*root, *state, asOperator)
	if err != nil {
		return err
	}
	b := *bucket
	if b == "" {
		b = getenv("ARCHIVE_BUCKET_NAME")
	}
	if b == "" {
		return errors.New("no archive bucket: pass -bucket, export ARCHIVE_BUCKET_NAME, or run `ddbpipe local up`")
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return err
	}
	job := backfillJob{
		DB: awsenv.DynamoDB(cfg), Local: awsenv.Overridden(cfg, "DynamoDB"), S3: awsenv.S3(cfg), Bucket: b,
		Table: *table, DryRun: *dryRun, Force: *force, Segments: *segments, Progress: stderr,
	}
	res, err := job.run(ctx)
	if err != nil {
		return err
	}
	res.print(stdout, *show)
	return nil
}

// backfillS3 is what a backfill needs of S3; *s3.Client satisfies it.
type backfillS3 interface {
	archives3.PartitionAPI
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, opts ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
}

// backfillJob is one backfill, as the command runs it.
type backfillJob struct {
	DB       archiveddb.API
	Local    bool // DynamoDB is a local server
	S3       backfillS3
	Bucket   string
	Table    string
	DryRun   bool
	Force    bool
	Segments int
	Now      func() time.Time // the watermark's clock (time.Now by default)
	Progress io.Writer        // the Scan's progress line; nil for none
}

// backfillResult is what a backfill found and did.
type backfillResult struct {
	Table        string
	Partition    archive.Partition
	Watermark    time.Time
	StreamOff    bool // the table's stream is disabled (a month being retired)
	ArchiveFiles int
	ArchiveRows  int64
	Archived     int // items in the archive's replayed state
	Scanned      int
	Segments     int
	Rows         []archive.Row
	Counts       archive.Backfill
	Key          string       // the backfill file's key ("" when nothing was written)
	File         archive.File // what was written
	DryRun       bool
	Bucket       string
	ReadTook     time.Duration
	ScanTook     time.Duration
	Took         time.Duration
}

func (j backfillJob) run(ctx context.Context) (backfillResult, error) {
	start := time.Now()
	res := backfillResult{Table: j.Table, DryRun: j.DryRun, Bucket: j.Bucket}
	if _, err := j.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(j.Bucket)}); err != nil {
		return res, fmt.Errorf("archive bucket %q: %w (pass -bucket, or check ARCHIVE_BUCKET_NAME)", j.Bucket, err)
	}
	tables := &archiveddb.Tables{DB: j.DB, Local: j.Local, Segments: j.Segments}
	streamOn, err := j.archivedTable(ctx, tables)
	if err != nil {
		return res, err
	}
	res.StreamOff = !streamOn

	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	// The partition is decided by the watermark's month for a table that is
	// not monthly; the watermark itself is taken after the archive is read.
	p := archive.BackfillPartition(j.Table, now())
	res.Partition = p
	parts := &archives3.Partitions{S3: j.S3, Bucket: j.Bucket}
	readStart := time.Now()
	archived, err := j.archived(ctx, parts, p, &res)
	if err != nil {
		return res, err
	}
	res.ReadTook = time.Since(readStart)
	res.Archived = len(archived)

	if err := j.watermark(ctx, now, &res); err != nil {
		return res, err
	}
	var show *progress
	if j.Progress != nil {
		show = newProgress(j.Progress)
		tables.Progress = func(n int64) { show.update(fmt.Sprintf("scanning %s: %d items", j.Table, n)) }
	}
	scan, err := tables.Scan(ctx, j.Table, true)
	if show != nil && err == nil {
		show.finish(fmt.Sprintf("scanning %s: %d items, done", j.Table, len(scan.State)))
	}
	if err != nil {
		return res, err
	}
	res.Scanned, res.Segments, res.ScanTook = len(scan.State), scan.Segments, scan.Took
	if res.Rows, err = archive.BackfillRows(res.Partition, scan, archived, res.Watermark); err != nil {
		return res, err
	}
	res.Counts = archive.CountBackfill(res.Rows, archived)
	if !j.DryRun && len(res.Rows) > 0 {
		res.Key = archive.BackfillKey(res.Partition, res.Watermark)
		if res.File, err = parts.Write(ctx, res.Key, res.Rows); err != nil {
			return res, err
		}
	}
	res.Took = time.Since(start)
	return res, nil
}

// archivedTable checks that the table exists and has a stream (the
// archiver reads only such tables), and says whether the stream is on.
func (j backfillJob) archivedTable(ctx context.Context, tables *archiveddb.Tables) (streamOn bool, err error) {
	t, err := tables.Describe(ctx, j.Table)
	if errors.Is(err, archive.ErrNotFound) {
		return false, fmt.Errorf("table %q does not exist (a retired month's table is gone: its archive is all there is)", j.Table)
	}
	if err != nil {
		return false, err
	}
	if t.StreamARN == "" {
		return false, fmt.Errorf("table %q has no stream: the archiver never read it, so it is not an archived table; nothing to backfill", j.Table)
	}
	return t.StreamEnabled, nil
}

// watermark sets res's watermark (and, for a table that is not monthly,
// its partition), taken before the Scan's first read: a change made from
// then on is recorded at or after it and wins over the Scan's image. Two
// backfills never share a watermark (nor so a file): one taken in the
// second of an earlier backfill waits for the next second.
func (j backfillJob) watermark(ctx context.Context, now func() time.Time, res *backfillResult) error {
	for attempt := 0; ; attempt++ {
		res.Watermark = archive.BackfillWatermark(now())
		if _, _, monthly := ledger.SplitTable(j.Table); !monthly {
			res.Partition = archive.BackfillPartition(j.Table, res.Watermark)
		}
		key := archive.BackfillKey(res.Partition, res.Watermark)
		_, err := j.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(j.Bucket), Key: aws.String(key)})
		var nf *s3types.NotFound
		if errors.As(err, &nf) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("head s3://%s/%s: %w", j.Bucket, key, err)
		}
		if attempt == 2 {
			return fmt.Errorf("a backfill with the watermark %s exists already (s3://%s/%s): try again in a second",
				res.Watermark.Format(time.RFC3339), j.Bucket, key)
		}
		if err := retry.Sleep(ctx, res.Watermark.Add(time.Second).Sub(now())); err != nil {
			return err
		}
	}
}

// archived is the archive's replayed state for the table: its month's
// partition for a monthly table; every month of the table for one that is
// not monthly (its items are archived in the month they last changed).
func (j backfillJob) archived(ctx context.Context, parts *archives3.Partitions, p archive.Partition, res *backfillResult) (archive.State, error) {
	tablePrefix := "table=" + p.Table + "/"
	all, err := archives3.ListFiles(ctx, j.S3, j.Bucket, tablePrefix)
	if err != nil {
		return nil, err
	}
	var data []archive.File
	for _, f := range all {
		rest := strings.TrimPrefix(f.Key, tablePrefix)
		if strings.HasPrefix(rest, "month=") && strings.Count(rest, "/") == 1 && strings.HasSuffix(f.Key, ".parquet") {
			data = append(data, f)
		}
	}
	if len(data) == 0 && !j.Force {
		return nil, fmt.Errorf("the archive holds nothing of %s (s3://%s/%s is empty): is %q archived? Pass -force to backfill it anyway",
			p.Table, j.Bucket, tablePrefix, j.Table)
	}
	if _, _, monthly := ledger.SplitTable(j.Table); monthly {
		c, err := parts.Read(ctx, p)
		if err != nil {
			return nil, err
		}
		res.ArchiveFiles, res.ArchiveRows = len(c.Files), c.Rows
		return c.State, nil
	}
	replay := archive.NewReplay()
	for _, f := range data {
		rows, err := archives3.ReadRows(ctx, j.S3, j.Bucket, f.Key)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if err := replay.Add(r); err != nil {
				return nil, fmt.Errorf("s3://%s/%s: %w", j.Bucket, f.Key, err)
			}
		}
		res.ArchiveFiles++
		res.ArchiveRows += int64(len(rows))
	}
	return replay.State(), nil
}

func (r backfillResult) print(w io.Writer, show int) {
	fmt.Fprintf(w, "backfill of %s into s3://%s/%s\n", r.Table, r.Bucket, r.Partition.Prefix())
	if r.StreamOff {
		fmt.Fprintln(w, "  the table's stream is off (a month being retired)")
	}
	fmt.Fprintf(w, "  archive:    %d files, %d rows, %d items (read in %s)\n", r.ArchiveFiles, r.ArchiveRows, r.Archived, r.ReadTook.Round(time.Millisecond))
	fmt.Fprintf(w, "  watermark:  %s (stream records at or after it win over the backfill)\n", r.Watermark.Format(time.RFC3339))
	fmt.Fprintf(w, "  scanned:    %d items, %d segments (%s)\n", r.Scanned, r.Segments, r.ScanTook.Round(time.Millisecond))
	fmt.Fprintf(w, "  difference: %s\n", r.Counts)
	switch {
	case len(r.Rows) == 0:
		fmt.Fprintln(w, "  the archive matches the table: nothing to write")
	case r.DryRun:
		kinds := map[string][]string{}
		for _, row := range r.Rows {
			kind := "MODIFY"
			if row.EventName == archive.EventRemove {
				kind = "REMOVE"
			}
			kinds[kind] = append(kinds[kind], row.Keys)
		}
		for _, kind := range []string{"MODIFY", "REMOVE"} {
			for i, k := range kinds[kind] {
				if i == show {
					fmt.Fprintf(w, "    ... %d more\n", len(kinds[kind])-show)
					break
				}
				fmt.Fprintf(w, "    %s %s\n", kind, k)
			}
		}
		fmt.Fprintf(w, "  dry run: nothing written (would write %s)\n", archive.BackfillKey(r.Partition, r.Watermark))
	default:
		fmt.Fprintf(w, "  wrote:      s3://%s/%s (%d rows, %s)\n", r.Bucket, r.Key, r.File.Rows, humanBytes(r.File.Bytes))
	}
	fmt.Fprintf(w, "done in %s\n", r.Took.Round(time.Millisecond))
}
