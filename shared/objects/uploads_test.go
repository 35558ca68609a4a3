package objects_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// The API's sub-resources are query parameters: their names are keys like
// any other.
func TestSubResourceNamesAreKeys(t *testing.T) {
	for _, k := range []string{"versions", "a/versions", "a/uploads", "uploads", "a/uploads/x", "a/uploads/x/complete", "a?versions", "a?uploadId=x"} {
		if err := objects.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q): %v, want valid", k, err)
		}
	}
}

func TestUploadKeyRoundTrip(t *testing.T) {
	k := objects.UploadKey("docs/a.txt", "0123abcd")
	if id, ok := objects.ParseUploadKey(k); !ok || id != "0123abcd" {
		t.Errorf("ParseUploadKey(%q) = %q %v", k, id, ok)
	}
	for _, bad := range []string{"blobs/0123/x", "uploads/xyz/1", "uploads/" + string(make([]byte, 32)) + "/1", "uploads/0123456789abcdef0123456789abcdef/UP", "uploads/docs/report.txt"} {
		if _, ok := objects.ParseUploadKey(bad); ok {
			t.Errorf("ParseUploadKey(%q) accepted", bad)
		}
	}
}

func TestPlanParts(t *testing.T) {
	tests := []struct {
		size     int64
		maxParts int
		partSize int64
		parts    int
	}{
		{50 << 20, 1000, 8 << 20, 7},
		{16 << 20, 1000, 8 << 20, 2},
		{1, 1000, 8 << 20, 1},
		{20 << 30, 1000, 21 << 20, 976}, // parts grow to stay under maxParts, in whole MiB
	}
	for _, tt := range tests {
		ps, n := objects.PlanParts(tt.size, objects.MinPartSize, tt.maxParts)
		if ps != tt.partSize || n != tt.parts {
			t.Errorf("PlanParts(%d) = %d×%d, want %d×%d", tt.size, n, ps, tt.parts, tt.partSize)
		}
	}
}

