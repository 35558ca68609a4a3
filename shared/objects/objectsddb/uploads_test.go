package objectsddb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

func newUploads(t *testing.T) *Uploads {
	t.Helper()
	db := newClient(t)
	return NewUploads(db, newTable(t, db))
}

// An intent round-trips; one finalizer at a time holds the lease; a
// settled upload stays settled.
func TestUploadLifecycle(t *testing.T) {
	s := newUploads(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	one := int64(1)
	u := objects.Upload{
		ID: "abc123", Key: "docs/a.bin", Size: 42, SHA256: objects.SumOf([]byte("x")), ContentType: "application/pdf",
		IfMatch: &one, BlobKey: objects.UploadKey("docs/a.bin", "abc123"), MultipartID: "mp-1", PartSize: 8 << 20, Parts: 1,
		State: objects.UploadPending, CreatedAt: now, Deadline: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour).Truncate(time.Second),
	}
	if err := s.CreateUpload(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUpload(ctx, u); !errors.Is(err, objects.ErrUploadExists) {
		t.Errorf("second create: %v, want ErrUploadExists", err)
	}
	got, ok, err := s.GetUpload(ctx, u.ID)
	if err != nil || !ok || got.Key != u.Key || got.SHA256 != u.SHA256 || *got.IfMatch != 1 || got.BlobKey != u.BlobKey ||
		got.MultipartID != "mp-1" || !got.Deadline.Equal(u.Deadline) || !got.ExpiresAt.Equal(u.ExpiresAt) {
		t.Fatalf("got %+v %v %v, want %+v", got, ok, err, u)
	}

	if _, claimed, err := s.ClaimUpload(ctx, u.ID, now, now.Add(time.Minute)); !claimed || err != nil {
		t.Fatalf("first claim: %v %v", claimed, err)
	}
	if _, _, err := s.ClaimUpload(ctx, u.ID, now.Add(time.Second), now.Add(2*time.Minute)); !errors.Is(err, objects.ErrUploadBusy) {
		t.Errorf("claim while held: %v, want ErrUploadBusy", err)
	}
	if _, claimed, err := s.ClaimUpload(ctx, u.ID, now.Add(2*time.Minute), now.Add(3*time.Minute)); !claimed || err != nil {
		t.Errorf("claim after the lease: %v %v", claimed, err)
	}

	got.State, got.Version = objects.UploadCommitted, 7
	if err := s.SettleUpload(ctx, got); err != nil {
		t.Fatal(err)
	}
	failed := got
	failed.State, failed.Reason = objects.UploadFailed, "conflict"
	if err := s.SettleUpload(ctx, failed); err != nil {
		t.Fatal(err)
	}
	after, claimed, err := s.ClaimUpload(ctx, u.ID, now.Add(time.Hour), now.Add(2*time.Hour))
	if claimed || err != nil || after.State != objects.UploadCommitted || after.Version != 7 {
		t.Errorf("after settling: %+v claimed=%v %v; want committed v7, unclaimed", after, claimed, err)
	}
	if _, _, err := s.ClaimUpload(ctx, "nope", now, now); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("claim of nothing: %v, want ErrNotFound", err)
	}
}
