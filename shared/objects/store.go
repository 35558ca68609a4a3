package objects

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// Base is the state of v0 that a write is conditioned on: the version it
// holds (0: no item) and whether it is a tombstone.
type Base struct {
	Version int64
	Deleted bool
}

// Commit is a new version: Record is written as both v0 and v<Record.Version>,
// in one transaction, if v0 is still at Base. With a Claim (Record's blob
// is shared) the same transaction writes the version's reference record
// and holds the blob's head to the claim (ErrBlobChanged otherwise).
type Commit struct {
	Base   Base
	Record Record
	Claim  *BlobClaim
}

// Removal deletes an object: v0 becomes Tombstone, if it is still at Base,
// and the listed history items are deleted, in one transaction.
type Removal struct {
	Key       string
	Base      Base
	Tombstone Record
	History   []int64
}

// MaxRemoveHistory is how many history items a Removal deletes with its
// tombstone: a transaction holds at most 100 actions. Older leftovers are
// deleted after it, by DeleteHistory.
const MaxRemoveHistory = 99

// Listing is an object's version items, without payloads.
type Listing struct {
	Latest  Record // v0; valid if Exists
	Exists  bool
	History []Record // v1…, oldest first
}

// Items is what the store needs from the objects table.
type Items interface {
	// Item reads one version item, strongly consistent: version 0 is v0.
	// ok is false when there is no such item.
	Item(ctx context.Context, key string, version int64) (r Record, ok bool, err error)
	// List reads all version items of a key (one Query on begins_with(sk,
	// "v")), without their payloads.
	List(ctx context.Context, key string) (Listing, error)
	// Commit writes a new version (see Commit). A stale base is a
	// *ConflictError with the current state; other failures that
	// certainly wrote nothing wrap ErrNotApplied.
	Commit(ctx context.Context, c Commit) error
	// Remove deletes an object (see Removal); errors as for Commit.
	Remove(ctx context.Context, r Removal) error
	// DeleteHistory deletes history items (never v0); missing ones are
	// no error.
	DeleteHistory(ctx context.Context, key string, versions []int64) error
}

// Chunks is what the store needs to keep chunked payloads in the table.
// Chunk keys come from the manifest (Manifest.ChunkKeys).
type Chunks interface {
	PutChunks(ctx context.Context, key string, m Manifest, chunks [][]byte) error
	// GetChunks returns the chunks in order; a missing one is ErrBlobNotFound.
	GetChunks(ctx context.Context, key string, m Manifest) ([][]byte, error)
	// GetChunkRange returns chunks [from, to) in order, reading no other;
	// a missing one is ErrBlobNotFound.
	GetChunkRange(ctx context.Context, key string, m Manifest, from, to int) ([][]byte, error)
	// DeleteChunks deletes the chunks; missing ones are no error.
	DeleteChunks(ctx context.Context, key string, m Manifest) error
}

// Blob is a payload to store in the bucket.
type Blob struct {
	Key         string // ContentKey(SHA256, size), or BlobKey(object key, write id)
	Body        []byte
	SHA256      Sum // of Body
	ContentType string
	Codec       Codec
	// ObjectKey and WriteID say whose payload this is (kept as the blob's
	// metadata, for operators and the sweeper's logs); empty for a shared
	// blob, which is nobody's in particular.
	ObjectKey string
	WriteID   string
}

// Blobs is what the store needs from the bucket.
type Blobs interface {
	// PutBlob stores a blob under a key that must not exist
	// (ErrBlobExists otherwise) and returns its reference.
	PutBlob(ctx context.Context, b Blob) (BlobRef, error)
	// GetBlob opens a blob. The reader verifies size and SHA-256 against
	// the reference and fails with a *ChecksumError at its end when they
	// differ. A missing blob is ErrBlobNotFound.
	GetBlob(ctx context.Context, ref BlobRef) (io.ReadCloser, error)
	// DeleteBlob deletes the referenced blob (its version, if it has
	// one); a missing blob is no error.
	DeleteBlob(ctx context.Context, ref BlobRef) error
	// PurgeBlob deletes the object at key for good, whatever its version
	// (and any older version that becomes current, until none does); a
	// missing object is no error. Only ReleaseBlob calls it, for shared
	// blobs, whose references name no version.
	PurgeBlob(ctx context.Context, key string) error
	// CopyBlob copies the referenced blob to key within the bucket, if
	// nothing is there (ErrBlobExists otherwise, where the bucket can
	// tell).
	CopyBlob(ctx context.Context, src BlobRef, key string) error
}