// CommitBlob verifies, commits once per write id, and deletes what it
// cannot commit.
func TestCommitBlob(t *testing.T) {
	ctx := context.Background()
	table, bucket := objectstest.NewTable(), objectstest.NewBucket("b")
	s := &objects.Store{Items: table, Chunks: table, Blobs: bucket}
	upload := func(key, id string, body []byte) objects.BlobRef {
		ref, err := bucket.PutBlob(ctx, objects.Blob{Key: objects.UploadKey(key, id), Body: body, SHA256: objects.SumOf(body)})
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	body := objectstest.Random(64<<10, 1)
	ref := upload("k", "w1", body)
	rec, err := s.CommitBlob(ctx, "k", ref, objects.CommitBlobOptions{WriteID: "w1", ContentType: "application/x-a"})
	if err != nil || rec.Version != 1 || rec.Kind != objects.InS3 || rec.Blob.Key != ref.Key {
		t.Fatalf("commit: %+v %v", rec, err)
	}
	again, err := s.CommitBlob(ctx, "k", ref, objects.CommitBlobOptions{WriteID: "w1"})
	if err != nil || again.Version != 1 {
		t.Errorf("second commit of the same write: v%d %v, want v1 and nothing new", again.Version, err)
	}
	if got, err := s.Get(ctx, "k", 0); err != nil || got.Version != 1 || string(got.Body) != string(body) {
		t.Errorf("get: v%d %v", got.Version, err)
	}

	// Declared digest differs from the bytes: refused and deleted.
	bad := upload("k", "w2", []byte("other"))
	bad.SHA256 = objects.SumOf([]byte("declared"))
	if _, err := s.CommitBlob(ctx, "k", bad, objects.CommitBlobOptions{WriteID: "w2"}); !errors.Is(err, objects.ErrChecksum) {
		t.Errorf("mismatch: %v, want ErrChecksum", err)
	}
	if bucket.Has(bad.Key) {
		t.Error("the mismatched upload is still in the bucket")
	}

	// Stale If-Match: a conflict naming the current version; deleted.
	stale := upload("k", "w3", []byte("late"))
	zero := int64(0)
	var ce *objects.ConflictError
	if _, err := s.CommitBlob(ctx, "k", stale, objects.CommitBlobOptions{WriteID: "w3", IfMatch: &zero}); !errors.As(err, &ce) || ce.Current != 1 {
		t.Errorf("stale: %v, want a conflict at version 1", err)
	}
	if bucket.Has(stale.Key) {
		t.Error("the stale upload is still in the bucket")
	}
}

// CommitBlob of the document the latest version holds (another upload id:
// a retried upload) commits nothing, answers with that version and deletes
// the blob; the If-Match of the first attempt is honoured as Write does.
func TestCommitBlobIsIdempotentByContent(t *testing.T) {
	ctx := context.Background()
	body, other := objectstest.Random(64<<10, 1), objectstest.Random(64<<10, 2)
	zero, one := int64(0), int64(1)
	tests := []struct {
		name      string
		body      []byte
		ct        string
		ifMatch   *int64
		version   int64
		unchanged bool
		conflict  bool
	}{
		{name: "same document", body: body, ct: "application/x-a", version: 1, unchanged: true},
		{name: "same document, create only (a retried create)", body: body, ct: "application/x-a", ifMatch: &zero, version: 1, unchanged: true},
		{name: "same document, If-Match 1", body: body, ct: "application/x-a", ifMatch: &one, version: 1, unchanged: true},
		{name: "same bytes, other type", body: body, ct: "application/x-b", version: 2},
		{name: "other bytes", body: other, ct: "application/x-a", version: 2},
		{name: "other bytes, create only", body: other, ct: "application/x-a", ifMatch: &zero, conflict: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, bucket := objectstest.NewTable(), objectstest.NewBucket("b")
			s := &objects.Store{Items: table, Chunks: table, Blobs: bucket}
			upload := func(id string, b []byte) objects.BlobRef {
				ref, err := bucket.PutBlob(ctx, objects.Blob{Key: objects.UploadKey("k", id), Body: b, SHA256: objects.SumOf(b)})
				if err != nil {
					t.Fatal(err)
				}
				return ref
			}
			if _, err := s.CommitBlob(ctx, "k", upload("w1", body), objects.CommitBlobOptions{WriteID: "w1", ContentType: "application/x-a"}); err != nil {
				t.Fatal(err)
			}
			ref := upload("w2", tt.body)
			w, err := s.CommitBlob(ctx, "k", ref, objects.CommitBlobOptions{WriteID: "w2", ContentType: tt.ct, IfMatch: tt.ifMatch})
			var ce *objects.ConflictError
			switch {
			case tt.conflict:
				if !errors.As(err, &ce) || ce.Current != 1 {
					t.Fatalf("got %+v %v, want a conflict at version 1", w, err)
				}
			case err != nil || w.Version != tt.version || w.Unchanged != tt.unchanged:
				t.Fatalf("got version %d unchanged %t (%v), want version %d unchanged %t", w.Version, w.Unchanged, err, tt.version, tt.unchanged)
			}
			if kept := bucket.Has(ref.Key); kept != (err == nil && !tt.unchanged) {
				t.Errorf("the upload's blob is kept: %t; want it only when it became a version", kept)
			}
		})
	}
}

// uploadsMap is an in-memory objects.Uploads: enough for Complete.
type uploadsMap map[string]objects.Upload

func (m uploadsMap) CreateUpload(_ context.Context, u objects.Upload) error { m[u.ID] = u; return nil }
func (m uploadsMap) GetUpload(_ context.Context, id string) (objects.Upload, bool, error) {
	u, ok := m[id]
	return u, ok, nil
}
func (m uploadsMap) ClaimUpload(context.Context, string, time.Time, time.Time) (objects.Upload, bool, error) {
	return objects.Upload{}, false, errors.New("not used")
}
func (m uploadsMap) SettleUpload(_ context.Context, u objects.Upload) error { m[u.ID] = u; return nil }

