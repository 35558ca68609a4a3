package objects

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"time"
)

// ItemRef is one item of the objects table as a sweep sees it: the
// payloads a version item references, or a chunk item.
type ItemRef struct {
	PK, SK string
	// Version, WriteID and Deleted are a version item's (v0 included).
	Version int64
	WriteID string
	Deleted bool
	// BlobKey is the bucket key an item's blob attribute names (a version
	// item of an S3 placement; any other item naming a blob the same way,
	// such as a pending upload, protects it too).
	BlobKey string
	// Manifest names a chunked version's chunks (WriteID and Count).
	Manifest *Manifest
	// Chunk is set for a chunk item, with the mark of an earlier sweep
	// (zero if none).
	Chunk             *ChunkOf
	UnreferencedSince time.Time
	// SharedRef is set for a shared blob's reference record, SharedHead
	// for its head (see SharedRecords).
	SharedRef  *SharedRef
	SharedHead *BlobHead
}

// BlobVersion is one version of a bucket key (a delete marker included):
// in a versioned bucket a blob is gone only once all its versions are.
type BlobVersion struct {
	BlobInfo
	VersionID    string // "null" for a version written while versioning was off
	DeleteMarker bool
	Latest       bool
}

// RefScanner reads every item of the objects table that may name a
// payload, one call of fn at a time (the DynamoDB adapter's Refs, the
// in-memory fake's Table).
type RefScanner interface {
	Scan(ctx context.Context, fn func(ItemRef)) error
}

// SweepTable is what the sweeper needs from the objects table.
type SweepTable interface {
	RefScanner
	MarkChunk(ctx context.Context, pk string, at time.Time) (marked bool, err error)
	DeleteChunk(ctx context.Context, pk string, markedAt time.Time) (deleted bool, err error)
}

// VersionLister lists every version of the bucket's keys under a prefix,
// a page at a time, stopping at the first error, which it yields. The
// caller may delete a page's versions as soon as it has the page: the
// listing goes on where it was.
type VersionLister interface {
	Versions(ctx context.Context, prefix string) iter.Seq2[[]BlobVersion, error]
}

// SharedSweep is what the sweeper needs to free shared blobs; *Store
// satisfies it. A shared blob is deleted only through ReleaseBlob.
type SharedSweep interface {
	ReleaseBlob(ctx context.Context, blobKey string) (released bool, err error)
	DropStaleRef(ctx context.Context, ref SharedRef) (dropped bool, err error)
}

var _ SharedSweep = (*Store)(nil)

// SweepBucket is what the sweeper needs from the objects bucket.
type SweepBucket interface {
	VersionLister
	// Delete deletes the versions for good and returns those deleted (or
	// already gone); the error says which were not.
	Delete(ctx context.Context, vs []BlobVersion) (deleted []BlobVersion, err error)
}

