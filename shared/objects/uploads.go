package objects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// UploadPrefix is the bucket prefix of presigned uploads: a client writes
// the document straight to the bucket under UploadKey, and the finalizer
// commits a reference to that very key (no copy). With BlobPrefix it is one
// of the only two prefixes the store writes; an upload that never commits
// is an orphan there like any other.
const UploadPrefix = "uploads/"

// UploadKey is the bucket key of upload id for key:
// uploads/<first 128 bits of sha256(key), hex>/<id>.
func UploadKey(key, id string) string {
	h := sha256.Sum256([]byte(key))
	return UploadPrefix + hex.EncodeToString(h[:16]) + "/" + id
}

// ParseUploadKey returns the upload id a bucket key names; ok is false for
// a key that UploadKey cannot have made.
func ParseUploadKey(blobKey string) (id string, ok bool) {
	rest, found := strings.CutPrefix(blobKey, UploadPrefix)
	if !found {
		return "", false
	}
	h, id, found := strings.Cut(rest, "/")
	if !found || len(h) != 32 || validWriteID(id) != nil {
		return "", false
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", false
	}
	return id, true
}

// UploadState is where an upload is in its life.
type UploadState string

// Upload states. Pending becomes Committed or Failed, once.
const (
	UploadPending   UploadState = "pending"
	UploadCommitted UploadState = "committed"
	UploadFailed    UploadState = "failed"
)

// Why an upload failed (Upload.Reason): stable values a client may see.
const (
	UploadFailedChecksum = "checksum-mismatch" // the bytes do not match the declared size or SHA-256
	UploadFailedConflict = "conflict"          // IfMatch was stale when the upload finished
	UploadFailedExpired  = "expired"           // the upload finished after its deadline
	UploadFailedMissing  = "missing"           // the uploaded object was gone when the finalizer read it
	UploadFailedTooLarge = "too-large"         // over the store's size limit
)

// Upload is a presigned upload's intent and outcome, as the table keeps it
// from the moment the upload is granted until ExpiresAt.
type Upload struct {
	ID          string // also the committed version's write id
	Key         string
	Size        int64
	SHA256      Sum
	ContentType string
	IfMatch     *int64 // as in PutOptions, checked when the upload is committed
	BlobKey     string // UploadKey(Key, ID)
	// MultipartID is the bucket's multipart upload id; "" for a single PUT.
	MultipartID string
	PartSize    int64
	Parts       int

	State   UploadState
	Version int64  // Committed: the version it became
	Reason  string // Failed: why (UploadFailed…)
	Detail  string // Failed: a message for the client
	Current int64  // Failed with a conflict: the object's version then
	// Unchanged (Committed): the latest version already held the document,
	// so the upload wrote nothing and Version is that version.
	Unchanged bool
	// BlobShared (Committed, as Finalize returns it; not kept): the bytes
	// were stored already as a shared blob, and the upload was dropped.
	BlobShared bool

	CreatedAt time.Time
	// Deadline is when the upload must be finished: the presigned
	// requests expire then and the finalizer refuses to commit later
	// (it may still be committing for up to its timeout).
	Deadline time.Time
	// ExpiresAt is when the table forgets the upload (its TTL attribute):
	// the outcome stays readable until then. While the intent lives it
	// names its blob as a reference does, so the orphan sweeper keeps a
	// pending upload; ExpiresAt is far enough past Deadline that any
	// commit is done by then, and afterwards an upload that never
	// committed is an ordinary orphan.
	ExpiresAt time.Time
	// ClaimedUntil is the lease of the finalizer working on it.
	ClaimedUntil time.Time
}

// Errors of uploads.
var (
	// ErrUploadExists: CreateUpload of an id that is taken.
	ErrUploadExists = errors.New("objects: upload exists")
	// ErrUploadBusy: another finalizer holds the upload's lease.
	ErrUploadBusy = errors.New("objects: upload busy")
)

