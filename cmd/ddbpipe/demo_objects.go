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
	"github.com/ddbpipe/ddbpipe/shared/objects/bodies"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/search/searchddb"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// demoObjects drives the large-object store through its HTTP API: a small
// and a big document, an update with If-Match and a stale one, a presigned
// multipart upload, a refused key, a delete whose blob the reaper removes,
// searches of the index the stream keeps; then it checks that no reference
// dangles and no blob is orphaned.
func demoObjects(ctx context.Context, env *stack.Env, w io.Writer) error {
	// Signed as a caller with ApiInvokePolicy, as `ddbpipe objects put` is.
	c, err := objectsclient.NewSigned(env.Vars["API_URL"], env.AWSAs(asAPIInvoke), nil)
	if err != nil {
		return err
	}
	run := time.Now().Format("150405")
	d := &objectsDemo{env: env, c: c, w: w,
		small: fmt.Sprintf("demo/%s/notes.txt", run), big: fmt.Sprintf("demo/%s/photo.bin", run),
		copyKey: fmt.Sprintf("demo/%s/photo-copy.bin", run), uploadKey: fmt.Sprintf("demo/%s/photo-upload.bin", run),
		video: fmt.Sprintf("demo/%s/video.bin", run), photo: bodies.Random(300<<10, 7)}
	return d.run(ctx)
}

// run takes the demo's steps in their order, stopping at the first that
// fails.
func (d *objectsDemo) run(ctx context.Context) error {
	if err := d.put(ctx); err != nil {
		return err
	}
	if err := d.storeOnce(ctx); err != nil {
		return err
	}
	if err := d.update(ctx); err != nil {
		return err
	}
	if err := d.upload(ctx); err != nil {
		return err
	}
	if err := d.refuseNUL(ctx); err != nil {
		return err
	}
	if err := d.deletePhoto(ctx); err != nil {
		return err
	}
	if err := d.search(ctx); err != nil {
		return err
	}
	return d.check(ctx)
}

// objectsDemo is demoObjects' state: its client and the keys it writes.
type objectsDemo struct {
	env                                   *stack.Env
	c                                     *objectsclient.Client
	w                                     io.Writer
	small, big, copyKey, uploadKey, video string
	photo                                 []byte
}

// put stores a small text and a big random body, each where its size
// puts it.
func (d *objectsDemo) put(ctx context.Context) error {
	m, err := d.c.Put(ctx, d.small, bodies.Text(4<<10), objectsclient.PutOptions{ContentType: "text/plain; charset=utf-8", CreateOnly: true})
	if err != nil {
		return fmt.Errorf("put %s: %w", d.small, err)
	}
	fmt.Fprintf(d.w, "PUT /objects/%s (4 KB of text)     → v%d, stored %s\n", d.small, m.Version, placement(m))
	m, err = d.c.Put(ctx, d.big, d.photo, objectsclient.PutOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("put %s: %w", d.big, err)
	}
	fmt.Fprintf(d.w, "PUT /objects/%s (300 KB random)    → v%d, stored %s\n", d.big, m.Version, placement(m))
	return nil
}

// storeOnce puts the same bytes under two more keys, by a PUT and by a
// presigned upload: both reference the blob the first PUT stored.
func (d *objectsDemo) storeOnce(ctx context.Context) error {
	if _, err := d.c.Put(ctx, d.copyKey, d.photo, objectsclient.PutOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("put %s: %w", d.copyKey, err)
	}
	if _, err := d.c.Upload(ctx, d.uploadKey, bytes.NewReader(d.photo), int64(len(d.photo)), objectsclient.UploadOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("upload %s: %w", d.uploadKey, err)
	}
	blob := objects.ContentKey(objects.SumOf(d.photo), int64(len(d.photo)))
	stored, err := d.env.Clients.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(d.env.Vars["OBJECTS_BUCKET_NAME"]), Prefix: aws.String(blob)})
	if err != nil {
		return fmt.Errorf("list %s: %w", blob, err)
	}
	fmt.Fprintf(d.w, "the same 300 KB PUT under %s and uploaded to %s → stored %d time(s) in S3 (%s)\n",
		path.Base(d.copyKey), path.Base(d.uploadKey), len(stored.Versions), blob[:len(objects.BlobPrefix)+12]+"…")
	return nil
}

// update writes a second version with If-Match, then a stale edit that
// is refused.
func (d *objectsDemo) update(ctx context.Context) error {
	one := int64(1)
	m, err := d.c.Put(ctx, d.small, []byte("second draft\n"), objectsclient.PutOptions{ContentType: "text/plain", IfMatch: &one})
	if err != nil {
		return fmt.Errorf("update %s: %w", d.small, err)
	}
	fmt.Fprintf(d.w, "PUT with If-Match: \"1\"                        → v%d, stored %s\n", m.Version, placement(m))
	_, err = d.c.Put(ctx, d.small, []byte("a stale edit\n"), objectsclient.PutOptions{ContentType: "text/plain", IfMatch: &one})
	cur, conflict := objectsclient.IsConflict(err)
	if !conflict {
		return fmt.Errorf("demo: a stale If-Match was not refused with 409: %v", err)
	}
	fmt.Fprintf(d.w, "PUT with a stale If-Match: \"1\"                → 409 conflict, current version %d\n", cur)
	vs, err := d.c.Versions(ctx, d.small)
	if err != nil {
		return fmt.Errorf("versions of %s: %w", d.small, err)
	}
	fmt.Fprintf(d.w, "GET /objects/%s?versions → %d versions\n", d.small, len(vs))
	return nil
}

