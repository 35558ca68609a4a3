package objectslambda_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// signer grants URLs that are never used: the test uploads through the SDK.
type signer struct{}

var _ objects.Transfers = signer{}

func (signer) PresignUpload(_ context.Context, blobKey string, _ int64, _ objects.Sum, _ string, expires time.Time) (objects.SignedRequest, error) {
	return objects.SignedRequest{Method: "PUT", URL: "http://unused.invalid/" + blobKey, Expires: expires}, nil
}
func (signer) CreateMultipart(context.Context, string, string, objects.Sum) (string, error) {
	return "", errors.New("not in this test")
}
func (signer) PresignPart(context.Context, string, string, int32, int64, time.Time) (objects.SignedRequest, error) {
	return objects.SignedRequest{}, errors.New("not in this test")
}
func (signer) CompleteMultipart(context.Context, string, string, []objects.Part) error {
	return errors.New("not in this test")
}
func (signer) AbortMultipart(context.Context, string, string) error { return nil }

// An upload that lands after its deadline is refused by the stack's
// finalizer: it ends failed (expired), no version refers to it, and the
// object is deleted. The intent is granted by an uploader whose clock is an
// hour behind, so its deadline has passed when the bytes arrive.
func TestUploadAfterDeadlineFails(t *testing.T) {
	e, c := newClient(t)
	ctx := context.Background()
	table, bucket := e.Vars["OBJECTS_TABLE_NAME"], e.Vars["OBJECTS_BUCKET_NAME"]
	db := awsenv.DynamoDB(e.AWS)
	items := objectsddb.New(db, table)
	late := &objects.Uploader{
		Store:   &objects.Store{Items: items, Chunks: items},
		Uploads: objectsddb.NewUploads(db, table),
		Bucket:  signer{},
		Now:     func() time.Time { return time.Now().Add(-time.Hour) },
	}
	body := objectstest.Random(64*objectstest.KB, 11)
	key := "late/doc.bin"
	g, err := late.Begin(ctx, key, objects.UploadRequest{Size: int64(len(body)), SHA256: objects.SumOf(body), ContentType: "application/octet-stream"})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Upload.Deadline.Before(time.Now()) {
		t.Fatalf("deadline %s is not in the past", g.Upload.Deadline)
	}
	// Through the S3 proxy, which raises the ObjectCreated event.
	if _, err := e.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(g.Upload.BlobKey), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, key, g.Upload.ID)
	var ue *objectsclient.UploadError
	if !errors.As(err, &ue) || st.Reason != objects.UploadFailedExpired {
		t.Fatalf("got %+v %v, want failed with reason %s", st, err, objects.UploadFailedExpired)
	}
	if _, err := c.Versions(ctx, key); !objectsclient.IsNotFound(err) {
		t.Errorf("versions: %v, want not found (no reference)", err)
	}
	if _, err := e.Clients.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(g.Upload.BlobKey)}); err == nil {
		t.Error("the late upload is still in the bucket")
	}
}