// Store keeps versioned documents: inline, compressed or chunked in the
// table, or in the bucket with a reference in the table.
type Store struct {
	Items  Items
	Chunks Chunks // nil: no chunked placement (KeepInTable documents over the inline limits are refused)
	Blobs  Blobs  // nil: no bucket (documents over the inline limits are chunked)
	// Shared keeps the heads and reference records of shared blobs: with
	// it, documents in the bucket are stored once per content
	// (ContentKey); nil stores a blob per write (BlobKey).
	Shared SharedRecords
	Policy Policy
	// MaxVersions is how many history versions a key keeps (default 10);
	// a write prunes the older ones, whose payloads the reaper removes.
	MaxVersions int
	// MaxAttempts bounds the commits of an unconditional write that keeps
	// losing races (default 5).
	MaxAttempts int
	Now         func() time.Time
	NewID       func() string // write ids: unique, [0-9a-z] (default 128 random bits, hex)
	// DeleteLease is how old a shared blob's deleting mark must be before
	// a deleter may take it over (default DefaultDeleteLease).
	DeleteLease time.Duration
	// ReleaseTries is how many times a release that holds a blob's mark
	// tries each step it still has to take before it leaves the mark to
	// the lease (default DefaultReleaseTries), ReleaseBackoff the pause
	// between tries (default DefaultReleaseBackoff): a bucket or table
	// that blinks for a few seconds must not keep the bytes' writes from
	// sharing them for DeleteLease.
	ReleaseTries   int
	ReleaseBackoff retry.Backoff
	Log            *slog.Logger

	once sync.Once
}

// Store defaults.
const (
	DefaultMaxVersions  = 10
	DefaultMaxAttempts  = 5
	DefaultReleaseTries = 5
)

// DefaultReleaseBackoff spaces a release's tries: 3.75 to 7.5 seconds in all
// over DefaultReleaseTries, longer than the local S3 server's restarts.
var DefaultReleaseBackoff = retry.Backoff{Base: 500 * time.Millisecond, Max: 4 * time.Second}

