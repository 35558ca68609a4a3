package objects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Shared blobs.
//
// A document placed in S3 is stored under a key made of its stored bytes'
// SHA-256 and size (ContentKey), so the same bytes are stored once however
// many keys and versions hold them. Sharing needs a rule for deleting a
// blob that a concurrent write may be about to reference, since S3 and
// DynamoDB share no transaction. The table keeps, per shared blob:
//
//	a head       its state (live, deleting, gone) and a generation that
//	             every change of state increments
//	a reference  one per version naming the blob (object key, write id),
//	record       written in the transaction that commits the version
//
// A write reads the head before it makes sure the bytes are stored
// (skipping the upload when the head is live), then commits its version
// items, its reference record and a condition on the head in one
// transaction: the head must still be at the generation the write read
// and not be being deleted (a live head stays as it is; an absent or gone
// one becomes live). A deleter (ReleaseBlob) marks the head deleting
// (a new generation) before it looks for reference records, and deletes the
// bytes only if it found none. So a commit either lands before the mark,
// and the deleter sees its reference record, or after it, and fails on the
// head's generation: the write then reads the head again and stores the
// bytes again if they are gone. Once the bytes are deleted, the head is
// left gone (a later generation) for a day before the table's TTL removes
// it, longer than any write's time between its read of the head and its
// commit, so that a write that read an older state can never match it.
//
// A deleter that crashes leaves the head deleting: writes of those bytes
// meanwhile store a blob of their own (BlobKey, as documents were stored
// before sharing), and the mark may be taken over once it is older than
// DeleteLease, longer than any function runs, so the crashed deleter can
// no longer act. Reference records outlive their versions until the
// reaper drops them (the removal's stream record) or the sweeper finds
// them stale.

// ContentKey is the bucket key of the shared blob holding bytes with that
// SHA-256 and size: blobs/<sha256, 64 hex>-<size>.
func ContentKey(sum Sum, size int64) string {
	return BlobPrefix + sum.String() + "-" + strconv.FormatInt(size, 10)
}

// ParseContentKey reads a shared blob's key; ok is false for any other
// key (a blob of one write, blobs/<32 hex>/<write id>, or an upload).
func ParseContentKey(blobKey string) (sum Sum, size int64, ok bool) {
	rest, found := strings.CutPrefix(blobKey, BlobPrefix)
	if !found || len(rest) < 2*len(sum)+2 || rest[2*len(sum)] != '-' {
		return Sum{}, 0, false
	}
	if _, err := hex.Decode(sum[:], []byte(rest[:2*len(sum)])); err != nil || strings.ToLower(rest[:2*len(sum)]) != rest[:2*len(sum)] {
		return Sum{}, 0, false
	}
	digits := rest[2*len(sum)+1:]
	if digits == "" || len(digits) > 1 && digits[0] == '0' || strings.TrimLeft(digits, "0123456789") != "" {
		return Sum{}, 0, false
	}
	size, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return Sum{}, 0, false
	}
	return sum, size, true
}

// IsShared reports whether a blob key names a shared blob.
func IsShared(blobKey string) bool {
	_, _, ok := ParseContentKey(blobKey)
	return ok
}

// BlobState is a shared blob's state, as its head says.
type BlobState string

// States. A head that does not exist is BlobAbsent (generation 0).
const (
	BlobAbsent   BlobState = ""
	BlobLive     BlobState = "live"     // the bytes are stored; writes may reference them
	BlobDeleting BlobState = "deleting" // a deleter holds the mark; no write may commit a reference
	BlobGone     BlobState = "gone"     // the bytes were deleted; a write stores them again
)

// OwnBlobLog is the message a write logs (with the object's key, its
// writeId and the shared blob's key) when it meets the shared blob of its
// bytes being deleted and its version keeps a blob of its own: the
// stored blob of a Write, the uploaded object of a CommitBlob.
const OwnBlobLog = "shared blob being deleted; the version keeps a blob of its own"

// BlobHead is a shared blob's head.
type BlobHead struct {
	Key   string // the content key
	State BlobState
	Gen   int64     // incremented by every change of state; 0 when absent
	Token string    // deleting: the mark's holder
	Since time.Time // deleting: when it was marked
}

// BlobClaim is what a commit holds a shared blob to: the head as the write
// read it before it made sure the bytes were stored. The commit applies
// only if the head is still at Head.Gen and not deleting (ErrBlobChanged
// otherwise); with it the table writes the version's reference record.
type BlobClaim struct{ Head BlobHead }

// SharedRef is a shared blob's reference record: the version item it
// stands for.
type SharedRef struct {
	BlobKey string
	Key     string
	WriteID string
	Version int64
}

// ErrBlobChanged: a commit's shared blob changed state since the write
// read its head (it was marked for deletion, deleted, or revived by
// another write). Nothing was written: it wraps ErrNotApplied through the
// adapters, and the write reads the head again.
var ErrBlobChanged = errors.New("objects: shared blob changed")

