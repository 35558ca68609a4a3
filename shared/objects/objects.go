// Package objects is the large-object store's domain: which keys are valid,
// where a document is placed (inline, compressed inline, chunked, or in S3),
// how versions are named and pruned, how chunked payloads are split and
// verified, and the Store service that writes and reads documents in the
// order that never leaves a reference to a missing payload. It imports no
// AWS package: the table is reached through Items and Chunks, the bucket
// through Blobs, all declared here and implemented by adapters
// (objectsddb, objectss3) and by the in-memory fakes of objectstest.
//
// # The objects table
//
// One partition per object key; its items are versions:
//
//	pk = <key>                  sk = v0            the latest version, a copy of the newest vN (or a tombstone)
//	pk = <key>                  sk = v0000000007   version 7 (history); begins_with(sk, "v") lists them all
//	pk = <key>#<writeID>#00003  sk = c             chunk 3 of the chunked version written by writeID
//
// Keys never contain '#' (see ValidateKey), so a chunk's partition key can
// never be an object's. Chunks get a partition each, so a chunked document's
// writes and parallel reads spread over partitions instead of piling on one
// (a partition takes about 1,000 write units a second: one 1 MB document).
//
// # The bucket
//
//	blobs/<sha256 as 64 hex>-<size>           a shared blob: stored bytes, once
//	blobs/<sha256(key) as 32 hex>/<writeID>   a blob of one write
//	uploads/<sha256(key) as 32 hex>/<id>      a presigned upload
//
// A store with shared records (Store.Shared) keeps documents placed in S3
// as shared blobs (ContentKey): the same stored bytes under any number of
// keys and versions are one object, deleted only once no version names it
// (see shared.go for the order that makes this safe without a transaction
// between S3 and DynamoDB). A blob of one write is what a store without
// shared records writes, what documents stored before sharing are, and
// what a write stores while the shared blob of its bytes is being
// deleted: the write id is random and new for each Put, so the key is
// never written twice (the adapter also writes with If-None-Match: *), and
// the blob is deleted with its version. The key hash makes such keys short
// and fixed-length (object keys may be as long as S3's own limit).
//
// # Invariants
//
// A version's payload (its blob or its chunks) is written before the item
// that references it and removed only after that item is gone (a shared
// blob: after every item naming it is gone), so no reference points to a
// missing payload. The payload of version N lives as
// long as item vN: v0 is a copy that is always backed by vN (they commit
// together, and a delete tombstones v0 and removes vN together). Payloads
// left behind by a crash are orphans, which the sweeper removes (Orphans).
//
// The Reaper frees the payloads of removed history items (the table's
// stream), the Sweeper removes orphans (a schedule), and Check proves the
// invariants over the same ports (RefScanner, VersionLister).
package objects

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/refusal"
)

// Errors. Each is matched with errors.Is; the typed errors below carry the
// details.
var (
	// ErrNotFound: no such object, or no such version of it.
	ErrNotFound = errors.New("objects: not found")
	// ErrConflict: the write was based on a version that is not the
	// current one (optimistic locking). Matched by *ConflictError.
	ErrConflict = errors.New("objects: version conflict")
	// ErrInvalid: the request breaks an input rule. Matched by *InvalidError.
	ErrInvalid = errors.New("objects: invalid")
	// ErrChecksum: stored bytes do not match their recorded size or
	// SHA-256. Matched by *ChecksumError. Never returned with data.
	ErrChecksum = errors.New("objects: checksum mismatch")
	// ErrNotApplied marks a store failure that certainly changed nothing
	// (a cancelled transaction, a rejected request, throttling). After
	// such a failure the staged payload can be deleted safely; after any
	// other failure the outcome is unknown and the payload is left to the
	// sweeper, which deletes it only if no reference names it.
	ErrNotApplied = errors.New("objects: not applied")
	// ErrThrottled: a store refused a request for load (after the SDK's
	// own retries). The caller may retry shortly.
	ErrThrottled = errors.New("objects: throttled")
	// ErrBlobNotFound: Blobs or Chunks hold nothing at the reference.
	ErrBlobNotFound = errors.New("objects: blob not found")
	// ErrBlobExists: a blob key was written twice (If-None-Match failed).
	ErrBlobExists = errors.New("objects: blob exists")
	// ErrMultipartGone: the bucket has no open multipart upload by that
	// id: it was completed already, or aborted.
	ErrMultipartGone = errors.New("objects: multipart upload not open")
	// ErrDangling: a live reference names a payload that is missing. The
	// write order makes this impossible; seeing it means a bug or a
	// payload removed by hand.
	ErrDangling = errors.New("objects: dangling reference")
)

// ConflictError is a stale write: Current is the version the object is at
// (0 when it does not exist), Deleted is true when it was deleted.
type ConflictError struct {
	Key      string
	Expected int64 // the version the write was based on; -1 for an unconditional write
	Current  int64
	Deleted  bool
}

func (e *ConflictError) Error() string {
	state := fmt.Sprintf("is at version %d", e.Current)
	switch {
	case e.Current == 0:
		state = "does not exist"
	case e.Deleted:
		state = fmt.Sprintf("was deleted at version %d", e.Current)
	}
	if e.Expected < 0 {
		return fmt.Sprintf("objects: %s: conflict: it %s", e.Key, state)
	}
	return fmt.Sprintf("objects: %s: conflict: expected version %d, it %s", e.Key, e.Expected, state)
}

// Is makes errors.Is(err, ErrConflict) true. A conflict is also a failure
// that changed nothing, so errors.Is(err, ErrNotApplied) is true too.
func (e *ConflictError) Is(target error) bool {
	return target == ErrConflict || target == ErrNotApplied
}