func (s *Store) defaults() {
	s.once.Do(func() {
		if s.MaxVersions <= 0 {
			s.MaxVersions = DefaultMaxVersions
		}
		if s.MaxAttempts <= 0 {
			s.MaxAttempts = DefaultMaxAttempts
		}
		if s.ReleaseTries <= 0 {
			s.ReleaseTries = DefaultReleaseTries
		}
		if s.ReleaseBackoff.Base <= 0 {
			s.ReleaseBackoff = DefaultReleaseBackoff
		}
		if s.Now == nil {
			s.Now = time.Now
		}
		if s.NewID == nil {
			s.NewID = RandomID
		}
		if s.Log == nil {
			s.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// RandomID returns 128 random bits in hex.
func RandomID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func validWriteID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("objects: write id %q: want 1 to 64 characters", id)
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return fmt.Errorf("objects: write id %q: want [0-9a-z]", id)
		}
	}
	return nil
}

// PutOptions are a write's conditions and metadata.
type PutOptions struct {
	// IfMatch is the version the write is based on: 0 means "only if the
	// object does not exist" (a deleted one counts as not existing), n
	// means "only if the latest version is n". A stale one is a
	// *ConflictError with the current version. nil writes over whatever
	// is there (retrying races up to MaxAttempts).
	IfMatch     *int64
	ContentType string
	// KeepInTable keeps the document in the table, chunked if it is too
	// big for the item (see Policy).
	KeepInTable bool
	// NoCompress stores the bytes as they are (media that are already
	// compressed gain nothing from another try).
	NoCompress bool
}

// staged is a payload written ahead of its commit; keep is the write's
// KeepInTable (a document in S3 is not the same as one asked to be kept
// in the table). A shared blob's comes with the claim its commit makes,
// whether this write stored the bytes (uploaded) or found them stored
// (skipped: no upload), and how to stage it again when the claim fails.
type staged struct {
	rec      Record
	keep     bool
	claim    *BlobClaim
	uploaded bool
	skipped  bool
	again    func(ctx context.Context) (staged, error)
}

// Written is what a write did: the version that holds the document
// (without its payload), and whether this write left the object as it was.
type Written struct {
	Record
	// Unchanged: the latest version already held the document (the same
	// SHA-256, size and content type), so nothing was staged or committed
	// and Record is that version. This is what a retry gets when its first
	// attempt committed but the answer was lost.
	Unchanged bool
	// BlobShared: the stored bytes were in the bucket already as a shared
	// blob, which the new version references: nothing was uploaded (or,
	// for a presigned upload, its copy was dropped).
	BlobShared bool
}

// Put stores body as the key's new version and returns its record (without
// the payload); it is Write without saying whether anything was written.
func (s *Store) Put(ctx context.Context, key string, body []byte, o PutOptions) (Record, error) {
	w, err := s.Write(ctx, key, body, o)
	return w.Record, err
}

// Write stores body as the key's new version, unless the latest version
// already holds it.
//
// The latest version (v0) is read first. If it is live and has body's
// SHA-256, size and content type (and, with KeepInTable, is kept in the
// table), the write is idempotent: nothing is staged or committed and the
// answer is that version, Unchanged, provided If-Match allows it: no
// If-Match, If-Match 0 (a retried create), If-Match n with the latest at n
// (a no-op change) or at n+1 (a retried change whose first attempt
// committed: version n+1 is always written on base n). Otherwise a stale
// If-Match is a *ConflictError, before anything is written; a tombstone is
// never the same document, so writing over a deleted object makes a new
// version.
//
// A new version's payload (blob or chunks) is written first, under a key
// no other write uses; then v0 and vN commit in one transaction
// conditioned on the version the write is based on. If the commit
// certainly failed, the payload is deleted; if its outcome is unknown (a
// timeout, a crash), the payload stays for the sweeper, which deletes it
// only if no reference names it. Either way no reference points to a
// missing payload. A commit that loses a race to a write of the same
// document answers as that write's retry would (Unchanged). After the
// commit, history beyond MaxVersions is pruned.
func (s *Store) Write(ctx context.Context, key string, body []byte, o PutOptions) (Written, error) {
	s.defaults()
	if err := ValidateKey(key); err != nil {
		return Written{}, err
	}
	ct, err := NormalizeContentType(o.ContentType)
	if err != nil {
		return Written{}, err
	}
	if o.IfMatch != nil && (*o.IfMatch < 0 || *o.IfMatch > MaxVersion) {
		return Written{}, invalid(ReasonBadVersion, "If-Match %d is not a version (0 to %d)", *o.IfMatch, int64(MaxVersion))
	}
	var gz []byte
	var compress func() int
	if !o.NoCompress {
		compress = func() int { gz = Compress(body); return len(gz) }
	}
	keep := o.KeepInTable || s.Blobs == nil
	pl, err := s.Policy.Place(len(body), compress, PlaceOptions{Key: key, ContentType: ct, KeepInTable: keep})
	if err != nil {
		return Written{}, err
	}
	if pl.Kind == Chunked && s.Chunks == nil {
		return Written{}, invalid(ReasonTooLargeForTable, "the document is %d bytes; documents over %d bytes need the bucket", len(body), s.Policy.withDefaults().InlineMax)
	}

	doc := document{sum: SumOf(body), size: int64(len(body)), contentType: ct, keep: o.KeepInTable}
	cur, ok, err := s.Items.Item(ctx, key, 0)
	if err != nil {
		return Written{}, fmt.Errorf("objects: put %s: read latest: %w", key, err)
	}
	if doc.heldBy(cur, ok, o.IfMatch) {
		return Written{Record: cur.Meta(), Unchanged: true}, nil
	}
	base, err := baseOf(key, cur, ok, o.IfMatch)
	if err != nil {
		return Written{}, err
	}
	writeID := s.NewID()
	if err := validWriteID(writeID); err != nil {
		return Written{}, err
	}
	rec := Record{
		Key: key, Kind: pl.Kind, Size: doc.size, SHA256: doc.sum,
		ContentType: ct, Codec: pl.Codec, WriteID: writeID, CreatedAt: s.stamp(),
	}
	stored := body
	if pl.Codec == Gzip {
		stored = gz
	}
	st, err := s.stage(ctx, rec, stored, pl)
	if err != nil {
		return Written{}, err
	}
	st.keep = o.KeepInTable
	return s.commit(ctx, st, base, o.IfMatch)
}

// document is what makes two versions the same for a write: the bytes
// (SHA-256 and size) and the content type. keep is the write's
// KeepInTable: a document in S3 does not satisfy it.
type document struct {
	sum         Sum
	size        int64
	contentType string
	keep        bool
}

// heldBy reports whether cur, the latest version (ok: there is one), is a
// live version holding the document that a write with ifMatch may answer
// with instead of writing: without If-Match or with If-Match 0 any such
// version; with If-Match n version n (nothing to change) or n+1 (written
// on base n: a retry whose first attempt committed).
func (d document) heldBy(cur Record, ok bool, ifMatch *int64) bool {
	if !ok || cur.Deleted || cur.SHA256 != d.sum || cur.Size != d.size || cur.ContentType != d.contentType {
		return false
	}
	if d.keep && cur.Kind == InS3 {
		return false
	}
	return ifMatch == nil || *ifMatch == 0 || cur.Version == *ifMatch || cur.Version == *ifMatch+1
}

// baseOf is the state of v0 a write with ifMatch is conditioned on, given
// v0 as read (cur; ok: it exists). A stale If-Match is refused here, before
// anything is written: 0 means "only if there is no live object" (a
// tombstone counts as none), n "only if the latest live version is n". The
// commit's condition checks the base again.
func baseOf(key string, cur Record, ok bool, ifMatch *int64) (Base, error) {
	b := Base{}
	if ok {
		b = Base{Version: cur.Version, Deleted: cur.Deleted}
	}
	live := ok && !cur.Deleted
	switch {
	case ifMatch == nil,
		*ifMatch == 0 && !live,
		*ifMatch > 0 && live && cur.Version == *ifMatch:
		return b, nil
	}
	return Base{}, &ConflictError{Key: key, Expected: *ifMatch, Current: b.Version, Deleted: b.Deleted}
}

// stage writes the payload ahead of the commit and completes the record.
func (s *Store) stage(ctx context.Context, rec Record, stored []byte, pl Placement) (staged, error) {
	switch pl.Kind {
	case Inline, CompressedInline:
		rec.Data = stored
	case Chunked:
		m, chunks, err := Split(stored, pl.ChunkSize, rec.WriteID)
		if err != nil {
			return staged{}, err
		}
		rec.Manifest = &m
		if err := s.Chunks.PutChunks(ctx, rec.Key, m, chunks); err != nil {
			st := staged{rec: rec}
			s.discard(ctx, st) // some chunks may be written
			return staged{}, fmt.Errorf("objects: put %s: write %d chunks: %w", rec.Key, m.Count, err)
		}
	case InS3:
		if s.Shared != nil {
			again := func(ctx context.Context) (staged, error) {
				return s.stageShared(ctx, rec, stored, func() (staged, error) { return s.putOwn(ctx, rec, stored) })
			}
			st, err := again(ctx)
			st.again = again
			return st, err
		}
		return s.putOwn(ctx, rec, stored)
	}
	return staged{rec: rec}, nil
}

// putOwn stores a document's bytes as a blob of this write alone
// (BlobKey).
func (s *Store) putOwn(ctx context.Context, rec Record, stored []byte) (staged, error) {
	ref, err := s.Blobs.PutBlob(ctx, Blob{
		Key: BlobKey(rec.Key, rec.WriteID), Body: stored, SHA256: SumOf(stored),
		ContentType: rec.ContentType, Codec: rec.Codec, ObjectKey: rec.Key, WriteID: rec.WriteID,
	})
	if err != nil {
		// The PUT may have stored the blob before failing (a lost
		// reply): nothing references it yet, so delete it now rather
		// than leave it to the sweeper.
		if !errors.Is(err, ErrNotApplied) && !errors.Is(err, ErrBlobExists) {
			s.discard(ctx, staged{rec: Record{Key: rec.Key, WriteID: rec.WriteID, Kind: InS3, Blob: &BlobRef{Key: BlobKey(rec.Key, rec.WriteID)}}})
		}
		return staged{}, fmt.Errorf("objects: put %s: write blob: %w", rec.Key, err)
	}
	rec.Blob = &ref
	return staged{rec: rec}, nil
}

// discardTimeout bounds the clean-up of a failed write, which runs even
// when the request's context is done.
const discardTimeout = 10 * time.Second

// discard deletes a payload that no reference names. A failure leaves an
// orphan for the sweeper; it is logged, not returned (the caller's error is
// the one that matters).
//
// A shared blob is not this write's to delete: if the write stored it,
// ReleaseBlob deletes it unless another reference took it meanwhile.
func (s *Store) discard(ctx context.Context, st staged) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	if st.claim != nil {
		if !st.uploaded {
			return
		}
		if _, err := s.ReleaseBlob(ctx, st.rec.Blob.Key); err != nil {
			s.Log.WarnContext(ctx, "shared blob not released; left for the sweeper", "key", st.rec.Key, "blob", st.rec.Blob.Key, "err", err)
		}
		return
	}
	if err := s.reap(ctx, st.rec); err != nil {
		s.Log.WarnContext(ctx, "payload not deleted; left for the sweeper", "key", st.rec.Key, "writeId", st.rec.WriteID, "err", err)
	}
}