// Sweeper removes orphans: payloads that no reference names and that are
// old enough that no reference ever will.
//
// A sweep takes its mark time first, then reads every reference of the
// table (a strongly consistent parallel Scan), then lists every version of
// the bucket's blobs and deletes those Orphan says are orphans:
// unreferenced and older than Grace before the mark (UploadGrace under
// uploads/). A blob written just before the scan, whose commit lands after
// it, is younger than the grace and stays (see Orphans). Any item
// that names a blob the way version items do (blob.key) protects it: the
// upload intents do, so a presigned upload is kept while its intent lives
// however long the client takes (a multipart upload's Last-Modified is the
// time it started, which may be long before its reference commits).
//
// Chunk items carry no time, so the grace is counted from the first sweep
// that found a chunk unreferenced: it marks the item (MarkChunk, with the
// time after the scan read it, an upper bound of its write time), and a
// later sweep deletes it if it is still unreferenced and the mark is older
// than Grace before that sweep's mark. An orphan chunk therefore goes on
// the first sweep at least Grace after the one that marked it.
//
// Shared blobs (ContentKey) go through Shared, never a plain delete: a
// reference record whose version item the scan did not see is dropped if
// a consistent read confirms the version is gone (the reaper normally
// does it); a head left deleting longer than DeleteLease is taken over
// and finished; and the current object of a shared blob that no item
// names, older than Grace, is released (ReleaseBlob: deleted unless a
// reference turns up). Older versions of a shared blob are never read
// (references name no version) and are deleted as orphans. Without
// Shared, shared blobs are left alone.
type Sweeper struct {
	Table SweepTable
	Blobs SweepBucket
	// Shared releases shared blobs (nil: they are not swept).
	Shared SharedSweep
	// DeleteLease is Store.DeleteLease (default DefaultDeleteLease): a
	// head deleting for longer was left by a deleter that stopped.
	DeleteLease time.Duration
	// Grace is the age after which an unreferenced blob of the store, or a
	// marked chunk, is an orphan: longer than any Put (a function timeout).
	Grace time.Duration
	// UploadGrace is the same for presigned uploads (default Grace); their
	// intents protect them while a commit may still come.
	UploadGrace time.Duration
	Now         func() time.Time
	// Progress is how often a long sweep logs how far it got (default 15 s).
	Progress time.Duration
	// Reserve is the time a sweep keeps before its context's deadline to
	// stop cleanly and report (default 5 s).
	Reserve time.Duration
	Log     *slog.Logger // progress of long sweeps
}

// SweepResult is what one sweep came to.
type SweepResult struct {
	MarkedAt     time.Time
	Items        int   // table items scanned
	References   int   // distinct blob keys referenced
	Manifests    int   // distinct chunked writes referenced
	Listed       int   // bucket versions listed
	Swept        int   // orphan blob versions deleted (delete markers not counted)
	SweptBytes   int64 // their size
	ChunksMarked int
	ChunksSwept  int
	// RefsDropped counts stale reference records of shared blobs deleted,
	// SharedReleased the shared blobs deleted (their bytes are in Swept
	// and SweptBytes too).
	RefsDropped    int
	SharedReleased int
	// Failures counts payloads that could not be deleted (the next sweep
	// tries again); DeleteErr joins their errors.
	Failures  int
	DeleteErr error
	// Err is why the sweep stopped early (a failed scan or listing, the
	// deadline); nothing is deleted after a failed scan.
	Err  error
	Took time.Duration
}

// Sweep runs one sweep: it reads every reference (the mark), sweeps the
// orphan chunks and the shared blobs, then lists the bucket's payloads and
// deletes the orphans among them.
func (s *Sweeper) Sweep(ctx context.Context) SweepResult {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	start := time.Now()
	if d, ok := ctx.Deadline(); ok {
		reserve := s.Reserve
		if reserve <= 0 {
			reserve = 5 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-reserve))
		defer cancel()
	}
	res := SweepResult{MarkedAt: now()}
	p := s.progress(ctx, &res, start)

	sc, err := s.scan(ctx, &res, p)
	if err != nil {
		res.Err = fmt.Errorf("objects: sweep: read references: %w", err)
		res.Took = time.Since(start)
		return res
	}
	var deleteErrs []error
	s.sweepChunks(ctx, &res, sc.chunks, sc.manifests, now, &deleteErrs)
	if s.Shared != nil {
		for _, k := range s.sweepShared(ctx, &res, sc.sharedRefs, sc.heads, sc.writes, &deleteErrs) {
			sc.referenced[k] = struct{}{}
		}
	}
	s.sweepPayloads(ctx, &res, sc.referenced, p, &deleteErrs)
	res.DeleteErr = errors.Join(deleteErrs...)
	res.Took = time.Since(start)
	return res
}

// sweepScan is what a sweep's read of the table found.
type sweepScan struct {
	referenced map[string]struct{}
	manifests  map[string]int // <key>#<writeID> → chunk count
	chunks     []ItemRef
	sharedRefs []SharedRef
	heads      []BlobHead
	writes     map[[2]string]struct{} // version items: key, write id
}

