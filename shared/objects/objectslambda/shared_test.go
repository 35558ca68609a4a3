package objectslambda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// shared makes the env's store share blobs, as the functions do.
func (e *env) shared() *objectsddb.Shared {
	sh := objectsddb.NewShared(e.db, e.table)
	e.store.Shared = sh
	return sh
}

func (e *env) sharedSweeper(t *testing.T) *objects.Sweeper {
	sw := e.sweeper(t)
	sw.Shared = &objects.Store{Blobs: e.blobs, Shared: objectsddb.NewShared(e.db, e.table), Now: e.clock, Log: testLogger(t)}
	return sw
}

// sweepShared runs two sweeps past the grace and the delete lease.
func (e *env) sweepShared(t *testing.T) {
	t.Helper()
	for i := 1; i <= 2; i++ {
		e.advance(time.Duration(i) * (objects.DefaultDeleteLease + 2*grace))
		if res := e.sharedSweeper(t).Sweep(context.Background()); res.Err != nil || res.DeleteErr != nil {
			t.Fatalf("sweep %d: %v; deletes: %v", i, res.Err, res.DeleteErr)
		}
	}
}

// blobsUnder counts the bucket's current objects under blobs/.
func (e *env) blobsUnder(t *testing.T) (n int, bytes int64) {
	t.Helper()
	for page, err := range e.lst.Versions(context.Background(), objects.BlobPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page {
			if v.Latest && !v.DeleteMarker {
				n++
				bytes += v.Size
			}
		}
	}
	return n, bytes
}

