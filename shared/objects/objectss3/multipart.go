package objectss3

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

var _ objects.Transfers = (*Transfers)(nil)

// Transfers are the presigned uploads of the objects domain
// (objects.Transfers): single PUTs through the Store's presigner, and
// multipart uploads whose parts the client sends with presigned URLs and
// which the server creates, completes and aborts.
type Transfers struct {
	store   *Store
	api     *s3.Client
	presign *s3.PresignClient
}

// TransfersFromClient returns transfers to the store's bucket that use the
// client and presign with its configuration.
func TransfersFromClient(c *s3.Client, store *Store) *Transfers {
	return &Transfers{store: store, api: c, presign: s3.NewPresignClient(c)}
}

func ttlUntil(expires time.Time) time.Duration { return time.Until(expires).Round(time.Second) }

// PresignUpload implements objects.Transfers with Store.PresignPut: the
// size and SHA-256 are signed, so S3 refuses other bytes.
func (t *Transfers) PresignUpload(ctx context.Context, blobKey string, size int64, sum objects.Sum, contentType string, expires time.Time) (objects.SignedRequest, error) {
	p, err := t.store.PresignPut(ctx, Upload{Key: blobKey, ContentType: contentType, Size: size, SHA256: sum, TTL: ttlUntil(expires)})
	if err != nil {
		return objects.SignedRequest{}, err
	}
	return objects.SignedRequest(p), nil
}

// CreateMultipart implements objects.Transfers. The document's SHA-256 is
// kept as metadata (S3 has no full-object SHA-256 for multipart uploads;
// the finalizer verifies by reading).
func (t *Transfers) CreateMultipart(ctx context.Context, blobKey, contentType string, sum objects.Sum) (string, error) {
	in := &s3.CreateMultipartUploadInput{
		Bucket: aws.String(t.store.bucket), Key: aws.String(blobKey),
		Metadata: map[string]string{MetaSHA256: sum.String(), MetaCodec: string(objects.Identity)},
	}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	out, err := t.api.CreateMultipartUpload(ctx, in)
	if err != nil {
		return "", fmt.Errorf("objectss3: create multipart upload s3://%s/%s: %w", t.store.bucket, blobKey, classify(err))
	}
	return aws.ToString(out.UploadId), nil
}

// PresignPart implements objects.Transfers: the part's length is signed.
func (t *Transfers) PresignPart(ctx context.Context, blobKey, multipartID string, part int32, size int64, expires time.Time) (objects.SignedRequest, error) {
	ttl := ttlUntil(expires)
	if err := checkTTL(ttl); err != nil {
		return objects.SignedRequest{}, err
	}
	in := &s3.UploadPartInput{
		Bucket: aws.String(t.store.bucket), Key: aws.String(blobKey), UploadId: aws.String(multipartID),
		PartNumber: aws.Int32(part), ContentLength: aws.Int64(size),
	}
	r, err := t.presign.PresignUploadPart(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return objects.SignedRequest{}, fmt.Errorf("objectss3: presign part %d of s3://%s/%s: %w", part, t.store.bucket, blobKey, err)
	}
	return objects.SignedRequest(presigned(r, expires)), nil
}

// CompleteMultipart implements objects.Transfers, with If-None-Match: *
// where the server supports it. Parts S3 does not accept (a wrong ETag, a
// part too small) are an *objects.InvalidError with ReasonBadParts; so is
// an upload id S3 does not know (NoSuchUpload), which also wraps
// objects.ErrMultipartGone: it was completed already, or aborted.
func (t *Transfers) CompleteMultipart(ctx context.Context, blobKey, multipartID string, parts []objects.Part) error {
	done := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		done[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(t.store.bucket), Key: aws.String(blobKey), UploadId: aws.String(multipartID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	}
	if !t.store.unconditional.Load() {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := t.api.CompleteMultipartUpload(ctx, in)
	if err != nil && in.IfNoneMatch != nil && awserr.Code(err) == "NotImplemented" {
		t.store.unconditional.Store(true)
		in.IfNoneMatch = nil
		_, err = t.api.CompleteMultipartUpload(ctx, in)
	}
	if err == nil {
		return nil
	}
	switch code := awserr.Code(err); code {
	case "InvalidPart", "InvalidPartOrder", "EntityTooSmall":
		return &objects.InvalidError{Reason: objects.ReasonBadParts, Detail: fmt.Sprintf("S3 refused the parts (%s)", code)}
	case "NoSuchUpload": // completed already, or aborted: the caller tells which
		return fmt.Errorf("%w: %w", objects.ErrMultipartGone,
			&objects.InvalidError{Reason: objects.ReasonBadParts, Detail: fmt.Sprintf("S3 refused the parts (%s)", code)})
	}
	return fmt.Errorf("objectss3: complete multipart upload s3://%s/%s: %w", t.store.bucket, blobKey, classify(err))
}

// AbortMultipart implements objects.Transfers; an upload already gone is
// no error.
func (t *Transfers) AbortMultipart(ctx context.Context, blobKey, multipartID string) error {
	_, err := t.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(t.store.bucket), Key: aws.String(blobKey), UploadId: aws.String(multipartID),
	})
	if err != nil && awserr.Code(err) != "NoSuchUpload" && !errors.Is(classify(err), objects.ErrBlobNotFound) {
		return fmt.Errorf("objectss3: abort multipart upload s3://%s/%s: %w", t.store.bucket, blobKey, classify(err))
	}
	return nil
}

// PresignGet is Store.PresignGet as the domain's SignedRequest.
func (t *Transfers) PresignGet(ctx context.Context, ref objects.BlobRef, ttl time.Duration) (objects.SignedRequest, error) {
	p, err := t.store.PresignGet(ctx, ref, ttl)
	return objects.SignedRequest(p), err
}
