package objectss3

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

var _ objects.SweepBucket = (*Bucket)(nil)

// Bucket lists and deletes every version of the objects bucket's blobs.
type Bucket struct {
	api  *s3.Client
	name string
	// PageSize is the keys of one listing page (0: S3's 1,000).
	PageSize int32
}

// NewBucket returns the objects bucket as the sweeper sees it.
func NewBucket(api *s3.Client, name string) *Bucket { return &Bucket{api: api, name: name} }

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// Versions lists every version under prefix, a page at a time
// (ListObjectVersions). It stops at the first error, which it yields. Two
// habits of S3-compatible servers stay here, behind the adapter: a version
// the previous page already held is left out (versitygw repeats the last
// version of a page at the start of the next), and a page is yielded only
// once the next one has been listed, so the caller may delete what a page
// holds at once (the listing's marker is the page's last key, and
// versitygw loses its place when the marker's key is gone).
func (b *Bucket) Versions(ctx context.Context, prefix string) iter.Seq2[[]objects.BlobVersion, error] {
	return func(yield func([]objects.BlobVersion, error) bool) {
		in := &s3.ListObjectVersionsInput{Bucket: aws.String(b.name), Prefix: aws.String(prefix)}
		if b.PageSize > 0 {
			in.MaxKeys = aws.Int32(b.PageSize)
		}
		p := s3.NewListObjectVersionsPaginator(b.api, in)
		var held []objects.BlobVersion // listed, yielded once the next page is
		listed := false
		prev := map[[2]string]bool{}
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				if listed && !yield(held, nil) {
					return
				}
				yield(nil, fmt.Errorf("objectss3: list versions of s3://%s/%s: %w", b.name, prefix, err))
				return
			}
			vs := make([]objects.BlobVersion, 0, len(page.Versions)+len(page.DeleteMarkers))
			for _, v := range page.Versions {
				vs = append(vs, objects.BlobVersion{
					BlobInfo:  objects.BlobInfo{Key: aws.ToString(v.Key), Size: aws.ToInt64(v.Size), LastModified: aws.ToTime(v.LastModified)},
					VersionID: aws.ToString(v.VersionId), Latest: aws.ToBool(v.IsLatest),
				})
			}
			for _, m := range page.DeleteMarkers {
				vs = append(vs, objects.BlobVersion{
					BlobInfo:  objects.BlobInfo{Key: aws.ToString(m.Key), LastModified: aws.ToTime(m.LastModified)},
					VersionID: aws.ToString(m.VersionId), Latest: aws.ToBool(m.IsLatest), DeleteMarker: true,
				})
			}
			vs = slices.DeleteFunc(vs, func(v objects.BlobVersion) bool { return prev[[2]string{v.Key, v.VersionID}] })
			clear(prev)
			for _, v := range vs {
				prev[[2]string{v.Key, v.VersionID}] = true
			}
			if listed && !yield(held, nil) {
				return
			}
			held, listed = vs, true
		}
		if listed {
			yield(held, nil)
		}
	}
}

// maxDeleteObjects is S3's limit of keys per DeleteObjects request.
const maxDeleteObjects = 1000

// DeleteError is a version S3 would not delete.
type DeleteError struct {
	Version objects.BlobVersion
	Code    string
	Message string
}

func (e *DeleteError) Error() string {
	return fmt.Sprintf("objectss3: delete %s (version %s): %s: %s", e.Version.Key, e.Version.VersionID, e.Code, e.Message)
}

// Delete deletes the versions for good (DeleteObjects naming each version,
// up to 1,000 a request). It returns the versions deleted; the error joins
// a *DeleteError for each version S3 refused and any failed request. A
// version already gone counts as deleted.
func (b *Bucket) Delete(ctx context.Context, vs []objects.BlobVersion) (deleted []objects.BlobVersion, err error) {
	var errs []error
	for lo := 0; lo < len(vs); lo += maxDeleteObjects {
		batch := vs[lo:min(lo+maxDeleteObjects, len(vs))]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, v := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(v.Key)}
			if v.VersionID != "" {
				ids[i].VersionId = aws.String(v.VersionID)
			}
		}
		out, err := b.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(b.name),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("objectss3: delete %d versions from s3://%s: %w", len(batch), b.name, err))
			continue
		}
		failed := map[[2]string]types.Error{}
		for _, e := range out.Errors {
			if versionGone(aws.ToString(e.Code)) {
				continue
			}
			failed[[2]string{aws.ToString(e.Key), aws.ToString(e.VersionId)}] = e
		}
		for _, v := range batch {
			if e, ok := failed[[2]string{v.Key, v.VersionID}]; ok {
				errs = append(errs, &DeleteError{Version: v, Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)})
				continue
			}
			deleted = append(deleted, v)
		}
	}
	return deleted, errors.Join(errs...)
}

func versionGone(code string) bool {
	return code == "NoSuchKey" || code == "NoSuchVersion" || code == "NotFound"
}
