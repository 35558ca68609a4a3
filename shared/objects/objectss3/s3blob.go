// Package objectss3 keeps the objects domain's blobs in S3: write-once puts
// (If-None-Match: *) carrying their SHA-256 for S3 to check, reads verified
// against the reference, deletes of the exact version, presigned URLs for
// uploads and downloads that are too big for a Lambda payload, and (Bucket)
// the listing and deleting of every version that the orphan sweeper and
// objects.Check need.
//
// Blob metadata (x-amz-meta-*):
//
//	object-key  the object key, URL-escaped (metadata is ASCII); not on a
//	            shared blob
//	write-id    the Put that wrote it; not on a shared blob
//	sha256      the stored bytes' SHA-256, hex
//	codec       identity or gzip
package objectss3

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

// API is the part of the S3 client the store uses; *s3.Client satisfies
// it, and so does the unit tests' fake, which checks the exact requests
// and answers with the errors S3 gives. The package's other adapters take
// the client itself.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	CopyObject(ctx context.Context, in *s3.CopyObjectInput, opts ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	s3.ListObjectsV2APIClient
}

var (
	_ API           = (*s3.Client)(nil)
	_ objects.Blobs = (*Store)(nil)
)

// Store keeps blobs in one bucket.
type Store struct {
	api     API
	presign *s3.PresignClient
	bucket  string
	// unconditional is set once the server answered If-None-Match with
	// NotImplemented: later puts go without it (their keys are unique
	// anyway; the header is a second line of defence).
	unconditional atomic.Bool
}

// New returns a store over bucket. presign may be nil if the caller never
// presigns.
func New(api API, presign *s3.PresignClient, bucket string) *Store {
	return &Store{api: api, presign: presign, bucket: bucket}
}

// FromClient returns a store over bucket that presigns with the client's
// configuration.
func FromClient(c *s3.Client, bucket string) *Store {
	return New(c, s3.NewPresignClient(c), bucket)
}

// Bucket is the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Metadata keys.
const (
	MetaObjectKey = "object-key"
	MetaWriteID   = "write-id"
	MetaSHA256    = "sha256"
	MetaCodec     = "codec"
)

// classify maps S3's answers to the domain's errors. A request S3 refused
// (throttled, precondition failed, bad digest) certainly stored nothing,
// which the domain needs to know to clean up safely.
func classify(err error) error {
	switch awserr.Code(err) {
	case "NoSuchKey", "NotFound", "NoSuchVersion":
		return fmt.Errorf("%w: %w", objects.ErrBlobNotFound, err)
	case "PreconditionFailed", "ConditionalRequestConflict":
		return fmt.Errorf("%w: %w", objects.ErrBlobExists, err)
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded":
		return fmt.Errorf("%w: %w: %w", objects.ErrThrottled, objects.ErrNotApplied, err)
	case "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch":
		return fmt.Errorf("%w: %w: %w", objects.ErrChecksum, objects.ErrNotApplied, err)
	}
	return err
}

func (s *Store) bucketOf(ref objects.BlobRef) string {
	if ref.Bucket != "" {
		return ref.Bucket
	}
	return s.bucket
}

