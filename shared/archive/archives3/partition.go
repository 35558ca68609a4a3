package archives3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// PartitionAPI is what the partition operations need; *s3.Client satisfies it.
type PartitionAPI interface {
	PutObjectAPI
	GetObjectAPI
	ListObjectsAPI
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

var (
	_ PartitionAPI       = (*s3.Client)(nil)
	_ archive.Partitions = (*Partitions)(nil)
)

// Partitions reads, verifies and compacts whole partitions of the archive
// (table=<base>/month=<YYYY-MM>/): the archive side of a month's retirement.
//
// # Compaction and crashes
//
// Compact works in this order:
//
//  1. put each merged file (archive.CompactedKey: a name fixed by its
//     inputs, so a re-run writes the same object);
//  2. put _manifest.json: the files that now make the month, and the inputs
//     they replaced;
//  3. delete the replaced inputs.
//
// S3 has no multi-object swap, so between 1 and 3 a merged file and its
// inputs are both present. No row is ever missing: inputs are deleted only
// after the file holding their rows and the manifest naming it are written.
// The rows present twice are the same records (same sequence number and
// event id), and every reader in ddbpipe de-duplicates on that pair:
// archive.Replay (verification, Read) and archive.MergeRows (compaction).
// A reader that wants the exact file set reads the manifest and skips the
// files it lists as Replaced. A crash between 1 and 2 leaves a merged file
// no manifest names; the next Compact plans it together with its inputs
// (all small) and merges them again, de-duplicated. A crash between 2 and 3
// leaves Replaced files present (archive.Drift Leftover); the next Compact
// deletes them first — only when every file the manifest lists is present.
type Partitions struct {
	S3     PartitionAPI
	Bucket string
	Log    *slog.Logger
	Now    func() time.Time
	// Readers bounds the objects read at once (default 8).
	Readers int
}

func (a *Partitions) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Partitions) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

// isData reports whether a listed key is a data file of the partition.
func isData(p archive.Partition, key string) bool {
	return strings.HasPrefix(key, p.Prefix()) && key != p.ManifestKey() && strings.HasSuffix(key, ".parquet") &&
		!strings.Contains(strings.TrimPrefix(key, p.Prefix()), "/")
}

// dataFiles lists the partition's data files.
func (a *Partitions) dataFiles(ctx context.Context, p archive.Partition) ([]archive.File, error) {
	all, err := ListFiles(ctx, a.S3, a.Bucket, p.Prefix())
	if err != nil {
		return nil, err
	}
	var files []archive.File
	for _, f := range all {
		if isData(p, f.Key) {
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Key < files[j].Key })
	return files, nil
}

// get reads one object's bytes.
func (a *Partitions) get(ctx context.Context, key string) ([]byte, error) {
	out, err := a.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("archives3: get s3://%s/%s: %w", a.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("archives3: read s3://%s/%s: %w", a.Bucket, key, err)
	}
	return b, nil
}

// readFile reads a data file's rows, with its row count and checksum.
func (a *Partitions) readFile(ctx context.Context, key string) (archive.File, []archive.Row, error) {
	data, err := a.get(ctx, key)
	if err != nil {
		return archive.File{}, nil, err
	}
	rows, err := archiveparquet.Unmarshal(data)
	if err != nil {
		return archive.File{}, nil, fmt.Errorf("s3://%s/%s: %w", a.Bucket, key, err)
	}
	sum := sha256.Sum256(data)
	f := archive.File{Key: key, Rows: int64(len(rows)), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	for _, r := range rows {
		if f.MinSequence == "" || ledger.CompareSeq(r.SequenceNumber, f.MinSequence) < 0 {
			f.MinSequence = r.SequenceNumber
		}
		if ledger.CompareSeq(r.SequenceNumber, f.MaxSequence) > 0 {
			f.MaxSequence = r.SequenceNumber
		}
	}
	return f, rows, nil
}

// readAll reads files in parallel and hands each one's rows to fn, one
// file at a time, in key order.
func (a *Partitions) readAll(ctx context.Context, keys []string, fn func(archive.File, []archive.Row) error) error {
	n := a.Readers
	if n <= 0 {
		n = 8
	}
	type result struct {
		f    archive.File
		rows []archive.Row
		err  error
		done chan struct{}
	}
	results := make([]*result, len(keys))
	for i := range results {
		results[i] = &result{done: make(chan struct{})}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for i, k := range keys {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for _, r := range results[i:] {
					r.err = ctx.Err()
					close(r.done)
				}
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				r := results[i]
				r.f, r.rows, r.err = a.readFile(ctx, k)
				close(r.done)
			})
		}
	})
	for _, r := range results {
		<-r.done
		if r.err != nil {
			return r.err
		}
		if err := fn(r.f, r.rows); err != nil {
			return err
		}
		r.rows = nil
	}
	return nil
}