// Reason says why a request was refused. The values are stable: a 4xx
// response carries them.
type Reason string

// Reasons.
const (
	ReasonEmptyKey         Reason = "empty-key"
	ReasonKeyTooLong       Reason = "key-too-long"
	ReasonKeyNotUTF8       Reason = "key-not-utf8"
	ReasonKeyBadChar       Reason = "key-bad-char"
	ReasonTooLarge         Reason = "too-large"
	ReasonBadContentType   Reason = "bad-content-type"
	ReasonBadVersion       Reason = "bad-version"
	ReasonTooLargeForTable Reason = "too-large-for-table"
	ReasonBadSHA256        Reason = "bad-sha256"
	ReasonBadParts         Reason = "bad-parts"
	ReasonUploadClosed     Reason = "upload-closed"
	// Ranges (see ParseRange and RangeSpec.Resolve).
	ReasonBadRange            Reason = "bad-range"
	ReasonMultipleRanges      Reason = "multiple-ranges"
	ReasonRangeNotSatisfiable Reason = "range-not-satisfiable"
)

// Refused is ErrInvalid: errors.Is(err, ErrInvalid) holds for every
// *InvalidError.
func (Reason) Refused() error { return ErrInvalid }

// InvalidError is a refused request with its reason and a detail that may
// be shown to the client (it never holds internal state).
type InvalidError = refusal.Error[Reason]

var invalid = refusal.New[Reason]

// ReasonOf returns the reason of an *InvalidError in err's chain, or "".
func ReasonOf(err error) Reason { return refusal.ReasonOf[Reason](err) }

// ChecksumError is stored data that does not match its record.
type ChecksumError struct {
	What     string // "blob blobs/…", "chunks of write …", …
	Detail   string // what was wrong, when it is not a size or a digest
	WantSize int64
	GotSize  int64
	Want     Sum
	Got      Sum // zero when the size already differs
}

func (e *ChecksumError) Error() string {
	switch {
	case e.Detail != "":
		return fmt.Sprintf("objects: %s: checksum mismatch: %s", e.What, e.Detail)
	case e.WantSize != e.GotSize:
		return fmt.Sprintf("objects: %s: checksum mismatch: %d bytes, want %d", e.What, e.GotSize, e.WantSize)
	case e.Got != e.Want:
		return fmt.Sprintf("objects: %s: checksum mismatch: sha256 %s, want %s", e.What, e.Got, e.Want)
	}
	return fmt.Sprintf("objects: %s: checksum mismatch", e.What)
}

// Is makes errors.Is(err, ErrChecksum) true.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksum }

// Sum is a SHA-256 digest.
type Sum [sha256.Size]byte

// SumOf returns the SHA-256 of b.
func SumOf(b []byte) Sum { return sha256.Sum256(b) }

// String is the digest in lowercase hex, as references store it.
func (s Sum) String() string { return hex.EncodeToString(s[:]) }

// Base64 is the digest as S3's x-amz-checksum-sha256 header carries it.
func (s Sum) Base64() string { return base64.StdEncoding.EncodeToString(s[:]) }

// IsZero reports whether s is unset.
func (s Sum) IsZero() bool { return s == Sum{} }

// ParseSum reads a digest in hex (64 characters).
func ParseSum(h string) (Sum, error) {
	var s Sum
	if len(h) != 2*len(s) {
		return s, fmt.Errorf("objects: sha256 %q: want %d hex characters", h, 2*len(s))
	}
	if _, err := hex.Decode(s[:], []byte(h)); err != nil {
		return s, fmt.Errorf("objects: sha256 %q: %w", h, err)
	}
	return s, nil
}

// Kind is where a version's payload lives.
type Kind string

// Kinds, by placement (see Policy).
const (
	Inline           Kind = "inline"     // the bytes in the item
	CompressedInline Kind = "compressed" // gzip bytes in the item
	Chunked          Kind = "chunked"    // chunk items, named by the manifest
	InS3             Kind = "s3"         // a blob in the bucket, named by the reference
)

// Codec is how stored bytes are encoded. The SHA-256 of a record is always
// of the document itself, before encoding.
type Codec string

// Codecs.
const (
	Identity Codec = "identity"
	Gzip     Codec = "gzip"
)

// BlobRef names a blob in the bucket: what the item stores for an S3
// placement, and all a reader needs to fetch and verify it.
type BlobRef struct {
	Bucket      string
	Key         string
	VersionID   string // the bucket's version of the blob; "" if the bucket is not versioned
	Size        int64  // stored bytes
	SHA256      Sum    // of the stored bytes
	ContentType string
	Codec       Codec
}

// Record is one version of an object as the table holds it: its metadata
// and, for inline placements, its payload.
type Record struct {
	Key         string
	Version     int64 // 1, 2, …; a tombstone keeps the version that was deleted
	Kind        Kind
	Size        int64 // of the document
	SHA256      Sum   // of the document
	ContentType string
	Codec       Codec     // of Data (inline kinds) or of the chunks
	Data        []byte    // Inline and CompressedInline: the stored bytes
	Manifest    *Manifest // Chunked
	Blob        *BlobRef  // InS3
	WriteID     string    // unique per Put: names its blob or chunks
	CreatedAt   time.Time
	// Deleted marks a tombstone: v0 of a deleted object. It keeps the
	// version number, so versions never restart and a writer holding a
	// version from before the delete gets a conflict, not a silent success.
	Deleted bool
}

// Meta is r without its payload bytes (for listings and responses).
func (r Record) Meta() Record {
	r.Data = nil
	return r
}