// Uploads keeps upload intents in the objects table.
type Uploads interface {
	// CreateUpload stores a new intent (ErrUploadExists if the id is taken).
	CreateUpload(ctx context.Context, u Upload) error
	// GetUpload reads an intent, strongly consistent; ok is false when
	// there is none (never granted, or expired).
	GetUpload(ctx context.Context, id string) (u Upload, ok bool, err error)
	// ClaimUpload sets the lease of a pending upload whose lease is over
	// (before now) to until, and returns the upload. A settled upload is
	// returned as it is, unclaimed; a held lease is ErrUploadBusy; no
	// upload is ErrNotFound.
	ClaimUpload(ctx context.Context, id string, now, until time.Time) (u Upload, claimed bool, err error)
	// SettleUpload records a pending upload's outcome (State, Version,
	// Reason, Detail, Current); an upload already settled is left alone.
	SettleUpload(ctx context.Context, u Upload) error
}

// CommitBlobOptions are the conditions and metadata of CommitBlob.
type CommitBlobOptions struct {
	IfMatch     *int64 // as in PutOptions
	ContentType string
	// WriteID names the write; a second CommitBlob with the same id
	// returns the version the first one committed.
	WriteID string
}

// CommitBlob commits an already-stored blob as the key's new version: the
// document is the blob's bytes, as they are (identity codec, kind s3). The
// blob is first read whole and verified against ref's size and SHA-256;
// then v0 and vN commit as in Write. From the call on the blob is the
// store's: when it does not verify, the commit certainly failed (a
// conflict), or it is not needed (Unchanged), it is deleted, as Write
// deletes its own staged blob.
//
// With shared blobs (Store.Shared), the version references the shared
// blob of the bytes (ContentKey), not the uploaded object: when the head
// is live the bytes are stored already and nothing is copied; otherwise the
// bucket copies the upload there. Either way the uploaded object is
// deleted once the commit is done (or certainly failed).
//
// It is idempotent by WriteID: if a version with that write id exists, it
// is returned and nothing is written, so a finalizer retried after a crash
// never commits the same blob twice (which would let one version's reap
// delete another's payload). And it is idempotent by content as Write is:
// when the latest version already holds the document (ref's SHA-256 and
// size, the content type) and If-Match allows it, that version is the
// answer, Unchanged, and the blob is deleted without being read.
func (s *Store) CommitBlob(ctx context.Context, key string, ref BlobRef, o CommitBlobOptions) (Written, error) {
	s.defaults()
	if err := ValidateKey(key); err != nil {
		return Written{}, err
	}
	ct, err := NormalizeContentType(o.ContentType)
	if err != nil {
		return Written{}, err
	}
	if err := validWriteID(o.WriteID); err != nil {
		return Written{}, err
	}
	if o.IfMatch != nil && (*o.IfMatch < 0 || *o.IfMatch > MaxVersion) {
		return Written{}, invalid(ReasonBadVersion, "If-Match %d is not a version (0 to %d)", *o.IfMatch, int64(MaxVersion))
	}
	if s.Blobs == nil {
		return Written{}, errors.New("objects: commit blob: no blob store")
	}
	if ref.Size > s.Policy.withDefaults().MaxSize {
		s.discard(ctx, staged{rec: Record{Key: key, Kind: InS3, Blob: &ref}})
		return Written{}, invalid(ReasonTooLarge, "the document is %d bytes, the limit is %d", ref.Size, s.Policy.withDefaults().MaxSize)
	}
	if rec, ok, err := s.FindWrite(ctx, key, o.WriteID); err != nil || ok {
		if ok {
			s.DropUpload(ctx, ref, rec)
		}
		return Written{Record: rec}, err
	}
	cur, ok, err := s.Items.Item(ctx, key, 0)
	if err != nil {
		return Written{}, fmt.Errorf("objects: commit blob %s for %s: read latest: %w", ref.Key, key, err)
	}
	if (document{sum: ref.SHA256, size: ref.Size, contentType: ct}).heldBy(cur, ok, o.IfMatch) {
		s.discard(ctx, staged{rec: Record{Key: key, Kind: InS3, Blob: &ref}})
		return Written{Record: cur.Meta(), Unchanged: true}, nil
	}
	if err := s.verifyBlob(ctx, ref); err != nil {
		if errors.Is(err, ErrChecksum) {
			s.discard(ctx, staged{rec: Record{Key: key, Kind: InS3, Blob: &ref}})
		}
		return Written{}, fmt.Errorf("objects: commit blob %s for %s: %w", ref.Key, key, err)
	}
	ref.Codec = Identity
	if ref.ContentType == "" {
		ref.ContentType = ct
	}
	rec := Record{
		Key: key, Kind: InS3, Size: ref.Size, SHA256: ref.SHA256, ContentType: ct, Codec: Identity,
		Blob: &ref, WriteID: o.WriteID, CreatedAt: s.stamp(),
	}
	base, err := baseOf(key, cur, ok, o.IfMatch)
	if err != nil {
		s.discard(ctx, staged{rec: rec})
		return Written{}, err
	}
	if s.Shared == nil {
		return s.commit(ctx, staged{rec: rec}, base, o.IfMatch)
	}
	again := func(ctx context.Context) (staged, error) { return s.stageUpload(ctx, rec) }
	st, err := again(ctx)
	if err != nil {
		return Written{}, err
	}
	st.again = again
	w, err := s.commit(ctx, st, base, o.IfMatch)
	if err == nil || errors.Is(err, ErrNotApplied) {
		s.DropUpload(ctx, ref, w.Record)
	}
	return w, err
}