// Read lists and reads every data file of the partition and replays their
// rows: the archive's view of the table, for the drain check and the
// verification. Files a half-done compaction left beside their merged file
// are read too; the replay counts each record once.
func (a *Partitions) Read(ctx context.Context, p archive.Partition) (archive.Contents, error) {
	files, err := a.dataFiles(ctx, p)
	if err != nil {
		return archive.Contents{}, err
	}
	keys := make([]string, len(files))
	for i, f := range files {
		keys[i] = f.Key
	}
	c := archive.Contents{Sequences: map[string]bool{}}
	replay := archive.NewReplay()
	err = a.readAll(ctx, keys, func(f archive.File, rows []archive.Row) error {
		c.Files = append(c.Files, f)
		c.Rows += f.Rows
		for _, r := range rows {
			if err := replay.Add(r); err != nil {
				return fmt.Errorf("archives3: %s: %w", f.Key, err)
			}
			c.Sequences[ledger.SeqKey(r.SequenceNumber)] = true
		}
		return nil
	})
	if err != nil {
		return archive.Contents{}, err
	}
	c.State = replay.State()
	if m, err := a.manifest(ctx, p); err != nil {
		return archive.Contents{}, err
	} else if m != nil {
		c.Manifest = m
	}
	return c, nil
}

// manifest reads the partition's manifest; nil when there is none.
func (a *Partitions) manifest(ctx context.Context, p archive.Partition) (*archive.Manifest, error) {
	data, err := a.get(ctx, p.ManifestKey())
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := archive.ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("archives3: s3://%s/%s: %w", a.Bucket, p.ManifestKey(), err)
	}
	return &m, nil
}

// Write puts rows into the partition as one file at key (a snapshot export).
func (a *Partitions) Write(ctx context.Context, key string, rows []archive.Row) (archive.File, error) {
	first, last := seqRange(rows)
	return PutRows(ctx, a.S3, a.Bucket, key, rows, first, last)
}

func seqRange(rows []archive.Row) (first, last string) {
	for _, r := range rows {
		if first == "" || ledger.CompareSeq(r.SequenceNumber, first) < 0 {
			first = r.SequenceNumber
		}
		if ledger.CompareSeq(r.SequenceNumber, last) > 0 {
			last = r.SequenceNumber
		}
	}
	return first, last
}

// describe returns a file's rows and checksum from the metadata the
// archiver and PutRows set, reading the file when they are missing.
func (a *Partitions) describe(ctx context.Context, f archive.File) (archive.File, error) {
	h, err := a.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(f.Key)})
	if err != nil {
		return archive.File{}, fmt.Errorf("archives3: head s3://%s/%s: %w", a.Bucket, f.Key, err)
	}
	md := map[string]string{}
	for k, v := range h.Metadata {
		md[strings.ToLower(k)] = v
	}
	rows, err := strconv.ParseInt(md[MetaRows], 10, 64)
	if err != nil || md[MetaSHA256] == "" {
		got, _, err := a.readFile(ctx, f.Key)
		return got, err
	}
	return archive.File{Key: f.Key, Rows: rows, Bytes: aws.ToInt64(h.ContentLength), SHA256: md[MetaSHA256],
		MinSequence: md[MetaFirstSequence], MaxSequence: md[MetaLastSequence]}, nil
}

