package archiveduckdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// Filter narrows the archive to one table and/or one month. Table is a base
// name ("ddbpipe-votes") or its view name ("votes"); empty means all.
type Filter struct {
	Table string
	Month string
}

// Object is one object of a partition, as listed.
type Object struct {
	Key       string
	Partition archive.Partition
	Bytes     int64
	ETag      string
}

// Listing is the archive's partitions and their objects, as listed now.
type Listing struct {
	Bucket     string
	Partitions []PartitionListing
}

// PartitionListing is one partition's objects. Data are the .parquet
// objects; Manifest is the _manifest.json's key when there is one; Other
// are objects that are neither (ignored by every reader).
type PartitionListing struct {
	Partition archive.Partition
	Data      []Object
	Manifest  string
	Other     []string
}

// Bytes is the size of the partition's data objects.
func (p PartitionListing) Bytes() int64 {
	var n int64
	for _, o := range p.Data {
		n += o.Bytes
	}
	return n
}

// Tables lists the base names in the listing, sorted.
func (l Listing) Tables() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range l.Partitions {
		if !seen[p.Partition.Table] {
			seen[p.Partition.Table] = true
			out = append(out, p.Partition.Table)
		}
	}
	sort.Strings(out)
	return out
}

// List lists the archive's partitions under bucket, narrowed by f. It fails
// with ErrUnknownTable when f names a table the archive does not hold, and
// ErrEmpty when nothing matches.
func List(ctx context.Context, api *s3.Client, bucket string, f Filter) (Listing, error) {
	l := Listing{Bucket: bucket}
	byPart := map[archive.Partition]*PartitionListing{}
	var order []archive.Partition
	p := s3.NewListObjectsV2Paginator(api, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("table=")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return Listing{}, fmt.Errorf("archiveduckdb: list s3://%s/table=: %w", bucket, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			part, ok := partitionOf(key)
			if !ok {
				continue // not under table=<base>/month=<YYYY-MM>/
			}
			pl := byPart[part]
			if pl == nil {
				pl = &PartitionListing{Partition: part}
				byPart[part] = pl
				order = append(order, part)
			}
			switch {
			case key == part.ManifestKey():
				pl.Manifest = key
			case strings.HasSuffix(key, ".parquet") && !hidden(key):
				pl.Data = append(pl.Data, Object{Key: key, Partition: part, Bytes: aws.ToInt64(o.Size), ETag: strings.Trim(aws.ToString(o.ETag), `"`)})
			default:
				pl.Other = append(pl.Other, key)
			}
		}
	}
	all := Listing{Bucket: bucket}
	for _, part := range order {
		all.Partitions = append(all.Partitions, *byPart[part])
	}
	tables := all.Tables()
	table := f.Table
	if table != "" {
		base, ok := resolveTable(tables, table)
		if !ok {
			if len(tables) == 0 {
				return Listing{}, fmt.Errorf("%w: s3://%s holds no partitions", ErrEmpty, bucket)
			}
			return Listing{}, fmt.Errorf("%w: %q (the archive holds %s)", ErrUnknownTable, table, strings.Join(describeTables(tables), ", "))
		}
		table = base
	}
	for _, pl := range all.Partitions {
		if (table == "" || pl.Partition.Table == table) && (f.Month == "" || pl.Partition.Month == f.Month) {
			l.Partitions = append(l.Partitions, pl)
		}
	}
	sort.Slice(l.Partitions, func(i, j int) bool {
		a, b := l.Partitions[i].Partition, l.Partitions[j].Partition
		return a.Table < b.Table || a.Table == b.Table && a.Month < b.Month
	})
	if len(l.Partitions) == 0 {
		what := "no partitions"
		if f.Table != "" || f.Month != "" {
			what = fmt.Sprintf("no partitions for table %q month %q", f.Table, f.Month)
		}
		return Listing{}, fmt.Errorf("%w: s3://%s holds %s", ErrEmpty, bucket, what)
	}
	return l, nil
}

// partitionOf parses table=<base>/month=<YYYY-MM>/<name>.
func partitionOf(key string) (archive.Partition, bool) {
	t, rest, ok := strings.Cut(key, "/")
	if !ok || !strings.HasPrefix(t, "table=") {
		return archive.Partition{}, false
	}
	m, name, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(m, "month=") || name == "" || strings.Contains(name, "/") {
		return archive.Partition{}, false
	}
	p := archive.Partition{Table: strings.TrimPrefix(t, "table="), Month: strings.TrimPrefix(m, "month=")}
	if p.Table == "" || !validMonth(p.Month) {
		return archive.Partition{}, false
	}
	return p, true
}