// stageUpload stages a verified upload (rec's blob is the uploaded object)
// as a shared blob: a live head means the bytes are stored already;
// otherwise the bucket copies the upload to the content key. While a
// deleter holds the head, the version references the upload itself.
func (s *Store) stageUpload(ctx context.Context, rec Record) (staged, error) {
	up := *rec.Blob
	ck := ContentKey(up.SHA256, up.Size)
	head, err := s.Shared.BlobHead(ctx, ck)
	if err != nil {
		return staged{}, fmt.Errorf("objects: commit blob %s for %s: read the head of %s: %w", up.Key, rec.Key, ck, err)
	}
	if head.State == BlobDeleting {
		s.Log.InfoContext(ctx, OwnBlobLog, "key", rec.Key, "writeId", rec.WriteID, "blob", ck, "upload", up.Key)
		return staged{rec: rec}, nil
	}
	st := staged{rec: rec, claim: &BlobClaim{Head: head}}
	st.rec.Blob = &BlobRef{Key: ck, Size: up.Size, SHA256: up.SHA256, ContentType: rec.ContentType, Codec: Identity}
	if head.State == BlobLive {
		st.skipped = true
		return st, nil
	}
	err = s.Blobs.CopyBlob(ctx, up, ck)
	switch {
	case err == nil:
		st.uploaded = true
	case errors.Is(err, ErrBlobExists):
	default:
		return staged{}, fmt.Errorf("objects: commit blob %s for %s: copy to %s: %w", up.Key, rec.Key, ck, err)
	}
	return st, nil
}

// DropUpload deletes an uploaded object once the version committed for it
// (rec, zero if none) references a shared blob instead, or none was
// committed. A failure is logged: the sweeper deletes the object once its
// intent expires.
func (s *Store) DropUpload(ctx context.Context, upload BlobRef, rec Record) {
	if rec.Blob != nil && rec.Blob.Key == upload.Key {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	if err := s.Blobs.DeleteBlob(ctx, upload); err != nil {
		s.Log.WarnContext(ctx, "uploaded object not deleted; left for the sweeper", "blob", upload.Key, "err", err)
	}
}

// verifyBlob reads a blob to its end; the reader checks size and digest.
func (s *Store) verifyBlob(ctx context.Context, ref BlobRef) error {
	rc, err := s.Blobs.GetBlob(ctx, ref)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(rc, ref.Size+1))
	if err != nil {
		return err
	}
	if n != ref.Size {
		return &ChecksumError{What: "blob " + ref.Key, WantSize: ref.Size, GotSize: n}
	}
	return nil
}