// Compact replays the partition into one file of its state (pol.Replay, the
// rotator's default) or merges its small files, writes the manifest and
// deletes the replaced inputs, in the crash-safe order described on
// Partitions: while the output and its inputs both exist, the output's rows
// are the replayed ones, which exact queries keep. It first finishes what an earlier, interrupted compaction
// left (inputs its manifest lists as replaced).
func (a *Partitions) Compact(ctx context.Context, p archive.Partition, pol archive.CompactionPolicy, sourceTable string, v archive.Verification) (archive.Compaction, error) {
	files, err := a.dataFiles(ctx, p)
	if err != nil {
		return archive.Compaction{}, err
	}
	res := archive.Compaction{FilesBefore: len(files)}
	if old, err := a.manifest(ctx, p); err != nil {
		return res, err
	} else if old != nil {
		d := old.Drift(files)
		if len(d.Leftover) > 0 && len(d.Missing) == 0 {
			a.log().Info("finishing an interrupted compaction", "partition", p.Prefix(), "leftover", len(d.Leftover))
			if err := a.delete(ctx, d.Leftover); err != nil {
				return res, err
			}
			res.Merged += len(d.Leftover)
			if files, err = a.dataFiles(ctx, p); err != nil {
				return res, err
			}
		}
	}
	var live []archive.File
	var gone []string
	if pol.Replay {
		live, gone, err = a.replay(ctx, p, files)
	} else {
		live, gone, err = a.merge(ctx, p, files, pol)
	}
	if err != nil {
		return res, err
	}
	man := archive.NewManifest(p, live, gone, a.now())
	man.SourceTable, man.Verification = sourceTable, &v
	body, err := man.JSON()
	if err != nil {
		return res, err
	}
	if _, err := a.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(a.Bucket), Key: aws.String(p.ManifestKey()), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"),
	}); err != nil {
		return res, fmt.Errorf("archives3: put s3://%s/%s: %w", a.Bucket, p.ManifestKey(), err)
	}
	if err := a.delete(ctx, gone); err != nil {
		return res, err
	}
	res.Merged += len(gone)
	res.FilesAfter = len(man.Files)
	res.Manifest = man
	return res, nil
}

// replay writes the partition's replayed state (archive.PlanReplay,
// archive.ReplayRows) as one file: the files that remain, and the inputs
// it replaces.
func (a *Partitions) replay(ctx context.Context, p archive.Partition, files []archive.File) (live []archive.File, gone []string, err error) {
	m, ok := archive.PlanReplay(p, files)
	if !ok {
		for _, f := range files {
			d, err := a.describe(ctx, f)
			if err != nil {
				return nil, nil, err
			}
			live = append(live, d)
		}
		return live, nil, nil
	}
	keys := make([]string, len(m.Inputs))
	for i, in := range m.Inputs {
		keys[i] = in.Key
	}
	var rows []archive.Row
	if err := a.readAll(ctx, keys, func(_ archive.File, rs []archive.Row) error {
		rows = append(rows, rs...)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	state := archive.ReplayRows(rows)
	first, last := seqRange(state)
	f, err := PutRows(ctx, a.S3, a.Bucket, m.Output, state, first, last)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		if k != m.Output {
			gone = append(gone, k)
		}
	}
	return []archive.File{f}, gone, nil
}

// merge merges the partition's small files (archive.PlanCompaction): the
// files that remain, and the inputs merged away.
func (a *Partitions) merge(ctx context.Context, p archive.Partition, files []archive.File, pol archive.CompactionPolicy) (live []archive.File, gone []string, err error) {
	replaced := map[string]bool{}
	for _, m := range archive.PlanCompaction(p, files, pol) {
		var sets [][]archive.Row
		keys := make([]string, len(m.Inputs))
		for i, in := range m.Inputs {
			keys[i] = in.Key
		}
		if err := a.readAll(ctx, keys, func(_ archive.File, rows []archive.Row) error {
			sets = append(sets, rows)
			return nil
		}); err != nil {
			return nil, nil, err
		}
		rows := archive.MergeRows(sets...)
		first, last := seqRange(rows)
		f, err := PutRows(ctx, a.S3, a.Bucket, m.Output, rows, first, last)
		if err != nil {
			return nil, nil, err
		}
		live = append(live, f)
		for _, k := range keys {
			if k != m.Output { // an output merged again keeps its name only if its inputs are the same
				replaced[k] = true
				gone = append(gone, k)
			}
		}
	}
	outputs := map[string]bool{}
	for _, f := range live {
		outputs[f.Key] = true
	}
	for _, f := range files {
		if replaced[f.Key] || outputs[f.Key] {
			continue
		}
		d, err := a.describe(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		live = append(live, d)
	}
	return live, gone, nil
}

// delete removes keys, 1,000 to a request.
func (a *Partitions) delete(ctx context.Context, keys []string) error {
	for start := 0; start < len(keys); start += 1000 {
		var objs []s3types.ObjectIdentifier
		for _, k := range keys[start:min(start+1000, len(keys))] {
			objs = append(objs, s3types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := a.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(a.Bucket), Delete: &s3types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
		if err != nil {
			return fmt.Errorf("archives3: delete %d objects in s3://%s: %w", len(objs), a.Bucket, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("archives3: delete s3://%s/%s: %s %s (%d failed)", a.Bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors))
		}
	}
	return nil
}