func validMonth(m string) bool {
	_, err := ledger.Opens(m)
	return err == nil
}

// hidden: a name Athena and Hive skip (leading "_" or ".").
func hidden(key string) bool {
	name := key[strings.LastIndex(key, "/")+1:]
	return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")
}

// Cache keeps local copies of the archive's Parquet objects, so DuckDB can
// query them (httpfs is not available offline). Files live under
// Dir/<bucket>/<key>; an index remembers each file's ETag and size, so an
// object is downloaded again only when it changed, and files whose object
// is gone (merged by a compaction) are removed.
type Cache struct {
	Dir    string
	S3     *s3.Client
	Bucket string
	// Progress, when set, is called after each download (and once before
	// the first, with done 0).
	Progress func(SyncProgress)
	// Workers downloading in parallel (4 by default).
	Workers int
}

// SyncProgress reports a sync under way.
type SyncProgress struct {
	Done, Total int   // files to download
	Bytes       int64 // downloaded so far
	TotalBytes  int64
}

// SyncResult is what a sync did.
type SyncResult struct {
	Listing    Listing
	Downloaded int
	Bytes      int64 // downloaded
	Reused     int   // already cached with the same ETag and size
	Removed    int   // local files whose object is gone
	// Skipped lists objects that are not Parquet files (they would make
	// every query fail); they are not cached.
	Skipped []string
}

type indexEntry struct {
	ETag    string `json:"etag"`
	Bytes   int64  `json:"bytes"`
	Invalid bool   `json:"invalid,omitempty"` // not a Parquet file: kept out of the tree
}

// Root is the folder holding the bucket's copy: the root of the
// table=/month= tree that Open reads.
func (c *Cache) Root() string { return filepath.Join(c.Dir, c.Bucket) }

func (c *Cache) indexPath() string { return filepath.Join(c.Root(), ".ddbpipe-cache.json") }