// multipartOnce is a bucket's multipart side that completes an upload
// once: after that, the upload id is gone (NoSuchUpload).
type multipartOnce struct {
	objects.Transfers // not used
	bucket            *objectstest.Bucket
	completed         map[string]bool
	calls             int
}

func (m *multipartOnce) CompleteMultipart(ctx context.Context, blobKey, id string, _ []objects.Part) error {
	m.calls++
	if m.completed[id] {
		return fmt.Errorf("%w: %w", objects.ErrMultipartGone, &objects.InvalidError{Reason: objects.ReasonBadParts, Detail: "NoSuchUpload"})
	}
	m.completed[id] = true
	_, err := m.bucket.PutBlob(ctx, objects.Blob{Key: blobKey, Body: []byte("assembled"), SHA256: objects.SumOf([]byte("assembled"))})
	return err
}

var (
	_ objects.Uploads   = uploadsMap{}
	_ objects.Transfers = (*multipartOnce)(nil)
)

// Complete twice: the second call answers with the upload as it is
// (pending while the bucket holds the assembled object, committed once
// settled, without asking the bucket again); an upload whose multipart
// upload is gone and whose object is not there is still refused.
func TestCompleteTwice(t *testing.T) {
	ctx := context.Background()
	body := []byte("assembled")
	tests := []struct {
		name      string
		first     bool // a first Complete went through
		lose      bool // then the object went away (an aborted upload looks the same)
		committed bool // then the finalizer settled it
		wantState objects.UploadState
		wantCalls int
		wantErr   objects.Reason
	}{
		{name: "once", wantState: objects.UploadPending, wantCalls: 1},
		{name: "again, pending", first: true, wantState: objects.UploadPending, wantCalls: 2},
		{name: "again, committed", first: true, committed: true, wantState: objects.UploadCommitted, wantCalls: 1},
		{name: "again, multipart gone and no object", first: true, lose: true, wantErr: objects.ReasonBadParts, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bucket := objectstest.NewBucket("b")
			ups := uploadsMap{}
			mp := &multipartOnce{bucket: bucket, completed: map[string]bool{}}
			u := &objects.Uploader{Store: &objects.Store{Blobs: bucket}, Uploads: ups, Bucket: mp, Now: func() time.Time { return t0 }}
			up := objects.Upload{
				ID: "u1", Key: "k", Size: int64(len(body)), SHA256: objects.SumOf(body), BlobKey: objects.UploadKey("k", "u1"),
				MultipartID: "mp1", Parts: 1, State: objects.UploadPending, Deadline: t0.Add(time.Hour),
			}
			ups[up.ID] = up
			parts := []objects.Part{{Number: 1, ETag: "e"}}
			if tt.first {
				if _, err := u.Complete(ctx, "k", "u1", parts); err != nil {
					t.Fatal(err)
				}
			}
			if tt.lose {
				if err := bucket.DeleteBlob(ctx, objects.BlobRef{Key: up.BlobKey}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.committed {
				settled := ups["u1"]
				settled.State, settled.Version = objects.UploadCommitted, 1
				ups["u1"] = settled
			}
			got, err := u.Complete(ctx, "k", "u1", parts)
			switch {
			case tt.wantErr != "":
				if objects.ReasonOf(err) != tt.wantErr {
					t.Fatalf("got %+v %v, want %s", got, err, tt.wantErr)
				}
			case err != nil || got.State != tt.wantState:
				t.Fatalf("got %s (%v), want %s", got.State, err, tt.wantState)
			}
			if mp.calls != tt.wantCalls {
				t.Errorf("%d completes asked of the bucket, want %d", mp.calls, tt.wantCalls)
			}
		})
	}
}