// PutBlob implements objects.Blobs. The key must not exist: the put carries
// If-None-Match: * (where the server supports it) and fails with
// objects.ErrBlobExists otherwise. It also carries the body's SHA-256, so
// S3 refuses a body damaged on the way (objects.ErrChecksum).
func (s *Store) PutBlob(ctx context.Context, b objects.Blob) (objects.BlobRef, error) {
	codec := b.Codec
	if codec == "" {
		codec = objects.Identity
	}
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(b.Key),
		Body:           bytes.NewReader(b.Body),
		ContentLength:  aws.Int64(int64(len(b.Body))),
		ChecksumSHA256: aws.String(b.SHA256.Base64()),
		Metadata: map[string]string{
			MetaSHA256: b.SHA256.String(),
			MetaCodec:  string(codec),
		},
	}
	if b.ObjectKey != "" {
		in.Metadata[MetaObjectKey] = url.PathEscape(b.ObjectKey)
	}
	if b.WriteID != "" {
		in.Metadata[MetaWriteID] = b.WriteID
	}
	if b.ContentType != "" {
		in.ContentType = aws.String(b.ContentType)
	}
	if !s.unconditional.Load() {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.api.PutObject(ctx, in)
	if err != nil && in.IfNoneMatch != nil && awserr.Code(err) == "NotImplemented" {
		s.unconditional.Store(true)
		in.IfNoneMatch = nil
		in.Body = bytes.NewReader(b.Body)
		out, err = s.api.PutObject(ctx, in)
	}
	if err != nil {
		return objects.BlobRef{}, fmt.Errorf("objectss3: put s3://%s/%s: %w", s.bucket, b.Key, classify(err))
	}
	return objects.BlobRef{
		Bucket: s.bucket, Key: b.Key, VersionID: aws.ToString(out.VersionId),
		Size: int64(len(b.Body)), SHA256: b.SHA256, ContentType: b.ContentType, Codec: codec,
	}, nil
}

// GetBlob implements objects.Blobs: it opens the referenced version and
// returns a reader that fails with a *objects.ChecksumError at its end if
// the bytes do not match the reference's size and SHA-256. A length or a
// checksum header that already disagrees fails before any byte is read.
func (s *Store) GetBlob(ctx context.Context, ref objects.BlobRef) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucketOf(ref)), Key: aws.String(ref.Key)}
	if ref.VersionID != "" {
		in.VersionId = aws.String(ref.VersionID)
	}
	out, err := s.api.GetObject(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("objectss3: get s3://%s/%s: %w", s.bucketOf(ref), ref.Key, classify(err))
	}
	what := fmt.Sprintf("blob s3://%s/%s", s.bucketOf(ref), ref.Key)
	if out.ContentLength != nil && *out.ContentLength != ref.Size {
		out.Body.Close()
		return nil, &objects.ChecksumError{What: what, WantSize: ref.Size, GotSize: *out.ContentLength}
	}
	if sum := aws.ToString(out.ChecksumSHA256); sum != "" && !strings.Contains(sum, "-") && sum != ref.SHA256.Base64() {
		out.Body.Close()
		return nil, &objects.ChecksumError{What: what, Detail: fmt.Sprintf("S3 holds sha256 %s, the reference says %s", sum, ref.SHA256.Base64())}
	}
	return readCloser{objects.VerifyReader(what, out.Body, ref.Size, ref.SHA256), out.Body}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// DeleteBlob implements objects.Blobs. With a version id it deletes that
// version for good (a plain delete in a versioned bucket would only hide
// it behind a delete marker); a missing blob is no error.
func (s *Store) DeleteBlob(ctx context.Context, ref objects.BlobRef) error {
	in := &s3.DeleteObjectInput{Bucket: aws.String(s.bucketOf(ref)), Key: aws.String(ref.Key)}
	if ref.VersionID != "" {
		in.VersionId = aws.String(ref.VersionID)
	}
	_, err := s.api.DeleteObject(ctx, in)
	if err != nil && !errors.Is(classify(err), objects.ErrBlobNotFound) {
		return fmt.Errorf("objectss3: delete s3://%s/%s: %w", s.bucketOf(ref), ref.Key, classify(err))
	}
	return nil
}

// maxPurge bounds the versions PurgeBlob deletes one after the other.
const maxPurge = 100

// PurgeBlob implements objects.Blobs: it asks for the current version
// (HeadObject) and deletes that very version, until none is current. A
// plain delete would leave the bytes behind a delete marker in a
// versioned bucket; a version older than the current one becomes current
// when the current one goes, and it goes too. It fails, rather than return
// with a current version left, after maxPurge versions.
func (s *Store) PurgeBlob(ctx context.Context, key string) error {
	for range maxPurge {
		out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		if errors.Is(classify(err), objects.ErrBlobNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("objectss3: purge s3://%s/%s: head: %w", s.bucket, key, classify(err))
		}
		if err := s.DeleteBlob(ctx, objects.BlobRef{Key: key, VersionID: aws.ToString(out.VersionId)}); err != nil {
			return fmt.Errorf("objectss3: purge: %w", err)
		}
	}
	return fmt.Errorf("objectss3: purge s3://%s/%s: still a current version after deleting %d", s.bucket, key, maxPurge)
}