// SharedRecords keeps the heads and reference records of shared blobs in
// the objects table.
type SharedRecords interface {
	// BlobHead reads a head, strongly consistent; State is BlobAbsent when
	// there is none.
	BlobHead(ctx context.Context, blobKey string) (BlobHead, error)
	// Referenced reports whether any reference record names the blob,
	// strongly consistent.
	Referenced(ctx context.Context, blobKey string) (bool, error)
	// DropRef deletes the reference record of (key, writeID); a missing
	// one is no error.
	DropRef(ctx context.Context, blobKey, key, writeID string) error
	// MarkBlob sets the head to deleting under token at now (a new
	// generation, creating the head if there is none), unless another
	// deleter's mark from staleBefore or later holds it: ok is false then.
	MarkBlob(ctx context.Context, blobKey, token string, now, staleBefore time.Time) (ok bool, err error)
	// UnmarkBlob sets a head deleting under token back to live (a new
	// generation); ok is false if token no longer holds it.
	UnmarkBlob(ctx context.Context, blobKey, token string) (ok bool, err error)
	// ForgetBlob sets a head deleting under token to gone (a new
	// generation) and lets the table remove it at expires; ok is false if
	// token no longer holds it.
	ForgetBlob(ctx context.Context, blobKey, token string, expires time.Time) (ok bool, err error)
	// DropStaleRef deletes a reference record if the version item it
	// stands for (ref.Key, ref.Version) no longer holds ref.WriteID, read
	// strongly consistent after the record was seen: a version never
	// comes back, so such a record is stale for good.
	DropStaleRef(ctx context.Context, ref SharedRef) (dropped bool, err error)
}

// Shared-blob defaults.
const (
	// DefaultDeleteLease is how old a deleting mark must be before another
	// deleter may take it over: longer than any function's timeout (15
	// minutes), so the deleter that set it is no longer running.
	DefaultDeleteLease = 20 * time.Minute
	// GoneKeep is how long a gone head stays before the table's TTL
	// removes it: far longer than any write's time between reading a head
	// and committing.
	GoneKeep = 24 * time.Hour
)

// ReleaseBlob deletes a shared blob if no reference record names it, in
// the order that a concurrent commit cannot slip past (see the notes at
// the top of this file): mark the head deleting, look for reference
// records, delete the bytes, leave the head gone. It reports whether the
// bytes were deleted. A blob some reference names, or whose head another
// deleter holds, is kept (released false, no error): the holder, or the
// sweeper once the mark is stale, finishes. A mark older than DeleteLease
// is taken over, so a head left deleting with references goes back to
// live.
//
// Once it holds the mark, a step that fails is tried again (ReleaseTries,
// ReleaseBackoff), since writes of these bytes store blobs of their own
// while the head is deleting. When the references cannot be read, the
// bytes are untouched and the mark is lifted; a failure after that
// leaves the mark for the lease.
func (s *Store) ReleaseBlob(ctx context.Context, blobKey string) (released bool, err error) {
	s.defaults()
	if s.Shared == nil || s.Blobs == nil {
		return false, fmt.Errorf("objects: release %s: no shared records or blob store", blobKey)
	}
	if !IsShared(blobKey) {
		return false, fmt.Errorf("objects: release %s: not a shared blob", blobKey)
	}
	token := s.NewID()
	now := s.Now().UTC()
	ok, err := s.Shared.MarkBlob(ctx, blobKey, token, now, now.Add(-s.deleteLease()))
	if err != nil || !ok {
		return false, wrapRelease(blobKey, "mark", err)
	}
	var refd bool
	err = s.holding(ctx, func() (err error) { refd, err = s.Shared.Referenced(ctx, blobKey); return err })
	if err != nil || refd {
		// A commit landed before the mark (the blob is in use), or
		// nobody can tell: the bytes stay and so does the head.
		step := "unmark"
		if err != nil {
			step = "look for references after the mark"
		}
		uerr := s.holding(ctx, func() error { _, err := s.Shared.UnmarkBlob(ctx, blobKey, token); return err })
		return false, wrapRelease(blobKey, step, errors.Join(err, uerr))
	}
	if err := s.holding(ctx, func() error { return s.Blobs.PurgeBlob(ctx, blobKey) }); err != nil {
		return false, wrapRelease(blobKey, "delete", err)
	}
	expires := s.Now().UTC().Add(GoneKeep)
	if err := s.holding(ctx, func() error { _, err := s.Shared.ForgetBlob(ctx, blobKey, token, expires); return err }); err != nil {
		// The bytes are gone and the head still deleting: writes store
		// blobs of their own until a deleter takes the mark over.
		return true, wrapRelease(blobKey, "leave the head gone", err)
	}
	s.Log.DebugContext(ctx, "shared blob deleted", "blob", blobKey)
	return true, nil
}