// upload sends 20 MB by a presigned multipart upload and reads it back.
func (d *objectsDemo) upload(ctx context.Context) error {
	body := bodies.Random(20<<20, 9)
	start := time.Now()
	st, err := d.c.Upload(ctx, d.video, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{ContentType: "video/mp4"})
	if err != nil {
		return fmt.Errorf("upload %s: %w", d.video, err)
	}
	got, err := d.c.Get(ctx, d.video, 0)
	if err != nil {
		return fmt.Errorf("get %s: %w", d.video, err)
	}
	if !bytes.Equal(got.Body, body) {
		return fmt.Errorf("demo: %s read back differs from what was uploaded", d.video)
	}
	fmt.Fprintf(d.w, "presigned upload of 20 MB to %s → %s v%d in %s; GET follows a presigned download, SHA-256 verified\n",
		d.video, st.State, st.Version, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// refuseNUL: S3 takes any UTF-8 key but NUL, so a key with one cannot
// round-trip and the API refuses it.
func (d *objectsDemo) refuseNUL(ctx context.Context) error {
	_, err := d.c.Put(ctx, "demo/nul\x00key", []byte("x"), objectsclient.PutOptions{})
	var apiErr *apigw.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("demo: a key with a NUL byte was not refused: %v", err)
	}
	fmt.Fprintf(d.w, "PUT /objects/demo/nul%%00key                     → %d %s\n", apiErr.Status, apiErr.ErrorBody.Error)
	return nil
}

// deletePhoto deletes the three keys of the shared blob.
func (d *objectsDemo) deletePhoto(ctx context.Context) error {
	for _, k := range []string{d.big, d.copyKey, d.uploadKey} {
		if _, err := d.c.Delete(ctx, k, nil); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	fmt.Fprintf(d.w, "DELETE the three keys of the photo → references go first; the reaper (the table's stream) frees the blob once none names it\n")
	return nil
}

// search finds the note by a word of its second version once the indexer
// has followed the update, checks a fresh search drops the deleted photos,
// and compares the index with the table.
func (d *objectsDemo) search(ctx context.Context) error {
	prefix := path.Dir(d.small) + "/"
	var r objectsclient.SearchResult
	err := pollUntil(ctx, time.Minute, func(bool) (bool, error) {
		var err error
		r, err = d.c.Search(ctx, "draft", objectsclient.SearchOptions{Prefix: prefix})
		return len(r.Hits) == 1 && r.Hits[0].Version == 2, err
	})
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if len(r.Hits) != 1 || r.Hits[0].Version != 2 {
		return fmt.Errorf("demo: the search index did not follow the update of %s within a minute: %+v", d.small, r.Hits)
	}
	hit := r.Hits[0]
	fmt.Fprintf(d.w, "GET /objects?search=draft → %s v%d (%s, %q): the indexer followed the update through the table's stream\n",
		path.Base(hit.Key), hit.Version, hit.ContentType, hit.Snippet)
	fresh, err := d.c.Search(ctx, "", objectsclient.SearchOptions{Prefix: prefix, ContentType: "application/octet-stream", Fresh: true})
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if len(fresh.Hits) != 0 {
		return fmt.Errorf("demo: a fresh search found deleted photos: %+v", fresh.Hits)
	}
	fmt.Fprintf(d.w, "GET /objects?search=&type=application/octet-stream&fresh=true → 0 hits: the deleted photos are never shown (%d left out as deleted since indexed)\n", fresh.Dropped)
	engine, err := searchos.FromAWS(d.env.AWS, "", d.env.Vars["SEARCH_INDEX_NAME"])
	if err != nil {
		return err
	}
	table := searchddb.New(d.env.Clients.DynamoDB, d.env.Vars["OBJECTS_TABLE_NAME"])
	drift, err := verifyUntil(ctx, searchStack{engine: engine, table: table}, time.Minute)
	switch {
	case err != nil:
		return fmt.Errorf("search verify: %w", err)
	case !drift.None():
		return fmt.Errorf("demo: the search index drifts from the table: %+v", drift)
	}
	fmt.Fprintf(d.w, "search verify: the index equals the table, %d live keys at their versions\n", drift.TableKeys)
	return nil
}

// check waits, up to a minute, for the invariant once the reaper has
// caught up: no reference names a missing payload and no payload lacks a
// reference.
func (d *objectsDemo) check(ctx context.Context) error {
	refs := objectsddb.NewRefs(d.env.Clients.DynamoDB, d.env.Vars["OBJECTS_TABLE_NAME"])
	bucket := objectss3.NewBucket(d.env.Clients.S3, d.env.Vars["OBJECTS_BUCKET_NAME"])
	deadline := time.Now().Add(60 * time.Second)
	for {
		rep, err := objects.Check(ctx, refs, bucket)
		if err != nil {
			return fmt.Errorf("check objects: %w", err)
		}
		if rep.Err() == nil {
			fmt.Fprintf(d.w, "checked the objects table and bucket: no dangling reference, no orphan blob\n")
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
