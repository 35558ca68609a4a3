package objectslambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Finalizer commits uploaded objects; *objects.Uploader satisfies it.
type Finalizer interface {
	Finalize(ctx context.Context, o objects.Uploaded) (objects.Upload, error)
}

var _ Finalizer = (*objects.Uploader)(nil)

// Finalize handles the bucket's ObjectCreated events for uploads/.
type Finalize struct {
	Uploads Finalizer
	Metrics *emf.Writer // nil: no metrics
	Log     *slog.Logger
}

// Handle finalizes each uploaded object. Objects that are no upload (no
// intent) are logged and skipped: the sweeper removes them. Any other
// failure fails the invocation, so Lambda retries the event (finalizing is
// idempotent: a settled upload is left as it is).
func (f *Finalize) Handle(ctx context.Context, ev events.S3Event) error {
	var errs []error
	for _, r := range ev.Records {
		key := r.S3.Object.URLDecodedKey
		if key == "" {
			k, err := url.QueryUnescape(r.S3.Object.Key)
			if err != nil {
				f.Log.WarnContext(ctx, "object key does not decode; skipped", "key", r.S3.Object.Key)
				continue
			}
			key = k
		}
		o := objects.Uploaded{Bucket: r.S3.Bucket.Name, Key: key, VersionID: r.S3.Object.VersionID, Size: r.S3.Object.Size}
		up, err := f.Uploads.Finalize(ctx, o)
		switch {
		case errors.Is(err, objects.ErrNotFound):
			f.Log.WarnContext(ctx, "object without an upload intent; left for the sweeper", "bucket", o.Bucket, "key", key, "err", err)
		case err != nil:
			errs = append(errs, fmt.Errorf("finalize s3://%s/%s: %w", o.Bucket, key, err))
		default:
			f.outcome(ctx, up)
		}
	}
	return errors.Join(errs...)
}

// outcome logs and counts a settled upload.
func (f *Finalize) outcome(ctx context.Context, up objects.Upload) {
	var ms []emf.Metric
	switch {
	case up.State == objects.UploadCommitted && up.Unchanged:
		f.Log.InfoContext(ctx, "upload committed unchanged: the latest version holds the document", "key", up.Key, "upload", up.ID, "version", up.Version, "size", up.Size)
		ms = append(ms, emf.Metric{Name: "UploadsCommitted", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "WritesUnchanged", Unit: emf.Count, Value: 1})
	case up.State == objects.UploadCommitted && up.BlobShared:
		f.Log.InfoContext(ctx, "upload committed; its bytes are stored already, the upload is dropped", "key", up.Key, "upload", up.ID, "version", up.Version, "size", up.Size)
		ms = append(ms, emf.Metric{Name: "UploadsCommitted", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "PlacedS3", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "BytesOffloaded", Unit: emf.Bytes, Value: float64(up.Size)},
			emf.Metric{Name: "BlobUploadsSkipped", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "BlobBytesShared", Unit: emf.Bytes, Value: float64(up.Size)})
	case up.State == objects.UploadCommitted:
		f.Log.InfoContext(ctx, "upload committed", "key", up.Key, "upload", up.ID, "version", up.Version, "size", up.Size)
		ms = append(ms, emf.Metric{Name: "UploadsCommitted", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "PlacedS3", Unit: emf.Count, Value: 1},
			emf.Metric{Name: "BytesOffloaded", Unit: emf.Bytes, Value: float64(up.Size)})
	case up.State == objects.UploadFailed:
		f.Log.WarnContext(ctx, "upload failed", "key", up.Key, "upload", up.ID, "reason", up.Reason, "detail", up.Detail)
		ms = append(ms, emf.Metric{Name: "UploadsFailed", Unit: emf.Count, Value: 1})
		switch up.Reason {
		case objects.UploadFailedChecksum:
			ms = append(ms, emf.Metric{Name: "ChecksumFailures", Unit: emf.Count, Value: 1})
		case objects.UploadFailedConflict:
			ms = append(ms, emf.Metric{Name: "Conflicts", Unit: emf.Count, Value: 1})
		}
	}
	if f.Metrics != nil && len(ms) > 0 {
		if err := f.Metrics.Emit(ms, map[string]any{"uploadId": up.ID, "state": string(up.State), "reason": up.Reason}); err != nil {
			f.Log.WarnContext(ctx, "metrics not written", "err", err)
		}
	}
}