// commit commits a staged payload as the key's next version on top of
// base (an unconditional write moves on top of the winner of a race, up to
// MaxAttempts), deletes the payload when the commit certainly failed, and
// prunes history after a success. A conflict whose winner wrote the same
// document, as the write's If-Match allows (see document.heldBy), is
// answered with the winner's version, Unchanged: the race's outcome is
// the one this write asked for.
func (s *Store) commit(ctx context.Context, st staged, base Base, ifMatch *int64) (Written, error) {
	key := st.rec.Key
	var err error
	for attempt := 1; ; attempt++ {
		st.rec.Version = base.Version + 1
		if st.rec.Version > MaxVersion {
			s.discard(ctx, st)
			return Written{}, fmt.Errorf("objects: commit %s: version %d is past the last one", key, st.rec.Version)
		}
		err = s.Items.Commit(ctx, Commit{Base: base, Record: st.rec, Claim: st.claim})
		if err == nil {
			break
		}
		if errors.Is(err, ErrBlobChanged) && st.again != nil && attempt < s.MaxAttempts {
			// The shared blob was marked, deleted or revived since the
			// head was read: read it again, storing the bytes again if
			// they are gone.
			next, serr := st.again(ctx)
			if serr != nil {
				s.discard(ctx, st)
				return Written{}, serr
			}
			next.keep, next.again = st.keep, st.again
			next.uploaded = next.uploaded || st.uploaded && next.claim != nil && next.rec.Blob.Key == st.rec.Blob.Key
			st = next
			continue
		}
		var ce *ConflictError
		if errors.As(err, &ce) {
			if w, ok := s.heldAfterConflict(ctx, st, ifMatch); ok {
				s.discard(ctx, st)
				return w, nil
			}
		}
		if ifMatch == nil && errors.As(err, &ce) && attempt < s.MaxAttempts {
			base = Base{Version: ce.Current, Deleted: ce.Deleted}
			continue
		}
		if errors.Is(err, ErrNotApplied) {
			s.discard(ctx, st)
		} else {
			s.Log.WarnContext(ctx, "commit outcome unknown; payload left for the sweeper", "key", key, "writeId", st.rec.WriteID, "err", err)
		}
		if errors.As(err, &ce) {
			ce.Expected = -1
			if ifMatch != nil {
				ce.Expected = *ifMatch
			}
			return Written{}, ce
		}
		return Written{}, fmt.Errorf("objects: commit %s version %d: %w", key, st.rec.Version, err)
	}
	s.prune(ctx, key, st.rec.Version)
	return Written{Record: st.rec.Meta(), BlobShared: st.skipped}, nil
}

// heldAfterConflict reads v0 after a lost race and reports whether the
// winner holds the staged document (as the write's If-Match allows). A
// failed read is no answer: the conflict stands.
func (s *Store) heldAfterConflict(ctx context.Context, st staged, ifMatch *int64) (Written, bool) {
	cur, ok, err := s.Items.Item(ctx, st.rec.Key, 0)
	if err != nil {
		s.Log.WarnContext(ctx, "latest not read after a conflict", "key", st.rec.Key, "err", err)
		return Written{}, false
	}
	d := document{sum: st.rec.SHA256, size: st.rec.Size, contentType: st.rec.ContentType, keep: st.keep}
	if !d.heldBy(cur, ok, ifMatch) {
		return Written{}, false
	}
	return Written{Record: cur.Meta(), Unchanged: true}, true
}

// FindWrite returns the live version of key that writeID wrote, if any.
func (s *Store) FindWrite(ctx context.Context, key, writeID string) (Record, bool, error) {
	s.defaults()
	l, err := s.Items.List(ctx, key)
	if err != nil {
		return Record{}, false, fmt.Errorf("objects: find write %s of %s: %w", writeID, key, err)
	}
	for _, r := range l.History {
		if r.WriteID == writeID && !r.Deleted {
			return r.Meta(), true, nil
		}
	}
	return Record{}, false, nil
}