// CopyBlob implements objects.Blobs with CopyObject (the bytes stay in
// S3; at most 5 GiB) to a key that must not exist (If-None-Match: *,
// where the server supports it: a server that ignores it copies the same
// bytes over). The copy keeps the source's SHA-256 as its metadata and
// asks S3 for a SHA-256 checksum of its own.
func (s *Store) CopyBlob(ctx context.Context, src objects.BlobRef, key string) error {
	source := s.bucketOf(src) + "/" + url.PathEscape(src.Key)
	source = strings.ReplaceAll(source, "%2F", "/")
	if src.VersionID != "" {
		source += "?versionId=" + url.QueryEscape(src.VersionID)
	}
	in := &s3.CopyObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), CopySource: aws.String(source),
		MetadataDirective: types.MetadataDirectiveReplace,
		Metadata:          map[string]string{MetaSHA256: src.SHA256.String(), MetaCodec: string(objects.Identity)},
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	}
	if src.ContentType != "" {
		in.ContentType = aws.String(src.ContentType)
	}
	if !s.unconditional.Load() {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.api.CopyObject(ctx, in)
	if err != nil && in.IfNoneMatch != nil && awserr.Code(err) == "NotImplemented" {
		s.unconditional.Store(true)
		in.IfNoneMatch = nil
		_, err = s.api.CopyObject(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("objectss3: copy s3://%s/%s to %s: %w", s.bucketOf(src), src.Key, key, classify(err))
	}
	return nil
}

// Info is what HeadObject tells about a blob.
type Info struct {
	objects.BlobInfo
	VersionID   string
	ContentType string
	// SHA256 is S3's full-object checksum if it has one, else the sha256
	// metadata; zero if neither is there (a presigned upload that sent none).
	SHA256    objects.Sum
	ObjectKey string // from the metadata, unescaped
	WriteID   string
	Codec     objects.Codec
}

// Head returns a blob's size, version and metadata; ErrBlobNotFound if it
// is missing. versionID may be "" (the current version).
func (s *Store) Head(ctx context.Context, key, versionID string) (Info, error) {
	in := &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled}
	if versionID != "" {
		in.VersionId = aws.String(versionID)
	}
	out, err := s.api.HeadObject(ctx, in)
	if err != nil {
		return Info{}, fmt.Errorf("objectss3: head s3://%s/%s: %w", s.bucket, key, classify(err))
	}
	info := Info{
		BlobInfo:    objects.BlobInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)},
		VersionID:   aws.ToString(out.VersionId),
		ContentType: aws.ToString(out.ContentType),
		WriteID:     out.Metadata[MetaWriteID],
		Codec:       objects.Codec(out.Metadata[MetaCodec]),
	}
	if k, err := url.PathUnescape(out.Metadata[MetaObjectKey]); err == nil {
		info.ObjectKey = k
	}
	if c := aws.ToString(out.ChecksumSHA256); c != "" && !strings.Contains(c, "-") {
		info.SHA256, _ = sumFromBase64(c)
	} else if h := out.Metadata[MetaSHA256]; h != "" {
		info.SHA256, _ = objects.ParseSum(h)
	}
	return info, nil
}

// List returns the blobs under prefix (current versions), a page at a time
// of pageSize keys (0: S3's default of 1,000). It stops at the first error,
// which it yields.
func (s *Store) List(ctx context.Context, prefix string, pageSize int32) iter.Seq2[objects.BlobInfo, error] {
	return func(yield func(objects.BlobInfo, error) bool) {
		in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
		if pageSize > 0 {
			in.MaxKeys = aws.Int32(pageSize)
		}
		p := s3.NewListObjectsV2Paginator(s.api, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				yield(objects.BlobInfo{}, fmt.Errorf("objectss3: list s3://%s/%s: %w", s.bucket, prefix, classify(err)))
				return
			}
			for _, o := range page.Contents {
				b := objects.BlobInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)}
				if !yield(b, nil) {
					return
				}
			}
		}
	}
}