// prune deletes history versions beyond MaxVersions. It runs after a
// successful commit: a failure is logged (the next write prunes again).
func (s *Store) prune(ctx context.Context, key string, latest int64) {
	if latest <= int64(s.MaxVersions) {
		return
	}
	l, err := s.Items.List(ctx, key)
	if err == nil {
		hist := make([]int64, len(l.History))
		for i, r := range l.History {
			hist[i] = r.Version
		}
		if old := Prune(hist, latest, s.MaxVersions); len(old) > 0 {
			err = s.Items.DeleteHistory(ctx, key, old)
		}
	}
	if err != nil {
		s.Log.WarnContext(ctx, "prune failed; the next write retries", "key", key, "err", err)
	}
}

// Object is a version with its document.
type Object struct {
	Record        // metadata, without the stored bytes
	Body   []byte // the document, verified
}

// Get returns a version of key (0: the latest), verified against its
// SHA-256. A deleted object, or a version pruned or never written, is
// ErrNotFound.
func (s *Store) Get(ctx context.Context, key string, version int64) (Object, error) {
	s.defaults()
	var last Record
	for attempt := 1; ; attempt++ {
		rec, err := s.Stat(ctx, key, version)
		if err != nil {
			return Object{}, err
		}
		body, err := s.read(ctx, rec)
		if err == nil {
			return Object{Record: rec.Meta(), Body: body}, nil
		}
		if !errors.Is(err, ErrBlobNotFound) {
			return Object{}, fmt.Errorf("objects: get %s v%d: %w", key, rec.Version, err)
		}
		// The payload went away under us: a concurrent delete or prune
		// reaped it (Stat says not found next time), or a newer write
		// replaced v0 (Stat finds another write). The same write again
		// is a reference without its payload.
		if attempt > 1 && rec.WriteID == last.WriteID || attempt == s.MaxAttempts {
			return Object{}, fmt.Errorf("objects: get %s v%d (write %s): %w: %w", key, rec.Version, rec.WriteID, ErrDangling, err)
		}
		last = rec
	}
}

