package objects

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// SignedRequest is a request a client makes without credentials: the
// method, the URL and the headers it must send as they are (they are
// signed), until Expires.
type SignedRequest struct {
	Method  string
	URL     string
	Header  http.Header
	Expires time.Time
}

// Part is a finished part of a multipart upload, as the client reports it.
type Part struct {
	Number int32
	ETag   string
}

// Transfers is what the Uploader needs from the bucket besides Blobs:
// presigned single and multipart uploads, all to keys that must not exist.
type Transfers interface {
	PresignUpload(ctx context.Context, blobKey string, size int64, sum Sum, contentType string, expires time.Time) (SignedRequest, error)
	CreateMultipart(ctx context.Context, blobKey, contentType string, sum Sum) (multipartID string, err error)
	PresignPart(ctx context.Context, blobKey, multipartID string, part int32, size int64, expires time.Time) (SignedRequest, error)
	// CompleteMultipart assembles the parts; a part list the bucket
	// refuses is an *InvalidError with ReasonBadParts. A multipart upload
	// that is not open (completed already, or aborted) also wraps
	// ErrMultipartGone; an object already at blobKey wraps ErrBlobExists.
	CompleteMultipart(ctx context.Context, blobKey, multipartID string, parts []Part) error
	AbortMultipart(ctx context.Context, blobKey, multipartID string) error
}

// Uploader grants presigned uploads and finalizes them into versions.
//
// The intent (key, size, SHA-256, content type, If-Match, deadline) is an
// item in the objects table (Uploads), written before the client gets any
// URL: the finalizer, woken by the bucket's ObjectCreated event, finds it
// by the upload id in the bucket key, verifies the bytes against it, and
// commits with Store.CommitBlob. The outcome is kept on the same item,
// which the table's TTL removes later.
type Uploader struct {
	Store   *Store // commits, and its Blobs read and delete uploads
	Uploads Uploads
	Bucket  Transfers
	// TTL is how long a client has to upload (and complete a multipart
	// upload): the presigned requests expire then, and a later upload is
	// refused (default 15 minutes).
	TTL time.Duration
	// Keep is how long the outcome stays readable after the deadline
	// (default 24 hours).
	Keep time.Duration
	// MultipartAbove is the largest upload made with one PUT (default
	// 16 MiB); bigger ones are multipart with parts of PartSize.
	MultipartAbove int64
	// PartSize is the smallest part (default and minimum 8 MiB); parts
	// grow so that an upload has at most MaxParts.
	PartSize int64
	MaxParts int
	// Lease bounds one finalizer's work on an upload; it must exceed the
	// finalizer's timeout (default 3 minutes).
	Lease time.Duration
	Now   func() time.Time
	NewID func() string
	Log   *slog.Logger

	once sync.Once
}

// Uploader defaults.
const (
	DefaultUploadTTL      = 15 * time.Minute
	DefaultUploadKeep     = 24 * time.Hour
	DefaultMultipartAbove = 16 << 20
	MinPartSize           = 8 << 20
	DefaultMaxParts       = 1000
	DefaultUploadLease    = 3 * time.Minute
)

