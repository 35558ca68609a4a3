package objects_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

func TestReservedKeys(t *testing.T) {
	for _, k := range []string{"versions", "a/versions", "a/uploads", "uploads", "a/uploads/x", "a/uploads/x/complete"} {
		if got := objects.ReasonOf(objects.ValidateKey(k)); got != objects.ReasonKeyReserved {
			t.Errorf("ValidateKey(%q): reason %q, want %q", k, got, objects.ReasonKeyReserved)
		}
	}
	// After "uploads", only a segment shaped like an upload id is reserved.
	for _, k := range []string{"versions/a", "a/versions.txt", "uploads/a/b/c", "a/my-uploads", "complete", "a/uploads/x/y/complete",
		"photos/uploads/cat.png", "a/uploads/Cat", "a/uploads/x.png/complete", "a/uploads/x_1/complete"} {
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