// Stat returns a version's record (0: the latest) with its inline payload,
// without reading a blob or chunks: enough to answer with a presigned URL.
func (s *Store) Stat(ctx context.Context, key string, version int64) (Record, error) {
	s.defaults()
	if err := ValidateKey(key); err != nil {
		return Record{}, err
	}
	if version < 0 || version > MaxVersion {
		return Record{}, invalid(ReasonBadVersion, "version %d is not a version (1 to %d)", version, int64(MaxVersion))
	}
	rec, ok, err := s.Items.Item(ctx, key, version)
	if err != nil {
		return Record{}, fmt.Errorf("objects: get %s v%d: %w", key, version, err)
	}
	if !ok || rec.Deleted {
		if version == 0 {
			return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return Record{}, fmt.Errorf("%w: %s version %d", ErrNotFound, key, version)
	}
	return rec, nil
}

// Fetch returns the document of rec, a record Stat returned for
// (rec.Key, version), verified: Stat and Fetch are Get in two steps, for
// callers that look at the record before deciding to read its payload (a
// large blob may be better served as a presigned URL). If the payload went
// away in between (a concurrent delete or prune), Fetch answers as
// Get(rec.Key, version) does.
func (s *Store) Fetch(ctx context.Context, rec Record, version int64) (Object, error) {
	s.defaults()
	body, err := s.read(ctx, rec)
	if errors.Is(err, ErrBlobNotFound) {
		return s.Get(ctx, rec.Key, version)
	}
	if err != nil {
		return Object{}, fmt.Errorf("objects: get %s v%d: %w", rec.Key, rec.Version, err)
	}
	return Object{Record: rec.Meta(), Body: body}, nil
}

// read fetches and verifies a record's document.
func (s *Store) read(ctx context.Context, rec Record) ([]byte, error) {
	what := fmt.Sprintf("%s v%d", rec.Key, rec.Version)
	switch rec.Kind {
	case Inline, CompressedInline:
		return Decode(what, rec.Codec, rec.Data, rec.Size, rec.SHA256)
	case Chunked:
		if rec.Manifest == nil || s.Chunks == nil {
			return nil, fmt.Errorf("objects: %s: chunked without a manifest or a chunk store", what)
		}
		chunks, err := s.Chunks.GetChunks(ctx, rec.Key, *rec.Manifest)
		if err != nil {
			return nil, err
		}
		stored, err := Join(*rec.Manifest, chunks)
		if err != nil {
			return nil, err
		}
		return Decode(what, rec.Codec, stored, rec.Size, rec.SHA256)
	case InS3:
		if rec.Blob == nil || s.Blobs == nil {
			return nil, fmt.Errorf("objects: %s: in S3 without a reference or a blob store", what)
		}
		rc, err := s.Blobs.GetBlob(ctx, *rec.Blob)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		// Blobs verify the stored bytes against the reference; Decode
		// verifies the document against the record, whatever the adapter.
		var buf bytes.Buffer
		buf.Grow(int(min(rec.Blob.Size, 1<<30)) + bytes.MinRead)
		if _, err := buf.ReadFrom(io.LimitReader(rc, rec.Blob.Size+1)); err != nil {
			return nil, err
		}
		return Decode(what, rec.Codec, buf.Bytes(), rec.Size, rec.SHA256)
	}
	return nil, fmt.Errorf("objects: %s: unknown kind %q", what, rec.Kind)
}

// Versions lists a live object's versions, newest first, without payloads.
func (s *Store) Versions(ctx context.Context, key string) ([]Record, error) {
	s.defaults()
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	l, err := s.Items.List(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("objects: versions of %s: %w", key, err)
	}
	if !l.Exists || l.Latest.Deleted {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	out := make([]Record, 0, len(l.History))
	for i := len(l.History) - 1; i >= 0; i-- {
		out = append(out, l.History[i].Meta())
	}
	return out, nil
}

// DeleteOptions are a delete's conditions.
type DeleteOptions struct {
	IfMatch *int64 // only if the latest version is this one; nil: whatever it is
}

// Delete removes an object and its history: v0 becomes a tombstone (which
// keeps the version number, so versions never restart) and the history
// items go, in one transaction. The payloads are not touched here: the
// reaper deletes them when it sees the history items removed (Reap), after
// the references are gone. It returns the version deleted.
func (s *Store) Delete(ctx context.Context, key string, o DeleteOptions) (int64, error) {
	s.defaults()
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if o.IfMatch != nil && (*o.IfMatch < 1 || *o.IfMatch > MaxVersion) {
		return 0, invalid(ReasonBadVersion, "If-Match %d is not a version (1 to %d)", *o.IfMatch, int64(MaxVersion))
	}
	for attempt := 1; ; attempt++ {
		l, err := s.Items.List(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("objects: delete %s: %w", key, err)
		}
		hist := make([]int64, len(l.History))
		for i, r := range l.History {
			hist[i] = r.Version
		}
		if !l.Exists || l.Latest.Deleted {
			if len(hist) > 0 { // left by an interrupted delete
				if err := s.Items.DeleteHistory(ctx, key, hist); err != nil {
					s.Log.WarnContext(ctx, "leftover history not deleted", "key", key, "err", err)
				}
			}
			return 0, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		cur := l.Latest.Version
		if o.IfMatch != nil && *o.IfMatch != cur {
			return 0, &ConflictError{Key: key, Expected: *o.IfMatch, Current: cur}
		}
		first := hist[:min(len(hist), MaxRemoveHistory)]
		err = s.Items.Remove(ctx, Removal{
			Key: key, Base: Base{Version: cur},
			Tombstone: Record{Key: key, Version: cur, Deleted: true, CreatedAt: s.stamp()},
			History:   first,
		})
		var ce *ConflictError
		if errors.As(err, &ce) && o.IfMatch == nil && attempt < s.MaxAttempts {
			continue
		}
		if errors.As(err, &ce) && o.IfMatch != nil {
			ce.Expected = *o.IfMatch
			return 0, ce
		}
		if err != nil {
			return 0, fmt.Errorf("objects: delete %s v%d: %w", key, cur, err)
		}
		if rest := hist[len(first):]; len(rest) > 0 {
			if err := s.Items.DeleteHistory(ctx, key, rest); err != nil {
				s.Log.WarnContext(ctx, "older history not deleted; the next delete retries", "key", key, "err", err)
			}
		}
		return cur, nil
	}
}

// Reap deletes the payload of a version item that was removed from the
// table (pruned, or deleted with its object): the reaper calls it for each
// REMOVE of a history item on the table's stream, with the item's old
// image. Records without an outside payload (inline, tombstones) need
// nothing. Deleting twice is harmless.
func (s *Store) Reap(ctx context.Context, removed Record) error {
	s.defaults()
	if err := s.reap(ctx, removed); err != nil {
		return fmt.Errorf("objects: reap %s v%d: %w", removed.Key, removed.Version, err)
	}
	return nil
}

func (s *Store) reap(ctx context.Context, r Record) error {
	switch {
	case r.Kind == Chunked && r.Manifest != nil:
		if s.Chunks == nil {
			return errors.New("no chunk store")
		}
		return s.Chunks.DeleteChunks(ctx, r.Key, *r.Manifest)
	case r.Kind == InS3 && r.Blob != nil:
		if s.Blobs == nil {
			return errors.New("no blob store")
		}
		if IsShared(r.Blob.Key) {
			return s.reapShared(ctx, r)
		}
		return s.Blobs.DeleteBlob(ctx, *r.Blob)
	}
	return nil
}

// stamp is a record's creation time: now, in UTC, to the microsecond (the
// archive's timestamp columns hold microseconds, as Athena and DuckDB do).
func (s *Store) stamp() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// Partial is a range of a version's document.
type Partial struct {
	Record       // metadata, without the stored bytes; Size is the whole document's
	Range  Range // the bytes of the document that Body holds
	Body   []byte
}

// GetRange returns the bytes r of a version of key (0: the latest), as
// Get does for the whole document. r must lie within the document: one
// that does not (the version changed since the caller resolved r) is a
// *InvalidError, range-not-satisfiable.
//
// How much is read, and what is verified, depends on the placement:
//   - inline and compressed documents are decoded and verified whole (a
//     gzip stream cannot be entered in the middle); they are small;
//   - chunked documents stored as they are (codec identity) whose manifest
//     has per-chunk digests read only the chunks that hold r, each verified
//     against its own SHA-256; the others (gzip, or a manifest without
//     digests) are read and verified whole;
//   - documents in S3 are read and verified whole (S3 keeps one checksum
//     of the whole object): large ones are better served by a presigned
//     URL, which keeps S3's own Range support.
func (s *Store) GetRange(ctx context.Context, key string, version int64, r Range) (Partial, error) {
	s.defaults()
	var last Record
	for attempt := 1; ; attempt++ {
		rec, err := s.Stat(ctx, key, version)
		if err != nil {
			return Partial{}, err
		}
		body, err := s.readRange(ctx, rec, r)
		if err == nil {
			return Partial{Record: rec.Meta(), Range: r, Body: body}, nil
		}
		if !errors.Is(err, ErrBlobNotFound) {
			return Partial{}, fmt.Errorf("objects: get %s v%d bytes %d-%d: %w", key, rec.Version, r.Start, r.Last(), err)
		}
		// As in Get: a payload reaped under us is a newer write or a delete;
		// the same write twice is a dangling reference.
		if attempt > 1 && rec.WriteID == last.WriteID || attempt == s.MaxAttempts {
			return Partial{}, fmt.Errorf("objects: get %s v%d (write %s): %w: %w", key, rec.Version, rec.WriteID, ErrDangling, err)
		}
		last = rec
	}
}

// FetchRange returns the bytes r of rec's document, rec a record Stat
// returned for (rec.Key, version): GetRange in two steps, as Fetch is Get.
func (s *Store) FetchRange(ctx context.Context, rec Record, version int64, r Range) (Partial, error) {
	s.defaults()
	body, err := s.readRange(ctx, rec, r)
	if errors.Is(err, ErrBlobNotFound) {
		return s.GetRange(ctx, rec.Key, version, r)
	}
	if err != nil {
		return Partial{}, fmt.Errorf("objects: get %s v%d bytes %d-%d: %w", rec.Key, rec.Version, r.Start, r.Last(), err)
	}
	return Partial{Record: rec.Meta(), Range: r, Body: body}, nil
}

// readRange fetches and verifies the bytes r of a record's document.
func (s *Store) readRange(ctx context.Context, rec Record, r Range) ([]byte, error) {
	if r.Start < 0 || r.Len() <= 0 || r.End > rec.Size {
		return nil, invalid(ReasonRangeNotSatisfiable, "bytes %d-%d are not within the %d-byte document", r.Start, r.Last(), rec.Size)
	}
	if m := rec.Manifest; rec.Kind == Chunked && m != nil && s.Chunks != nil && (rec.Codec == Identity || rec.Codec == "") && m.HasSums() {
		return s.readChunkRange(ctx, rec, *m, r)
	}
	doc, err := s.read(ctx, rec)
	if err != nil {
		return nil, err
	}
	return doc[r.Start:r.End:r.End], nil
}

// readChunkRange reads only the chunks that hold r and verifies each
// against its digest in the manifest.
func (s *Store) readChunkRange(ctx context.Context, rec Record, m Manifest, r Range) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("objects: %s v%d: %w", rec.Key, rec.Version, err)
	}
	if m.Size != rec.Size {
		return nil, &ChecksumError{What: fmt.Sprintf("%s v%d", rec.Key, rec.Version), Detail: fmt.Sprintf("the manifest holds %d bytes, the record says %d", m.Size, rec.Size)}
	}
	from, to := m.ChunkSpan(r)
	chunks, err := s.Chunks.GetChunkRange(ctx, rec.Key, m, from, to)
	if err != nil {
		return nil, err
	}
	if len(chunks) != to-from {
		return nil, &ChecksumError{What: fmt.Sprintf("chunks of write %s", m.WriteID), Detail: fmt.Sprintf("%d chunks read, %d asked for", len(chunks), to-from)}
	}
	out := make([]byte, 0, r.Len())
	for j, c := range chunks {
		i := from + j
		if err := m.CheckChunk(i, c); err != nil {
			return nil, err
		}
		lo := int64(i) * int64(m.ChunkSize) // the chunk's first byte in the document
		out = append(out, c[max(r.Start-lo, 0):min(r.End-lo, int64(len(c)))]...)
	}
	return out, nil
}
