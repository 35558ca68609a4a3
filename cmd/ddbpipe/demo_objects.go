package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/tools/bodies"
)

// demoObjects drives the large-object store through its HTTP API: a small
// and a big document, an update with If-Match and a stale one, a presigned
// multipart upload, a refused key, a delete whose blob the reaper removes;
// then it checks that no reference dangles and no blob is orphaned.
func demoObjects(ctx context.Context, env *stack.Env, w io.Writer) error {
	v := env.Vars
	// Signed as a caller with ApiInvokePolicy, as `ddbpipe objects put` is.
	c, err := objectsclient.NewSigned(v["API_URL"], env.AWSAs(asAPIInvoke), nil)
	if err != nil {
		return err
	}
	run := time.Now().Format("150405")
	note := objectsclient.PutOptions{ContentType: "text/plain; charset=utf-8", CreateOnly: true}

	small := fmt.Sprintf("demo/%s/notes.txt", run)
	m, err := c.Put(ctx, small, bodies.Text(4<<10), note)
	if err != nil {
		return fmt.Errorf("put %s: %w", small, err)
	}
	fmt.Fprintf(w, "PUT /objects/%s (4 KB of text)     → v%d, stored %s\n", small, m.Version, placement(m))

	big := fmt.Sprintf("demo/%s/photo.bin", run)
	photo := bodies.Random(300<<10, 7)
	m, err = c.Put(ctx, big, photo, objectsclient.PutOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("put %s: %w", big, err)
	}
	fmt.Fprintf(w, "PUT /objects/%s (300 KB random)    → v%d, stored %s\n", big, m.Version, placement(m))

	// The same bytes under two more keys, by a PUT and by a presigned
	// upload: both reference the blob the first PUT stored.
	copyKey, uploadKey := fmt.Sprintf("demo/%s/photo-copy.bin", run), fmt.Sprintf("demo/%s/photo-upload.bin", run)
	if _, err := c.Put(ctx, copyKey, photo, objectsclient.PutOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("put %s: %w", copyKey, err)
	}
	if _, err := c.Upload(ctx, uploadKey, bytes.NewReader(photo), int64(len(photo)), objectsclient.UploadOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("upload %s: %w", uploadKey, err)
	}
	blob := objects.ContentKey(objects.SumOf(photo), int64(len(photo)))
	stored, err := env.Clients.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(v["OBJECTS_BUCKET_NAME"]), Prefix: aws.String(blob)})
	if err != nil {
		return fmt.Errorf("list %s: %w", blob, err)
	}
	fmt.Fprintf(w, "the same 300 KB PUT under %s and uploaded to %s → stored %d time(s) in S3 (%s)\n",
		path.Base(copyKey), path.Base(uploadKey), len(stored.Versions), blob[:len(objects.BlobPrefix)+12]+"…")

	one := int64(1)
	m, err = c.Put(ctx, small, []byte("second draft\n"), objectsclient.PutOptions{ContentType: "text/plain", IfMatch: &one})
	if err != nil {
		return fmt.Errorf("update %s: %w", small, err)
	}
	fmt.Fprintf(w, "PUT with If-Match: \"1\"                        → v%d, stored %s\n", m.Version, placement(m))
	_, err = c.Put(ctx, small, []byte("a stale edit\n"), objectsclient.PutOptions{ContentType: "text/plain", IfMatch: &one})
	cur, conflict := objectsclient.IsConflict(err)
	if !conflict {
		return fmt.Errorf("demo: a stale If-Match was not refused with 409: %v", err)
	}
	fmt.Fprintf(w, "PUT with a stale If-Match: \"1\"                → 409 conflict, current version %d\n", cur)
	vs, err := c.Versions(ctx, small)
	if err != nil {
		return fmt.Errorf("versions of %s: %w", small, err)
	}
	fmt.Fprintf(w, "GET /objects/%s?versions → %d versions\n", small, len(vs))

	up := fmt.Sprintf("demo/%s/video.bin", run)
	body := bodies.Random(20<<20, 9)
	start := time.Now()
	st, err := c.Upload(ctx, up, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{ContentType: "video/mp4"})
	if err != nil {
		return fmt.Errorf("upload %s: %w", up, err)
	}
	got, err := c.Get(ctx, up, 0)
	if err != nil {
		return fmt.Errorf("get %s: %w", up, err)
	}
	if !bytes.Equal(got.Body, body) {
		return fmt.Errorf("demo: %s read back differs from what was uploaded", up)
	}
	fmt.Fprintf(w, "presigned upload of 20 MB to %s → %s v%d in %s; GET follows a presigned download, SHA-256 verified\n",
		up, st.State, st.Version, time.Since(start).Round(10*time.Millisecond))

	// S3 takes any UTF-8 key but NUL: a key with one cannot round-trip.
	_, err = c.Put(ctx, "demo/nul\x00key", []byte("x"), objectsclient.PutOptions{})
	var apiErr *objectsclient.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("demo: a key with a NUL byte was not refused: %v", err)
	}
	fmt.Fprintf(w, "PUT /objects/demo/nul%%00key                     → %d %s\n", apiErr.Status, apiErr.ErrorBody.Error)

	for _, k := range []string{big, copyKey, uploadKey} {
		if _, err := c.Delete(ctx, k, nil); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	fmt.Fprintf(w, "DELETE the three keys of the photo → references go first; the reaper (the table's stream) frees the blob once none names it\n")

	// The invariant: once the reaper has caught up, no reference names a
	// missing payload and no payload lacks a reference.
	refs := objectsddb.NewRefs(env.Clients.DynamoDB, v["OBJECTS_TABLE_NAME"])
	bucket := objectss3.NewBucket(env.Clients.S3, v["OBJECTS_BUCKET_NAME"])
	deadline := time.Now().Add(60 * time.Second)
	for {
		rep, err := objects.Check(ctx, refs, bucket)
		if err != nil {
			return fmt.Errorf("check objects: %w", err)
		}
		if rep.Err() == nil {
			fmt.Fprintf(w, "checked the objects table and bucket: no dangling reference, no orphan blob\n")
			return nil
		}
		if err := rep.DanglingErr(); err != nil || time.Now().After(deadline) {
			return fmt.Errorf("demo: objects invariant: %w", rep.Err())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func placement(m objectsclient.Meta) string {
	s := m.Kind
	if m.Codec != "" && m.Codec != "identity" {
		s += " (" + m.Codec + ")"
	}
	return strings.TrimSpace(s)
}