// MaxPresignTTL is the longest a SigV4 presigned URL may live.
const MaxPresignTTL = 7 * 24 * time.Hour

// Presigned is a request a client can make without credentials: the method,
// the URL, and the headers it must send as they are (they are signed).
type Presigned struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"`
	Header  http.Header `json:"headers,omitempty"`
	Expires time.Time   `json:"expiresAt"`
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxPresignTTL {
		return fmt.Errorf("objectss3: presign: ttl %s: want more than 0 and at most %s", ttl, MaxPresignTTL)
	}
	return nil
}

func presigned(r *v4.PresignedHTTPRequest, expires time.Time) Presigned {
	h := http.Header{}
	for k, v := range r.SignedHeader {
		if strings.EqualFold(k, "host") { // the client sends the URL's host itself
			continue
		}
		h[http.CanonicalHeaderKey(k)] = v
	}
	return Presigned{Method: r.Method, URL: r.URL, Header: h, Expires: expires}
}

// PresignGet returns a download URL for the referenced version, valid for
// ttl, that answers with the reference's content type.
func (s *Store) PresignGet(ctx context.Context, ref objects.BlobRef, ttl time.Duration) (Presigned, error) {
	if s.presign == nil {
		return Presigned{}, errors.New("objectss3: presign: no presigner")
	}
	if err := checkTTL(ttl); err != nil {
		return Presigned{}, err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucketOf(ref)), Key: aws.String(ref.Key)}
	if ref.VersionID != "" {
		in.VersionId = aws.String(ref.VersionID)
	}
	if ref.ContentType != "" {
		in.ResponseContentType = aws.String(ref.ContentType)
	}
	now := time.Now()
	r, err := s.presign.PresignGetObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return Presigned{}, fmt.Errorf("objectss3: presign get s3://%s/%s: %w", s.bucketOf(ref), ref.Key, err)
	}
	return presigned(r, now.Add(ttl)), nil
}

// Upload describes a presigned single-request upload.
type Upload struct {
	Key         string
	ContentType string
	Size        int64       // signed: S3 refuses a body of another length
	SHA256      objects.Sum // if set, signed: S3 refuses a body with another digest
	TTL         time.Duration
}

// PresignPut returns an upload URL for one PUT of up to 5 GB to u.Key,
// which must not exist yet (If-None-Match: * is signed, where supported).
// The signed headers must be sent as returned.
func (s *Store) PresignPut(ctx context.Context, u Upload) (Presigned, error) {
	if s.presign == nil {
		return Presigned{}, errors.New("objectss3: presign: no presigner")
	}
	if err := checkTTL(u.TTL); err != nil {
		return Presigned{}, err
	}
	if u.Size < 0 || u.Size > 5<<30 {
		return Presigned{}, fmt.Errorf("objectss3: presign put: size %d: a single PUT takes 0 to 5 GiB", u.Size)
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(u.Key), ContentLength: aws.Int64(u.Size)}
	if u.ContentType != "" {
		in.ContentType = aws.String(u.ContentType)
	}
	if !u.SHA256.IsZero() {
		in.ChecksumSHA256 = aws.String(u.SHA256.Base64())
		in.Metadata = map[string]string{MetaSHA256: u.SHA256.String()}
	}
	if !s.unconditional.Load() {
		in.IfNoneMatch = aws.String("*")
	}
	now := time.Now()
	r, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(u.TTL))
	if err != nil {
		return Presigned{}, fmt.Errorf("objectss3: presign put s3://%s/%s: %w", s.bucket, u.Key, err)
	}
	return presigned(r, now.Add(u.TTL)), nil
}

func sumFromBase64(b64 string) (objects.Sum, error) {
	var s objects.Sum
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != len(s) {
		return s, fmt.Errorf("objectss3: checksum %q is not a SHA-256", b64)
	}
	copy(s[:], raw)
	return s, nil
}