// holding runs a step of a release that holds a head's mark, trying it
// again after a failure (ReleaseTries in all, ReleaseBackoff apart)
// until ctx ends. Every step may be taken twice: the mark's token makes
// the head's changes conditional, and the bytes are deleted only once no
// reference names them.
func (s *Store) holding(ctx context.Context, step func() error) error {
	for n := 1; ; n++ {
		err := step()
		if err == nil || n >= s.ReleaseTries || ctx.Err() != nil {
			return err
		}
		s.Log.InfoContext(ctx, "shared blob release step failed; trying again", "try", n, "err", err)
		if s.ReleaseBackoff.Wait(ctx, n) != nil {
			return err
		}
	}
}

func wrapRelease(blobKey, step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("objects: release %s: %s: %w", blobKey, step, err)
}

func (s *Store) deleteLease() time.Duration {
	if s.DeleteLease > 0 {
		return s.DeleteLease
	}
	return DefaultDeleteLease
}

// DropStaleRef deletes a shared blob's reference record whose version is
// gone (see SharedRecords.DropStaleRef), for the sweeper.
func (s *Store) DropStaleRef(ctx context.Context, ref SharedRef) (bool, error) {
	if s.Shared == nil {
		return false, errors.New("objects: drop reference: no shared records")
	}
	return s.Shared.DropStaleRef(ctx, ref)
}

// reapShared frees a removed version's share of a blob: its reference
// record goes, then the blob if nothing else names it.
func (s *Store) reapShared(ctx context.Context, r Record) error {
	if s.Shared == nil {
		return fmt.Errorf("blob %s is shared and the store has no shared records", r.Blob.Key)
	}
	if err := s.Shared.DropRef(ctx, r.Blob.Key, r.Key, r.WriteID); err != nil {
		return fmt.Errorf("drop the reference record of %s to %s: %w", r.WriteID, r.Blob.Key, err)
	}
	// Most removals leave other references: look first, without a mark
	// (which would make concurrent commits of these bytes try again).
	if refd, err := s.Shared.Referenced(ctx, r.Blob.Key); err != nil || refd {
		return wrapRelease(r.Blob.Key, "look for references", err)
	}
	_, err := s.ReleaseBlob(ctx, r.Blob.Key)
	return err
}

// stageShared makes sure a document's stored bytes are in the bucket as a
// shared blob and returns the staged record with its claim on the head:
// a live head means the bytes are there (no upload); an absent or gone one
// that they must be stored (an existing object, a crashed write's or a
// concurrent one's, is taken as it is: same key, same bytes). While a
// deleter holds the head the write stores a blob of its own instead.
func (s *Store) stageShared(ctx context.Context, rec Record, stored []byte, put func() (staged, error)) (staged, error) {
	sum, size := SumOf(stored), int64(len(stored))
	ck := ContentKey(sum, size)
	head, err := s.Shared.BlobHead(ctx, ck)
	if err != nil {
		return staged{}, fmt.Errorf("objects: put %s: read the head of %s: %w", rec.Key, ck, err)
	}
	ref := BlobRef{Key: ck, Size: size, SHA256: sum, ContentType: rec.ContentType, Codec: rec.Codec}
	st := staged{rec: rec, claim: &BlobClaim{Head: head}}
	st.rec.Blob = &ref
	switch head.State {
	case BlobLive:
		st.skipped = true
		return st, nil
	case BlobDeleting:
		s.Log.InfoContext(ctx, OwnBlobLog, "key", rec.Key, "writeId", rec.WriteID, "blob", ck)
		return put()
	}
	got, err := s.Blobs.PutBlob(ctx, Blob{Key: ck, Body: stored, SHA256: sum, ContentType: rec.ContentType, Codec: rec.Codec})
	switch {
	case err == nil:
		st.uploaded = true
		if got.Bucket != "" {
			ref.Bucket = got.Bucket
		}
	case errors.Is(err, ErrBlobExists):
		// Stored already, by a write that has not committed (or never
		// will): the commit's claim makes it ours.
	default:
		// A failed PUT may have stored the bytes; a concurrent write may
		// be taking them: only a release may delete them, and the sweeper
		// does after the grace.
		return staged{}, fmt.Errorf("objects: put %s: write blob %s: %w", rec.Key, ck, err)
	}
	return st, nil
}

// refKey is the part of a reference record's sort key that names the
// object key: the first 128 bits of its SHA-256, hex.
func refKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:16])
}

// RefSortKey is the sort key of the reference record of (key, writeID)
// under its blob's head: r#<first 128 bits of sha256(key), hex>#<writeID>.
func RefSortKey(key, writeID string) string { return "r#" + refKey(key) + "#" + writeID }