// Sync brings the local copy of the partitions f selects up to date with
// the bucket. Partitions outside f are left as they are.
func (c *Cache) Sync(ctx context.Context, f Filter) (SyncResult, error) {
	l, err := List(ctx, c.S3, c.Bucket, f)
	if err != nil {
		return SyncResult{}, err
	}
	res := SyncResult{Listing: l}
	index, err := c.readIndex()
	if err != nil {
		return res, err
	}
	var todo []Object
	var total int64
	live := map[string]bool{}
	for _, pl := range l.Partitions {
		for _, o := range pl.Data {
			live[o.Key] = true
			e, ok := index[o.Key]
			switch {
			case ok && e.ETag == o.ETag && e.Bytes == o.Bytes && e.Invalid:
				res.Skipped = append(res.Skipped, o.Key)
			case ok && e.ETag == o.ETag && e.Bytes == o.Bytes && sizeIs(c.localPath(o.Key), o.Bytes):
				res.Reused++
			default:
				todo = append(todo, o)
				total += o.Bytes
			}
		}
	}
	// Remove copies of objects that are gone, within the synced partitions.
	synced := map[archive.Partition]bool{}
	for _, pl := range l.Partitions {
		synced[pl.Partition] = true
	}
	for key := range index {
		if p, ok := partitionOf(key); ok && synced[p] && !live[key] {
			if err := os.Remove(c.localPath(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return res, fmt.Errorf("archiveduckdb: remove stale copy: %w", err)
			}
			delete(index, key)
			res.Removed++
		}
	}

	var mu sync.Mutex
	progress := SyncProgress{Total: len(todo), TotalBytes: total}
	if c.Progress != nil && len(todo) > 0 {
		c.Progress(progress)
	}
	jobs := make(chan Object)
	errs := make(chan error, len(todo))
	var wg sync.WaitGroup
	workers := c.Workers
	if workers <= 0 {
		workers = 4
	}
	for range min(workers, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range jobs {
				valid, err := c.download(ctx, o)
				mu.Lock()
				if err != nil {
					errs <- err
				} else {
					index[o.Key] = indexEntry{ETag: o.ETag, Bytes: o.Bytes, Invalid: !valid}
					if !valid {
						res.Skipped = append(res.Skipped, o.Key)
					}
					res.Downloaded++
					res.Bytes += o.Bytes
					progress.Done++
					progress.Bytes += o.Bytes
					if c.Progress != nil {
						c.Progress(progress)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, o := range todo {
		jobs <- o
	}
	close(jobs)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	sort.Strings(res.Skipped)
	if err := c.writeIndex(index); err != nil {
		all = append(all, err)
	}
	return res, errors.Join(all...)
}

func (c *Cache) localPath(key string) string {
	return filepath.Join(c.Root(), filepath.FromSlash(key))
}

func sizeIs(path string, n int64) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() == n
}

// parquetMagic opens and ends every Parquet file.
var parquetMagic = []byte("PAR1")

// download copies one object into the cache, through a temporary file
// renamed into place. An object that is not a Parquet file (no PAR1 at both
// ends) is not kept: valid is false.
func (c *Cache) download(ctx context.Context, o Object) (valid bool, err error) {
	out, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(o.Key)})
	if err != nil {
		return false, fmt.Errorf("archiveduckdb: get s3://%s/%s: %w", c.Bucket, o.Key, err)
	}
	defer out.Body.Close()
	path := c.localPath(o.Key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("archiveduckdb: cache folder: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return false, fmt.Errorf("archiveduckdb: cache file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	n, err := io.Copy(tmp, out.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("archiveduckdb: download s3://%s/%s: %w", c.Bucket, o.Key, err)
	}
	if n != o.Bytes {
		return false, fmt.Errorf("archiveduckdb: download s3://%s/%s: got %d bytes, listed %d", c.Bucket, o.Key, n, o.Bytes)
	}
	if !isParquet(tmp.Name(), n) {
		_ = os.Remove(path) // an older, valid copy no longer matches the object
		return false, nil
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("archiveduckdb: cache file: %w", err)
	}
	return true, nil
}

func isParquet(path string, size int64) bool {
	if size < 12 { // magic, footer length, magic
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head, tail := make([]byte, 4), make([]byte, 4)
	if _, err := f.ReadAt(head, 0); err != nil {
		return false
	}
	if _, err := f.ReadAt(tail, size-4); err != nil {
		return false
	}
	return bytes.Equal(head, parquetMagic) && bytes.Equal(tail, parquetMagic)
}

func (c *Cache) readIndex() (map[string]indexEntry, error) {
	index := map[string]indexEntry{}
	b, err := os.ReadFile(c.indexPath())
	if errors.Is(err, os.ErrNotExist) {
		return index, nil
	}
	if err != nil {
		return nil, fmt.Errorf("archiveduckdb: read cache index: %w", err)
	}
	if err := json.Unmarshal(b, &index); err != nil {
		// A damaged index costs a download, not a failure.
		return map[string]indexEntry{}, nil
	}
	return index, nil
}

func (c *Cache) writeIndex(index map[string]indexEntry) error {
	b, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return fmt.Errorf("archiveduckdb: encode cache index: %w", err)
	}
	if err := os.MkdirAll(c.Root(), 0o755); err != nil {
		return fmt.Errorf("archiveduckdb: cache folder: %w", err)
	}
	tmp := c.indexPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("archiveduckdb: write cache index: %w", err)
	}
	if err := os.Rename(tmp, c.indexPath()); err != nil {
		return fmt.Errorf("archiveduckdb: write cache index: %w", err)
	}
	return nil
}

// Manifest reads a partition's _manifest.json (ok false when it has none).
func Manifest(ctx context.Context, api *s3.Client, bucket string, pl PartitionListing) (m archive.Manifest, ok bool, err error) {
	if pl.Manifest == "" {
		return archive.Manifest{}, false, nil
	}
	out, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(pl.Manifest)})
	if err != nil {
		return archive.Manifest{}, false, fmt.Errorf("archiveduckdb: get s3://%s/%s: %w", bucket, pl.Manifest, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 64<<20))
	if err != nil {
		return archive.Manifest{}, false, fmt.Errorf("archiveduckdb: read s3://%s/%s: %w", bucket, pl.Manifest, err)
	}
	m, err = archive.ParseManifest(b)
	if err != nil {
		return archive.Manifest{}, true, fmt.Errorf("s3://%s/%s: %w", bucket, pl.Manifest, err)
	}
	return m, true, nil
}

// Rows reads an object's row count from the x-amz-meta-rows the archive
// writes on every file (-1 when it has none).
func Rows(ctx context.Context, api *s3.Client, bucket, key string) (int64, error) {
	h, err := api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("archiveduckdb: head s3://%s/%s: %w", bucket, key, err)
	}
	n, err := strconv.ParseInt(h.Metadata[archives3.MetaRows], 10, 64)
	if err != nil {
		return -1, nil
	}
	return n, nil
}