// scan reads every item of the table once and sorts what it references.
func (s *Sweeper) scan(ctx context.Context, res *SweepResult, p *progress) (sweepScan, error) {
	sc := sweepScan{
		referenced: map[string]struct{}{},
		manifests:  map[string]int{},
		writes:     map[[2]string]struct{}{},
	}
	err := s.Table.Scan(ctx, func(e ItemRef) {
		res.Items++
		switch {
		case e.Chunk != nil:
			sc.chunks = append(sc.chunks, e)
		case e.SharedRef != nil:
			sc.sharedRefs = append(sc.sharedRefs, *e.SharedRef)
		case e.SharedHead != nil:
			sc.heads = append(sc.heads, *e.SharedHead)
		case e.BlobKey != "":
			sc.referenced[e.BlobKey] = struct{}{}
		case e.Manifest != nil:
			id := e.PK + "#" + e.Manifest.WriteID
			sc.manifests[id] = max(sc.manifests[id], e.Manifest.Count)
		}
		if e.WriteID != "" && e.Chunk == nil {
			sc.writes[[2]string{e.PK, e.WriteID}] = struct{}{}
		}
		p.tick("scan")
	})
	res.References, res.Manifests = len(sc.referenced), len(sc.manifests)
	return sc, err
}

// sweepPayloads lists the versions under each payload prefix and deletes
// the orphans among them, page by page; a shared blob's current object is
// released instead. It stops at a failed listing or at the deadline.
func (s *Sweeper) sweepPayloads(ctx context.Context, res *SweepResult, referenced map[string]struct{}, p *progress, deleteErrs *[]error) {
	isReferenced := func(k string) bool { _, ok := referenced[k]; return ok }
	graces := map[string]time.Duration{BlobPrefix: s.Grace, UploadPrefix: s.uploadGrace()}
	for _, prefix := range PayloadPrefixes {
		for page, err := range s.Blobs.Versions(ctx, prefix) {
			if err != nil {
				res.Err = fmt.Errorf("objects: sweep: %w", err)
				return
			}
			res.Listed += len(page)
			var orphans []BlobVersion
			for _, v := range page {
				if !Orphan(v.BlobInfo, prefix, isReferenced, res.MarkedAt, graces[prefix]) {
					continue
				}
				if IsShared(v.Key) {
					if v.Latest && !v.DeleteMarker && s.Shared != nil {
						s.release(ctx, res, v, deleteErrs)
					}
					if v.Latest || v.DeleteMarker || s.Shared == nil {
						continue // an older version goes as an orphan: none is ever read
					}
				}
				orphans = append(orphans, v)
			}
			if len(orphans) > 0 {
				s.deleteOrphans(ctx, res, orphans, deleteErrs)
			}
			p.tick("list " + prefix)
			if err := ctx.Err(); err != nil {
				res.Err = fmt.Errorf("objects: sweep stopped in %s: %w", prefix, err)
				return
			}
		}
	}
}

// deleteOrphans deletes orphan blob versions and counts what went.
func (s *Sweeper) deleteOrphans(ctx context.Context, res *SweepResult, orphans []BlobVersion, deleteErrs *[]error) {
	deleted, err := s.Blobs.Delete(ctx, orphans)
	for _, v := range deleted {
		if !v.DeleteMarker {
			res.Swept++
			res.SweptBytes += v.Size
		}
	}
	if err != nil {
		res.Failures += len(orphans) - len(deleted)
		*deleteErrs = append(*deleteErrs, err)
	}
}

