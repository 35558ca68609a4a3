package objectss3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

var seq atomic.Int64

// newStore creates a versioned bucket of its own on the local S3 server.
func newStore(t *testing.T) (*objectss3.Store, *s3.Client) {
	t.Helper()
	st := stacktest.Need(t)
	c := s3.NewFromConfig(stacktest.Config(t, st, nil), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("blobs-%d-%d", time.Now().UnixNano()%1e8, seq.Add(1))
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	return objectss3.FromClient(c, bucket), c
}

func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func blob(objectKey string, body []byte) objects.Blob {
	id := objects.RandomID()
	return objects.Blob{
		Key: objects.BlobKey(objectKey, id), Body: body, SHA256: objects.SumOf(body),
		ContentType: "application/octet-stream", Codec: objects.Identity, ObjectKey: objectKey, WriteID: id,
	}
}

func mustPut(t *testing.T, s *objectss3.Store, b objects.Blob) objects.BlobRef {
	t.Helper()
	ref, err := s.PutBlob(context.Background(), b)
	if err != nil {
		t.Fatalf("PutBlob %s: %v", b.Key, err)
	}
	return ref
}

func read(s *objectss3.Store, ref objects.BlobRef) ([]byte, error) {
	rc, err := s.GetBlob(context.Background(), ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestPutGetHead(t *testing.T) {
	s, _ := newStore(t)
	tests := []struct {
		name, objectKey, contentType string
		body                         []byte
	}{
		{"empty", "empty", "", nil},
		{"one byte", "a", "text/plain", []byte("x")},
		{"64 KB", "docs/report.bin", "application/octet-stream", random(64<<10, 1)},
		{"5 MB", "big", "application/octet-stream", random(5<<20, 2)},
		{"unicode object key", "relatórios/ação-документ", "application/json", []byte(`{"ok":true}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := blob(tt.objectKey, tt.body)
			b.ContentType = tt.contentType
			ref := mustPut(t, s, b)
			if ref.Bucket != s.Bucket() || ref.Key != b.Key || ref.Size != int64(len(tt.body)) || ref.SHA256 != b.SHA256 || ref.ContentType != tt.contentType || ref.Codec != objects.Identity {
				t.Errorf("ref %+v does not describe the blob", ref)
			}
			if ref.VersionID == "" {
				t.Error("no version id from a versioned bucket")
			}
			got, err := read(s, ref)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.body) {
				t.Errorf("read %d bytes, want the %d written", len(got), len(tt.body))
			}
			info, err := s.Head(context.Background(), b.Key, ref.VersionID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != ref.Size || info.VersionID != ref.VersionID || info.SHA256 != b.SHA256 || info.ObjectKey != tt.objectKey || info.WriteID != b.WriteID || info.Codec != objects.Identity {
				t.Errorf("Head = %+v, want size %d version %s sha %s object %q write %s", info, ref.Size, ref.VersionID, b.SHA256, tt.objectKey, b.WriteID)
			}
			if tt.contentType != "" && info.ContentType != tt.contentType {
				t.Errorf("content type %q, want %q", info.ContentType, tt.contentType)
			}
			if info.LastModified.IsZero() {
				t.Error("no LastModified")
			}
		})
	}
}

// A blob key is written once: If-None-Match: * refuses a second write, and
// the first blob stays as it was.
func TestPutIsWriteOnce(t *testing.T) {
	s, _ := newStore(t)
	first := blob("k", []byte("first"))
	ref := mustPut(t, s, first)
	second := first
	second.Body, second.SHA256 = []byte("second"), objects.SumOf([]byte("second"))
	if _, err := s.PutBlob(context.Background(), second); !errors.Is(err, objects.ErrBlobExists) {
		t.Fatalf("second put: got %v, want ErrBlobExists", err)
	}
	if got, err := read(s, ref); err != nil || string(got) != "first" {
		t.Errorf("after the refused write: %q, %v; want the first blob", got, err)
	}
}

// S3 checks the SHA-256 sent with the body: a body damaged on the way is
// refused, and nothing is stored.
func TestPutRefusesBadDigest(t *testing.T) {
	s, _ := newStore(t)
	b := blob("k", []byte("the body"))
	b.SHA256 = objects.SumOf([]byte("another body"))
	_, err := s.PutBlob(context.Background(), b)
	if !errors.Is(err, objects.ErrChecksum) || !errors.Is(err, objects.ErrNotApplied) {
		t.Fatalf("got %v, want ErrChecksum and ErrNotApplied", err)
	}
	if _, err := s.Head(context.Background(), b.Key, ""); !errors.Is(err, objects.ErrBlobNotFound) {
		t.Errorf("Head after the refused put: %v, want ErrBlobNotFound", err)
	}
}

// Reads are verified: a reference whose size or digest differs from the
// stored bytes never yields them as good data.
func TestGetVerifies(t *testing.T) {
	s, _ := newStore(t)
	body := random(100<<10, 3)
	ref := mustPut(t, s, blob("k", body))
	tests := []struct {
		name   string
		mutate func(r *objects.BlobRef)
		want   error
	}{
		{"good", func(*objects.BlobRef) {}, nil},
		{"wrong digest", func(r *objects.BlobRef) { r.SHA256[5] ^= 1 }, objects.ErrChecksum},
		{"wrong size", func(r *objects.BlobRef) { r.Size-- }, objects.ErrChecksum},
		{"missing key", func(r *objects.BlobRef) { r.Key += "-nope"; r.VersionID = "" }, objects.ErrBlobNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ref
			tt.mutate(&r)
			got, err := read(s, r)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if tt.want == nil && !bytes.Equal(got, body) {
				t.Error("bytes differ")
			}
		})
	}
}

// DeleteBlob with a version id removes that version for good: no delete
// marker, no noncurrent copy. Deleting what is not there is no error.
func TestDeleteBlob(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	ref := mustPut(t, s, blob("k", []byte("bye")))
	if err := s.DeleteBlob(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := read(s, ref); !errors.Is(err, objects.ErrBlobNotFound) {
		t.Errorf("read after delete: %v, want ErrBlobNotFound", err)
	}
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(s.Bucket()), Prefix: aws.String(ref.Key)})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs.Versions)+len(vs.DeleteMarkers) != 0 {
		t.Errorf("left %d versions and %d delete markers, want none", len(vs.Versions), len(vs.DeleteMarkers))
	}
	for _, r := range []objects.BlobRef{ref, {Key: "never-written"}} {
		if err := s.DeleteBlob(ctx, r); err != nil {
			t.Errorf("delete of a missing blob %s: %v", r.Key, err)
		}
	}
}

// A reference names a version: an older version of a key stays readable by
// its id after the key is overwritten (by a client other than the store,
// which never overwrites).
func TestGetByVersion(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	key := "blobs/versioned"
	put := func(body string) string {
		out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket()), Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.VersionId)
	}
	v1, v2 := put("one"), put("two")
	for v, want := range map[string]string{v1: "one", v2: "two"} {
		ref := objects.BlobRef{Key: key, VersionID: v, Size: 3, SHA256: objects.SumOf([]byte(want))}
		if got, err := read(s, ref); err != nil || string(got) != want {
			t.Errorf("version %s: %q, %v; want %q", v, got, err, want)
		}
	}
	if err := s.DeleteBlob(ctx, objects.BlobRef{Key: key, VersionID: v1}); err != nil {
		t.Fatal(err)
	}
	if _, err := read(s, objects.BlobRef{Key: key, VersionID: v1, Size: 3, SHA256: objects.SumOf([]byte("one"))}); !errors.Is(err, objects.ErrBlobNotFound) {
		t.Errorf("deleted version: %v, want ErrBlobNotFound", err)
	}
	if got, err := read(s, objects.BlobRef{Key: key, VersionID: v2, Size: 3, SHA256: objects.SumOf([]byte("two"))}); err != nil || string(got) != "two" {
		t.Errorf("the other version: %q, %v", got, err)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	var want []string
	for i := range 7 {
		ref := mustPut(t, s, blob(fmt.Sprint("doc", i), []byte{byte(i)}))
		want = append(want, ref.Key)
	}
	for _, k := range []string{"uploads/a", "uploads/b"} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket()), Key: aws.String(k), Body: strings.NewReader("u")}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for b, err := range s.List(ctx, objects.BlobPrefix, 2) { // four pages
		if err != nil {
			t.Fatal(err)
		}
		if b.Size != 1 || b.LastModified.IsZero() {
			t.Errorf("%s: size %d, modified %v", b.Key, b.Size, b.LastModified)
		}
		got = append(got, b.Key)
	}
	if fmt.Sprint(got) != fmt.Sprint(sorted(want)) {
		t.Errorf("listed %v, want %v", got, sorted(want))
	}
	n := 0
	for range s.List(ctx, "", 3) {
		n++
		if n == 4 {
			break // stopping early is allowed
		}
	}
	if n != 4 {
		t.Errorf("early stop: %d", n)
	}
	missing := objectss3.FromClient(c, "no-such-bucket-"+fmt.Sprint(seq.Add(1)))
	for _, err := range missing.List(ctx, "", 0) {
		if err == nil {
			t.Error("listing a missing bucket yields no error")
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// A presigned upload works with the signed headers and nothing else; it
// writes once, and only the declared bytes. A presigned download returns
// the bytes with the reference's content type.
func TestPresign(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	// Under versitygw's 256 KiB drain limit: when it refuses an upload
	// from its headers (the 412 below) it reads and discards that much of
	// the body, then closes the connection, and a larger body in flight
	// fails as a broken pipe instead of the refusal.
	body := random(200<<10, 4)
	up, err := s.PresignPut(ctx, objectss3.Upload{Key: "uploads/u1", ContentType: "image/png", Size: int64(len(body)), SHA256: objects.SumOf(body), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if up.Method != http.MethodPut || up.Expires.Before(time.Now()) {
		t.Errorf("presigned %s expiring %v", up.Method, up.Expires)
	}
	send := func(p objectss3.Presigned, body []byte) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range p.Header {
			req.Header[k] = v
		}
		req.ContentLength = int64(len(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	tampered := bytes.Clone(body)
	tampered[100] ^= 1
	if resp := send(up, tampered); resp.StatusCode < 400 || resp.StatusCode == http.StatusForbidden {
		t.Errorf("upload of other bytes: %s, want a 4xx", resp.Status)
	}
	if resp := send(up, body); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %s", resp.Status)
	}
	if resp := send(up, body); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("second upload to the same key: %s, want 412", resp.Status)
	}
	info, err := s.Head(ctx, "uploads/u1", "")
	if err != nil {
		t.Fatal(err)
	}
	if info.SHA256 != objects.SumOf(body) || info.Size != int64(len(body)) || info.ContentType != "image/png" {
		t.Errorf("uploaded %+v", info)
	}

	ref := objects.BlobRef{Key: "uploads/u1", VersionID: info.VersionID, Size: info.Size, SHA256: info.SHA256, ContentType: "image/png"}
	down, err := s.PresignGet(ctx, ref, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(down.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("download: %s, %d bytes, %s", resp.Status, len(got), resp.Header.Get("Content-Type"))
	}

	for _, ttl := range []time.Duration{0, -time.Second, 8 * 24 * time.Hour} {
		if _, err := s.PresignGet(ctx, ref, ttl); err == nil {
			t.Errorf("PresignGet with ttl %s: no error", ttl)
		}
	}
}

// The domain's Store over the real bucket (and the in-memory table):
// round trips by size, and a commit that fails deletes its blob from S3.
func TestObjectsStoreOverS3(t *testing.T) {
	ctx := context.Background()
	blobs, c := newStore(t)
	table := objectstest.NewTable()
	store := &objects.Store{Items: table, Chunks: table, Blobs: blobs}
	for i, n := range []int{0, 1 << 10, 9 << 10, 100 << 10, 399 << 10, 5 << 20} {
		body := random(n, uint64(10+i))
		rec, err := store.Put(ctx, "docs/size", body, objects.PutOptions{})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := store.Get(ctx, "docs/size", rec.Version)
		if err != nil || !bytes.Equal(got.Body, body) {
			t.Errorf("%d bytes (%s): %v", n, rec.Kind, err)
		}
	}
	count := func() int {
		n := 0
		for _, err := range blobs.List(ctx, objects.BlobPrefix, 0) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	if got := count(); got != 3 { // 100 KB, 399 KB, 5 MB
		t.Errorf("%d blobs, want 3", got)
	}
	table.Before = func(op string) error {
		if op == objectstest.OpCommit {
			return fmt.Errorf("cancelled: %w", objects.ErrNotApplied)
		}
		return nil
	}
	if _, err := store.Put(ctx, "docs/size", random(50<<10, 99), objects.PutOptions{}); !errors.Is(err, objects.ErrNotApplied) {
		t.Fatalf("got %v, want the refused commit", err)
	}
	table.Before = nil
	if got := count(); got != 3 {
		t.Errorf("%d blobs after a refused commit, want 3 (its blob deleted)", got)
	}
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(blobs.Bucket())})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs.Versions) != 3 || len(vs.DeleteMarkers) != 0 {
		t.Errorf("%d versions and %d delete markers, want 3 and 0", len(vs.Versions), len(vs.DeleteMarkers))
	}
}