func (u *Uploader) defaults() {
	u.once.Do(func() {
		if u.TTL <= 0 {
			u.TTL = DefaultUploadTTL
		}
		if u.Keep <= 0 {
			u.Keep = DefaultUploadKeep
		}
		if u.MultipartAbove <= 0 {
			u.MultipartAbove = DefaultMultipartAbove
		}
		if u.PartSize < MinPartSize {
			u.PartSize = MinPartSize
		}
		if u.MaxParts <= 0 || u.MaxParts > 10000 {
			u.MaxParts = DefaultMaxParts
		}
		if u.Lease <= 0 {
			u.Lease = DefaultUploadLease
		}
		if u.Now == nil {
			u.Now = time.Now
		}
		if u.NewID == nil {
			u.NewID = RandomID
		}
		if u.Log == nil {
			u.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// UploadRequest is what a client declares before uploading.
type UploadRequest struct {
	Size        int64
	SHA256      Sum
	ContentType string
	IfMatch     *int64
}

// Grant is a granted upload: its intent and the requests the client makes,
// one PUT or one per part, in order.
type Grant struct {
	Upload Upload
	Put    *SignedRequest
	Parts  []SignedRequest
}

// PlanParts returns the part size and count of a multipart upload of size
// bytes: parts of at least minPart (whole MiB) and at most maxParts of them.
func PlanParts(size, minPart int64, maxParts int) (partSize int64, parts int) {
	partSize = minPart
	if need := (size + int64(maxParts) - 1) / int64(maxParts); need > partSize {
		partSize = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	parts = int((size + partSize - 1) / partSize)
	return partSize, max(parts, 1)
}

// Begin grants an upload of a document to key: the intent is stored, then
// the presigned requests are made. A stale IfMatch is refused now (a
// *ConflictError) rather than after the client sent every byte; it is
// checked again when the upload commits.
func (u *Uploader) Begin(ctx context.Context, key string, r UploadRequest) (Grant, error) {
	u.defaults()
	if err := ValidateKey(key); err != nil {
		return Grant{}, err
	}
	ct, err := NormalizeContentType(r.ContentType)
	if err != nil {
		return Grant{}, err
	}
	if maxSize := u.Store.Policy.withDefaults().MaxSize; r.Size < 0 || r.Size > maxSize {
		return Grant{}, invalid(ReasonTooLarge, "the document is %d bytes, uploads take 0 to %d", r.Size, maxSize)
	}
	if r.SHA256.IsZero() {
		return Grant{}, invalid(ReasonBadSHA256, "an upload declares the document's SHA-256")
	}
	if r.IfMatch != nil {
		if *r.IfMatch < 0 || *r.IfMatch > MaxVersion {
			return Grant{}, invalid(ReasonBadVersion, "ifMatch %d is not a version (0 to %d)", *r.IfMatch, int64(MaxVersion))
		}
		if err := u.checkBase(ctx, key, r, ct); err != nil {
			return Grant{}, err
		}
	}
	id := u.NewID()
	if err := validWriteID(id); err != nil {
		return Grant{}, err
	}
	now := u.Now().UTC()
	up := Upload{
		ID: id, Key: key, Size: r.Size, SHA256: r.SHA256, ContentType: ct, IfMatch: r.IfMatch,
		BlobKey: UploadKey(key, id), State: UploadPending,
		CreatedAt: now, Deadline: now.Add(u.TTL), ExpiresAt: now.Add(u.TTL + u.Keep),
	}
	if r.Size > u.MultipartAbove {
		up.PartSize, up.Parts = PlanParts(r.Size, u.PartSize, u.MaxParts)
		if up.MultipartID, err = u.Bucket.CreateMultipart(ctx, up.BlobKey, ct, r.SHA256); err != nil {
			return Grant{}, fmt.Errorf("objects: upload %s: create multipart: %w", key, err)
		}
	}
	if err := u.Uploads.CreateUpload(ctx, up); err != nil {
		u.abort(ctx, up)
		return Grant{}, fmt.Errorf("objects: upload %s: store intent: %w", key, err)
	}
	g := Grant{Upload: up}
	if up.MultipartID == "" {
		put, err := u.Bucket.PresignUpload(ctx, up.BlobKey, up.Size, up.SHA256, ct, up.Deadline)
		if err != nil {
			return Grant{}, fmt.Errorf("objects: upload %s: presign: %w", key, err)
		}
		g.Put = &put
		return g, nil
	}
	for n := 1; n <= up.Parts; n++ {
		size := min(up.PartSize, up.Size-int64(n-1)*up.PartSize)
		p, err := u.Bucket.PresignPart(ctx, up.BlobKey, up.MultipartID, int32(n), size, up.Deadline)
		if err != nil {
			return Grant{}, fmt.Errorf("objects: upload %s: presign part %d: %w", key, n, err)
		}
		g.Parts = append(g.Parts, p)
	}
	return g, nil
}

// checkBase refuses an upload based on a version that is not the latest,
// as Store.Write would: an upload of the document the latest version
// already holds passes (it will commit Unchanged), so a retried upload
// whose first attempt committed is not refused.
func (u *Uploader) checkBase(ctx context.Context, key string, r UploadRequest, ct string) error {
	cur, ok, err := u.Store.Items.Item(ctx, key, 0)
	if err != nil {
		return fmt.Errorf("objects: upload %s: read latest: %w", key, err)
	}
	if (document{sum: r.SHA256, size: r.Size, contentType: ct}).heldBy(cur, ok, r.IfMatch) {
		return nil
	}
	_, err = baseOf(key, cur, ok, r.IfMatch)
	return err
}

func (u *Uploader) abort(ctx context.Context, up Upload) {
	if up.MultipartID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	if err := u.Bucket.AbortMultipart(ctx, up.BlobKey, up.MultipartID); err != nil {
		u.Log.WarnContext(ctx, "multipart upload not aborted; the bucket's lifecycle rule will", "key", up.Key, "upload", up.ID, "err", err)
	}
}

// Status returns an upload of key; ErrNotFound if there is none (never
// granted, for another key, or forgotten after ExpiresAt).
func (u *Uploader) Status(ctx context.Context, key, id string) (Upload, error) {
	u.defaults()
	if err := ValidateKey(key); err != nil {
		return Upload{}, err
	}
	if validWriteID(id) != nil {
		return Upload{}, fmt.Errorf("%w: upload %q of %s", ErrNotFound, truncate(id, 64), key)
	}
	up, ok, err := u.Uploads.GetUpload(ctx, id)
	if err != nil {
		return Upload{}, fmt.Errorf("objects: upload %s of %s: %w", id, key, err)
	}
	if !ok || up.Key != key {
		return Upload{}, fmt.Errorf("%w: upload %s of %s", ErrNotFound, id, key)
	}
	return up, nil
}

// Complete assembles a multipart upload from its parts. The finalizer
// commits it when the bucket reports the object.
//
// Completing twice is answered with the upload as it is: a committed
// upload with its outcome, and a pending one whose parts an earlier call
// already assembled (the bucket has the object, and no open multipart
// upload) as pending. A failed or expired upload is ReasonUploadClosed.
func (u *Uploader) Complete(ctx context.Context, key, id string, parts []Part) (Upload, error) {
	up, err := u.Status(ctx, key, id)
	if err != nil {
		return Upload{}, err
	}
	switch {
	case up.MultipartID == "":
		return Upload{}, invalid(ReasonBadParts, "upload %s is a single PUT: there is nothing to complete", id)
	case up.State == UploadCommitted:
		return up, nil
	case up.State != UploadPending:
		return Upload{}, invalid(ReasonUploadClosed, "upload %s is %s", id, up.State)
	case u.Now().After(up.Deadline):
		return Upload{}, invalid(ReasonUploadClosed, "upload %s expired at %s", id, up.Deadline.Format(time.RFC3339))
	case len(parts) != up.Parts:
		return Upload{}, invalid(ReasonBadParts, "upload %s has %d parts, got %d", id, up.Parts, len(parts))
	}
	for i, p := range parts {
		if p.Number != int32(i+1) || p.ETag == "" {
			return Upload{}, invalid(ReasonBadParts, "part %d: want partNumber %d and its etag", i+1, i+1)
		}
	}
	err = u.Bucket.CompleteMultipart(ctx, up.BlobKey, up.MultipartID, parts)
	if errors.Is(err, ErrMultipartGone) || errors.Is(err, ErrBlobExists) {
		if done, ok, aerr := u.assembled(ctx, up); aerr != nil {
			return Upload{}, fmt.Errorf("objects: complete upload %s of %s: %w (then: %w)", id, key, err, aerr)
		} else if ok {
			return done, nil
		}
	}
	if err != nil {
		return Upload{}, fmt.Errorf("objects: complete upload %s of %s: %w", id, key, err)
	}
	return up, nil
}

// assembled tells, after the bucket refused to complete up's multipart
// upload because it is no longer open, whether an earlier Complete
// assembled it: the upload is settled as committed by now, or the bucket
// holds its object. It returns the upload as it is then.
func (u *Uploader) assembled(ctx context.Context, up Upload) (Upload, bool, error) {
	now, err := u.Status(ctx, up.Key, up.ID)
	if err != nil {
		return Upload{}, false, err
	}
	if now.State == UploadCommitted {
		return now, true, nil
	}
	if now.State != UploadPending {
		return Upload{}, false, nil
	}
	rc, err := u.Store.Blobs.GetBlob(ctx, BlobRef{Key: up.BlobKey, Size: up.Size, SHA256: up.SHA256})
	switch {
	case err == nil:
		rc.Close() // only whether it is there: the finalizer verifies it
		return now, true, nil
	case errors.Is(err, ErrChecksum): // there, but not what was declared: the finalizer fails it
		return now, true, nil
	case errors.Is(err, ErrBlobNotFound):
		return Upload{}, false, nil
	}
	return Upload{}, false, err
}

// Uploaded is an object the bucket reports as created.
type Uploaded struct {
	Bucket    string
	Key       string
	VersionID string
	Size      int64 // -1 if unknown
}

// Finalize turns an uploaded object into a version of its key: it finds
// the intent, takes its lease, checks the deadline and the size, verifies
// the bytes (Store.CommitBlob) and commits, then records the outcome. An
// object with no intent (not an upload, or one forgotten) is left alone
// for the orphan sweeper; an upload already settled is returned as it is,
// so a repeated event does nothing. ErrUploadBusy and other errors mean
// "try again later".
func (u *Uploader) Finalize(ctx context.Context, o Uploaded) (Upload, error) {
	u.defaults()
	id, ok := ParseUploadKey(o.Key)
	if !ok {
		return Upload{}, fmt.Errorf("%w: %s is not an upload key", ErrNotFound, o.Key)
	}
	now := u.Now().UTC()
	up, claimed, err := u.Uploads.ClaimUpload(ctx, id, now, now.Add(u.Lease))
	if errors.Is(err, ErrNotFound) {
		return Upload{}, fmt.Errorf("%w: no intent for upload %s", ErrNotFound, o.Key)
	}
	if err != nil {
		return Upload{}, fmt.Errorf("objects: finalize %s: %w", o.Key, err)
	}
	if !claimed {
		return up, nil // settled
	}
	if up.BlobKey != o.Key {
		return Upload{}, fmt.Errorf("%w: upload %s is for %s, not %s", ErrNotFound, id, up.BlobKey, o.Key)
	}
	ref := BlobRef{
		Bucket: o.Bucket, Key: o.Key, VersionID: o.VersionID, Size: up.Size, SHA256: up.SHA256,
		ContentType: up.ContentType, Codec: Identity,
	}
	fail := func(reason, detail string) (Upload, error) {
		u.Store.discard(ctx, staged{rec: Record{Key: up.Key, Kind: InS3, Blob: &ref}})
		up.State, up.Reason, up.Detail = UploadFailed, reason, detail
		return u.settle(ctx, up)
	}
	// A finalizer that committed and then crashed before settling left
	// the version: settle it, whatever the clock says now.
	if rec, ok, err := u.Store.FindWrite(ctx, up.Key, up.ID); err != nil {
		return Upload{}, fmt.Errorf("objects: finalize %s: %w", o.Key, err)
	} else if ok {
		u.Store.DropUpload(ctx, ref, rec)
		up.State, up.Version = UploadCommitted, rec.Version
		return u.settle(ctx, up)
	}
	if now.After(up.Deadline) {
		return fail(UploadFailedExpired, fmt.Sprintf("the upload finished after its deadline, %s", up.Deadline.Format(time.RFC3339)))
	}
	if o.Size >= 0 && o.Size != up.Size {
		return fail(UploadFailedChecksum, fmt.Sprintf("the upload is %d bytes, %d were declared", o.Size, up.Size))
	}
	// CommitBlob reads the whole object before it commits: the commit may
	// come up to the finalizer's timeout after the deadline, which the
	// sweeper's grace for uploads/ covers (see Upload.Deadline).
	w, err := u.Store.CommitBlob(ctx, up.Key, ref, CommitBlobOptions{IfMatch: up.IfMatch, ContentType: up.ContentType, WriteID: up.ID})
	var ce *ConflictError
	var ie *InvalidError
	switch {
	case err == nil:
		up.State, up.Version, up.Unchanged, up.BlobShared = UploadCommitted, w.Version, w.Unchanged, w.BlobShared
		return u.settle(ctx, up)
	case errors.As(err, &ce):
		up.State, up.Reason, up.Current = UploadFailed, UploadFailedConflict, ce.Current
		up.Detail = ce.Error()
		return u.settle(ctx, up)
	case errors.Is(err, ErrChecksum):
		up.State, up.Reason, up.Detail = UploadFailed, UploadFailedChecksum, "the uploaded bytes do not match the declared size and SHA-256"
		return u.settle(ctx, up)
	case errors.As(err, &ie) && ie.Reason == ReasonTooLarge:
		up.State, up.Reason, up.Detail = UploadFailed, UploadFailedTooLarge, ie.Detail
		return u.settle(ctx, up)
	case errors.Is(err, ErrBlobNotFound):
		up.State, up.Reason, up.Detail = UploadFailed, UploadFailedMissing, "the uploaded object is gone"
		return u.settle(ctx, up)
	}
	return Upload{}, fmt.Errorf("objects: finalize %s: %w", o.Key, err)
}

func (u *Uploader) settle(ctx context.Context, up Upload) (Upload, error) {
	up.ClaimedUntil = time.Time{}
	if err := u.Uploads.SettleUpload(ctx, up); err != nil {
		return up, fmt.Errorf("objects: settle upload %s: %w", up.ID, err)
	}
	return up, nil
}