// sweepShared drops the reference records the scan found stale and
// finishes the deletions left by deleters that stopped. It returns the
// shared blobs that reference records still name.
func (s *Sweeper) sweepShared(ctx context.Context, res *SweepResult, refs []SharedRef, heads []BlobHead, writes map[[2]string]struct{}, errs *[]error) []string {
	var named []string
	for _, r := range refs {
		if _, ok := writes[[2]string{r.Key, r.WriteID}]; ok || ctx.Err() != nil {
			named = append(named, r.BlobKey)
			continue
		}
		dropped, err := s.Shared.DropStaleRef(ctx, r)
		switch {
		case err != nil:
			res.Failures++
			*errs = append(*errs, err)
			named = append(named, r.BlobKey)
		case dropped:
			res.RefsDropped++
		default:
			named = append(named, r.BlobKey)
		}
	}
	lease := s.DeleteLease
	if lease <= 0 {
		lease = DefaultDeleteLease
	}
	for _, h := range heads {
		if h.State != BlobDeleting || !h.Since.Before(res.MarkedAt.Add(-lease)) || ctx.Err() != nil {
			continue
		}
		if _, err := s.Shared.ReleaseBlob(ctx, h.Key); err != nil {
			res.Failures++
			*errs = append(*errs, err)
		}
	}
	return named
}

// release deletes a shared blob's bytes if no reference names them.
func (s *Sweeper) release(ctx context.Context, res *SweepResult, v BlobVersion, errs *[]error) {
	released, err := s.Shared.ReleaseBlob(ctx, v.Key)
	if released {
		res.SharedReleased++
		res.Swept++
		res.SweptBytes += v.Size
	}
	if err != nil {
		res.Failures++
		*errs = append(*errs, err)
	}
}

func (s *Sweeper) uploadGrace() time.Duration {
	if s.UploadGrace > 0 {
		return s.UploadGrace
	}
	return s.Grace
}

// sweepChunks marks the unreferenced chunks not yet marked and deletes the
// ones marked more than Grace before the sweep's mark.
func (s *Sweeper) sweepChunks(ctx context.Context, res *SweepResult, chunks []ItemRef, manifests map[string]int, now func() time.Time, errs *[]error) {
	isReferenced := func(pk string) bool {
		c, ok := ParseChunkKey(pk)
		return ok && c.Index < manifests[c.Key+"#"+c.WriteID]
	}
	for _, e := range chunks {
		if isReferenced(e.PK) || ctx.Err() != nil {
			continue
		}
		if e.UnreferencedSince.IsZero() {
			marked, err := s.Table.MarkChunk(ctx, e.PK, now())
			if err != nil {
				res.Failures++
				*errs = append(*errs, err)
			} else if marked {
				res.ChunksMarked++
			}
			continue
		}
		info := BlobInfo{Key: e.PK, LastModified: e.UnreferencedSince}
		if !Orphan(info, "", isReferenced, res.MarkedAt, s.Grace) {
			continue
		}
		deleted, err := s.Table.DeleteChunk(ctx, e.PK, e.UnreferencedSince)
		if err != nil {
			res.Failures++
			*errs = append(*errs, err)
		} else if deleted {
			res.ChunksSwept++
		}
	}
}

// progress logs a long sweep's counters every Progress.
type progress struct {
	s     *Sweeper
	ctx   context.Context
	res   *SweepResult
	start time.Time
	next  time.Time
	every time.Duration
}

func (s *Sweeper) progress(ctx context.Context, res *SweepResult, start time.Time) *progress {
	every := s.Progress
	if every <= 0 {
		every = 15 * time.Second
	}
	return &progress{s: s, ctx: ctx, res: res, start: start, next: start.Add(every), every: every}
}

func (p *progress) tick(phase string) {
	if now := time.Now(); now.After(p.next) {
		p.next = now.Add(p.every)
		p.s.log().InfoContext(p.ctx, "sweep progress", "phase", phase, "items", p.res.Items, "listed", p.res.Listed,
			"swept", p.res.Swept, "bytes", p.res.SweptBytes, "seconds", int(now.Sub(p.start).Seconds()))
	}
}

func (s *Sweeper) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}