// reapAll reaps the history items the stream reports removed (read
// straight from the table's stream would be the runner's job; here the
// items are listed before and after).
func (e *env) reapRemoved(t *testing.T, removed []objects.Record) {
	t.Helper()
	for _, r := range removed {
		if err := e.store.Reap(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// history items of key, for the reaper.
func (e *env) historyOf(t *testing.T, key string) []objects.Record {
	t.Helper()
	l, err := e.items.List(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return l.History
}

// The same bytes written under 12 keys at once are stored once; deleting
// all but one key keeps them, deleting the last deletes them.
func TestSharedBlobsStoredOnce(t *testing.T) {
	e := newEnv(t)
	e.shared()
	ctx := context.Background()
	body := objectstest.Random(20<<10, 11)
	const keys = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	shared := 0
	for i := range keys {
		wg.Go(func() {
			w, err := e.store.Write(ctx, fmt.Sprintf("docs/%02d", i), body, objects.PutOptions{NoCompress: true})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if w.BlobShared {
				shared++
			}
		})
	}
	wg.Wait()
	if n, size := e.blobsUnder(t); n != 1 || size != int64(len(body)) {
		t.Fatalf("%d blobs of %d bytes, want 1 of %d", n, size, len(body))
	}
	t.Logf("%d of %d writes found the bytes stored", shared, keys)
	e.mustHold(t, true)

	for i := range keys {
		key := fmt.Sprintf("docs/%02d", i)
		hist := e.historyOf(t, key)
		if _, err := e.store.Delete(ctx, key, objects.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.reapRemoved(t, hist)
		if n, _ := e.blobsUnder(t); (n == 1) != (i < keys-1) {
			t.Fatalf("after deleting %d keys: %d blobs", i+1, n)
		}
		e.mustHold(t, true)
	}
}

// A document stored before blobs were shared (blobs/<hash>/<write id>)
// still reads, is reaped when deleted, and its orphan is swept; the same
// bytes written again are stored as a shared blob beside it.
func TestOldLayoutBlobsUnderSharing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	body := objectstest.Random(20<<10, 12)
	old, err := e.store.Put(ctx, "docs/old", body, objects.PutOptions{NoCompress: true}) // no sharing yet
	if err != nil || objects.IsShared(old.Blob.Key) {
		t.Fatalf("old layout: %v (blob %v)", err, old.Blob)
	}
	orphan, err := e.blobs.PutBlob(ctx, objects.Blob{Key: objects.BlobKey("docs/gone", "w0crashed"), Body: body, SHA256: objects.SumOf(body)})
	if err != nil {
		t.Fatal(err)
	}
	e.shared()
	got, err := e.store.Get(ctx, "docs/old", 0)
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("old layout read: %v", err)
	}
	nw, err := e.store.Write(ctx, "docs/new", body, objects.PutOptions{NoCompress: true})
	if err != nil || !objects.IsShared(nw.Blob.Key) {
		t.Fatalf("new write: %v (blob %v)", err, nw.Blob)
	}
	hist := e.historyOf(t, "docs/old")
	if _, err := e.store.Delete(ctx, "docs/old", objects.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reapRemoved(t, hist)
	e.sweepShared(t)
	e.mustHold(t, true)
	if n, _ := e.blobsUnder(t); n != 1 {
		t.Fatalf("%d blobs left, want the shared one (the old one reaped, %s swept)", n, orphan.Key)
	}
	if got, err := e.store.Get(ctx, "docs/new", 0); err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("shared read: %v", err)
	}
}

// failAt fails the nth call of the shared-blob protocol (the records'
// and the bucket's), before it reaches the server or after it took
// effect: a crash of the reaper at each step.
type failAt struct {
	objects.SharedRecords
	objects.Blobs
	mu    sync.Mutex
	n     int // calls so far
	at    int
	after bool
	steps []string
}

var errCrashed = errors.New("injected: crashed")

func (f *failAt) step(name string, do func() error) error {
	f.mu.Lock()
	f.n++
	hit := f.n == f.at
	f.steps = append(f.steps, name)
	f.mu.Unlock()
	if hit && !f.after {
		return errCrashed
	}
	if err := do(); err != nil {
		return err
	}
	if hit {
		return errCrashed
	}
	return nil
}

func (f *failAt) DropRef(ctx context.Context, blobKey, key, writeID string) error {
	return f.step("DropRef", func() error { return f.SharedRecords.DropRef(ctx, blobKey, key, writeID) })
}

func (f *failAt) Referenced(ctx context.Context, blobKey string) (refd bool, err error) {
	err = f.step("Referenced", func() (err error) { refd, err = f.SharedRecords.Referenced(ctx, blobKey); return err })
	return refd, err
}

func (f *failAt) MarkBlob(ctx context.Context, blobKey, token string, now, stale time.Time) (ok bool, err error) {
	err = f.step("MarkBlob", func() (err error) { ok, err = f.SharedRecords.MarkBlob(ctx, blobKey, token, now, stale); return err })
	return ok, err
}

func (f *failAt) ForgetBlob(ctx context.Context, blobKey, token string, exp time.Time) (ok bool, err error) {
	err = f.step("ForgetBlob", func() (err error) { ok, err = f.SharedRecords.ForgetBlob(ctx, blobKey, token, exp); return err })
	return ok, err
}

func (f *failAt) PurgeBlob(ctx context.Context, key string) error {
	return f.step("PurgeBlob", func() error { return f.Blobs.PurgeBlob(ctx, key) })
}

// The reaper crashed at each step of deleting a shared blob (before the
// step, and after it with the reply lost): a write of the same bytes right
// after never dangles and reads back, the stream's retry and the sweeps
// leave nothing behind, on DynamoDB Local and the local S3 server.
func TestSharedReaperCrashAtEachStep(t *testing.T) {
	const steps = 6 // DropRef, Referenced, MarkBlob, Referenced, PurgeBlob, ForgetBlob
	for at := 1; at <= steps; at++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("step %d after %t", at, after), func(t *testing.T) {
				e := newEnv(t)
				sh := e.shared()
				ctx := context.Background()
				body := objectstest.Random(20<<10, uint64(at))
				if _, err := e.store.Put(ctx, "docs/a", body, objects.PutOptions{NoCompress: true}); err != nil {
					t.Fatal(err)
				}
				hist := e.historyOf(t, "docs/a")
				if _, err := e.store.Delete(ctx, "docs/a", objects.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				f := &failAt{SharedRecords: sh, Blobs: e.blobs, at: at, after: after}
				// A crash ends the process: no step is tried again.
				crashing := &objects.Store{Items: e.items, Blobs: f, Shared: f, Log: testLogger(t), ReleaseTries: 1}
				err := crashing.Reap(ctx, hist[0])
				if !errors.Is(err, errCrashed) {
					t.Fatalf("reap: %v, want the crash at %v", err, f.steps)
				}
				e.mustHold(t, false)

				// A write of the same bytes now: shared, or its own blob
				// while the crashed mark holds the head.
				w, err := e.store.Write(ctx, "docs/b", body, objects.PutOptions{NoCompress: true})
				if err != nil {
					t.Fatal(err)
				}
				e.mustHold(t, false)

				// The stream retries the batch; then the sweeps.
				if err := e.store.Reap(ctx, hist[0]); err != nil {
					t.Fatal(err)
				}
				e.mustHold(t, false)
				e.sweepShared(t)
				e.mustHold(t, true)
				got, err := e.store.Get(ctx, "docs/b", 0)
				if err != nil || !bytes.Equal(got.Body, body) {
					t.Fatalf("docs/b (blob %s): %v", w.Blob.Key, err)
				}
				if n, _ := e.blobsUnder(t); n != 1 {
					t.Fatalf("%d blobs, want docs/b's alone", n)
				}
			})
		}
	}
}

// A commit whose claim is stale (the head moved since the write read it)
// writes nothing: neither the version items nor the reference record.
func TestSharedClaimHoldsInTheTransaction(t *testing.T) {
	e := newEnv(t)
	sh := e.shared()
	ctx := context.Background()
	body := objectstest.Random(20<<10, 13)
	if _, err := e.store.Put(ctx, "docs/a", body, objects.PutOptions{NoCompress: true}); err != nil {
		t.Fatal(err)
	}
	ck := objects.ContentKey(objects.SumOf(body), int64(len(body)))
	head, err := sh.BlobHead(ctx, ck)
	if err != nil || head.State != objects.BlobLive || head.Gen != 1 {
		t.Fatalf("head %+v (%v), want live at generation 1", head, err)
	}
	// A deleter marks it; the write that read it live must not commit.
	if ok, err := sh.MarkBlob(ctx, ck, "t1", time.Now(), time.Now().Add(-time.Hour)); err != nil || !ok {
		t.Fatalf("mark: %t %v", ok, err)
	}
	if ok, err := sh.MarkBlob(ctx, ck, "t2", time.Now(), time.Now().Add(-time.Hour)); err != nil || ok {
		t.Fatalf("a second mark over a fresh one: %t %v, want refused", ok, err)
	}
	rec := objects.Record{
		Key: "docs/b", Version: 1, Kind: objects.InS3, Size: int64(len(body)), SHA256: objects.SumOf(body),
		ContentType: objects.DefaultContentType, Codec: objects.Identity, WriteID: "wb",
		Blob: &objects.BlobRef{Key: ck, Size: int64(len(body)), SHA256: objects.SumOf(body), Codec: objects.Identity},
	}
	err = e.items.Commit(ctx, objects.Commit{Record: rec, Claim: &objects.BlobClaim{Head: head}})
	if !errors.Is(err, objects.ErrBlobChanged) || !errors.Is(err, objects.ErrNotApplied) {
		t.Fatalf("commit on a marked head: %v, want ErrBlobChanged and ErrNotApplied", err)
	}
	if _, ok, _ := e.items.Item(ctx, "docs/b", 0); ok {
		t.Fatal("docs/b written by a refused commit")
	}
	// Unmarked, it is live at a later generation: the old claim still fails,
	// a fresh one commits.
	if ok, err := sh.UnmarkBlob(ctx, ck, "t1"); err != nil || !ok {
		t.Fatalf("unmark: %t %v", ok, err)
	}
	if err := e.items.Commit(ctx, objects.Commit{Record: rec, Claim: &objects.BlobClaim{Head: head}}); !errors.Is(err, objects.ErrBlobChanged) {
		t.Fatalf("commit on a stale generation: %v", err)
	}
	fresh, _ := sh.BlobHead(ctx, ck)
	if err := e.items.Commit(ctx, objects.Commit{Record: rec, Claim: &objects.BlobClaim{Head: fresh}}); err != nil {
		t.Fatalf("commit on generation %d: %v", fresh.Gen, err)
	}
	e.mustHold(t, true)
	// A head absent or gone is made live by the commit that claims it.
	if ok, err := sh.MarkBlob(ctx, ck, "t3", time.Now(), time.Time{}); err != nil || !ok {
		t.Fatalf("mark: %t %v", ok, err)
	}
	if ok, err := sh.ForgetBlob(ctx, ck, "t3", time.Now().Add(time.Hour)); err != nil || !ok {
		t.Fatalf("forget: %t %v", ok, err)
	}
	gone, _ := sh.BlobHead(ctx, ck)
	if gone.State != objects.BlobGone || gone.Gen != fresh.Gen+2 {
		t.Fatalf("head %+v, want gone at generation %d", gone, fresh.Gen+2)
	}
}
