package objects_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

const (
	KB = objectstest.KB
	MB = objectstest.MB
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	store  *objects.Store
	table  *objectstest.Table
	bucket *objectstest.Bucket
	now    atomic.Pointer[time.Time]
}

func (e *env) advance(d time.Duration) {
	n := e.now.Load().Add(d)
	e.now.Store(&n)
}

func newEnv(t *testing.T, configure ...func(*objects.Store)) *env {
	t.Helper()
	e := &env{table: objectstest.NewTable(), bucket: objectstest.NewBucket("objects")}
	start := t0
	e.now.Store(&start)
	clock := func() time.Time { return *e.now.Load() }
	e.bucket.Now = clock
	var ids atomic.Int64
	e.store = &objects.Store{
		Items: e.table, Chunks: e.table, Blobs: e.bucket,
		Now:   clock,
		NewID: func() string { return fmt.Sprintf("w%06d", ids.Add(1)) },
	}
	for _, c := range configure {
		c(e.store)
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// mustPut stores a document and fails the test on error.
func (e *env) mustPut(t *testing.T, key string, body []byte, o objects.PutOptions) objects.Record {
	t.Helper()
	r, err := e.store.Put(context.Background(), key, body, o)
	if err != nil {
		t.Fatalf("Put %s (%d bytes): %v", key, len(body), err)
	}
	return r
}

// check asserts the store's invariants with objects.Check: every live
// reference's payload exists, and v0 is a copy of its vN. It returns the
// orphans: blobs and chunks no item references.
func (e *env) check(t *testing.T) (orphanBlobs, orphanChunks []string) {
	t.Helper()
	r, err := objects.Check(context.Background(), e.table, e.bucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Dangling {
		t.Errorf("dangling reference: %s", d)
	}
	for _, v := range r.OrphanBlobs {
		orphanBlobs = append(orphanBlobs, v.Key)
	}
	return orphanBlobs, r.OrphanChunks
}

// reap runs the reaper over what the table's stream reports removed.
func (e *env) reap(t *testing.T) {
	t.Helper()
	for _, r := range e.table.Removed() {
		if err := e.store.Reap(context.Background(), r); err != nil {
			t.Fatalf("Reap: %v", err)
		}
	}
}

func TestRoundTripByKind(t *testing.T) {
	tests := objectstest.RoundTripCases()
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rec := e.mustPut(t, "docs/doc.bin", tt.Body, objects.PutOptions{KeepInTable: tt.Keep, ContentType: "application/x-test"})
			if rec.Kind != tt.Want || rec.Version != 1 || rec.Size != int64(len(tt.Body)) || rec.SHA256 != objects.SumOf(tt.Body) {
				t.Errorf("Put = %s v%d %d bytes %s, want %s v1 %d bytes", rec.Kind, rec.Version, rec.Size, rec.SHA256, tt.Want, len(tt.Body))
			}
			if rec.Data != nil {
				t.Error("Put returned the stored bytes")
			}
			for _, version := range []int64{0, 1} {
				got, err := e.store.Get(ctx, "docs/doc.bin", version)
				if err != nil {
					t.Fatalf("Get v%d: %v", version, err)
				}
				if !bytes.Equal(got.Body, tt.Body) || got.SHA256 != objects.SumOf(tt.Body) || got.ContentType != "application/x-test" {
					t.Errorf("Get v%d: %d bytes %s %s, want the %d bytes put", version, len(got.Body), got.SHA256, got.ContentType, len(tt.Body))
				}
			}
			if n := len(e.bucket.List()); n != tt.WantBlobs {
				t.Errorf("%d blobs, want %d", n, tt.WantBlobs)
			}
			if n := len(e.table.ChunkKeys()); n != tt.WantChunks {
				t.Errorf("%d chunks, want %d", n, tt.WantChunks)
			}
			if ob, oc := e.check(t); len(ob)+len(oc) > 0 {
				t.Errorf("orphans: %v %v", ob, oc)
			}
		})
	}
}

func TestOptimisticLocking(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	key := "doc"
	steps := []struct {
		name        string
		delete      bool
		ifMatch     *int64
		wantVersion int64 // of the write; 0 when it conflicts
		wantCurrent int64 // in the conflict
		wantDeleted bool
	}{
		{name: "create only, absent", ifMatch: ptr[int64](0), wantVersion: 1},
		{name: "create only, present", ifMatch: ptr[int64](0), wantCurrent: 1},
		{name: "based on the latest", ifMatch: ptr[int64](1), wantVersion: 2},
		{name: "based on a stale version", ifMatch: ptr[int64](1), wantCurrent: 2},
		{name: "based on a future version", ifMatch: ptr[int64](7), wantCurrent: 2},
		{name: "unconditional", ifMatch: nil, wantVersion: 3},
		{name: "delete", delete: true, wantVersion: 3},
		{name: "based on the deleted version", ifMatch: ptr[int64](3), wantCurrent: 3, wantDeleted: true},
		{name: "delete again, stale", delete: true, ifMatch: ptr[int64](3)},
		{name: "create only after a delete continues the numbers", ifMatch: ptr[int64](0), wantVersion: 4},
		{name: "delete based on a stale version", delete: true, ifMatch: ptr[int64](3), wantCurrent: 4},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			// Bytes of its own each step (the same bytes as the latest
			// are no write), in S3: a conflict must not leave a blob.
			body := random(20*KB, uint64(i+1))
			var version int64
			var err error
			if s.delete {
				version, err = e.store.Delete(ctx, key, objects.DeleteOptions{IfMatch: s.ifMatch})
			} else {
				var r objects.Record
				r, err = e.store.Put(ctx, key, body, objects.PutOptions{IfMatch: s.ifMatch})
				version = r.Version
			}
			var ce *objects.ConflictError
			switch {
			case s.wantVersion > 0:
				if err != nil || version != s.wantVersion {
					t.Fatalf("got version %d, %v; want %d", version, err, s.wantVersion)
				}
				if !s.delete {
					got, err := e.store.Get(ctx, key, 0)
					if err != nil || !bytes.Equal(got.Body, body) {
						t.Errorf("latest is not the write: %v", err)
					}
				}
			case s.wantCurrent > 0:
				if !errors.As(err, &ce) || !errors.Is(err, objects.ErrConflict) {
					t.Fatalf("got %v, want a conflict", err)
				}
				if ce.Current != s.wantCurrent || ce.Deleted != s.wantDeleted || ce.Expected != *s.ifMatch || ce.Key != key {
					t.Errorf("conflict %+v, want current %d deleted %t expected %d", ce, s.wantCurrent, s.wantDeleted, *s.ifMatch)
				}
			default:
				if !errors.Is(err, objects.ErrNotFound) {
					t.Fatalf("got %v, want ErrNotFound", err)
				}
			}
			e.reap(t)
			if ob, oc := e.check(t); len(ob)+len(oc) > 0 {
				t.Errorf("orphans after %s: %v %v", s.name, ob, oc)
			}
		})
	}
}

// A writer loses the race at the commit (another write lands between its
// read of v0 and its transaction): with If-Match it gets the conflict and
// its blob is gone; without, it goes on top of the winner with the same blob.
func TestRaceAtCommit(t *testing.T) {
	tests := []struct {
		name        string
		ifMatch     *int64
		wantVersion int64
		wantBlobs   int
	}{
		{"conditional loses", ptr[int64](1), 0, 2},
		{"unconditional goes on top", nil, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			e.mustPut(t, "k", random(50*KB, 1), objects.PutOptions{})
			winner := random(50*KB, 2)
			var fired atomic.Bool // the hook runs again inside the winner's Put
			e.table.Before = func(op string) error {
				if op == objectstest.OpCommit && fired.CompareAndSwap(false, true) {
					e.mustPut(t, "k", winner, objects.PutOptions{})
				}
				return nil
			}
			loser := random(50*KB, 3)
			rec, err := e.store.Put(ctx, "k", loser, objects.PutOptions{IfMatch: tt.ifMatch})
			e.table.Before = nil
			if tt.wantVersion == 0 {
				var ce *objects.ConflictError
				if !errors.As(err, &ce) || ce.Current != 2 {
					t.Fatalf("got %v, want a conflict at version 2", err)
				}
				if got, _ := e.store.Get(ctx, "k", 0); !bytes.Equal(got.Body, winner) {
					t.Error("the winner's write is not the latest")
				}
			} else if err != nil || rec.Version != tt.wantVersion {
				t.Fatalf("got v%d, %v; want v%d", rec.Version, err, tt.wantVersion)
			}
			if got := len(e.bucket.List()); got != tt.wantBlobs {
				t.Errorf("%d blobs, want %d (one per committed version)", got, tt.wantBlobs)
			}
			if ob, oc := e.check(t); len(ob)+len(oc) > 0 {
				t.Errorf("orphans: %v %v", ob, oc)
			}
		})
	}
}

// Concurrent updaters of one key, in rounds: all read the same version, all
// write based on it; exactly one wins each round, no update is lost and the
// history is complete.
func TestConcurrentUpdaters(t *testing.T) {
	const writers, rounds = 4, 12
	ctx := context.Background()
	e := newEnv(t, func(s *objects.Store) { s.MaxVersions = rounds + 1 })
	e.mustPut(t, "shared", []byte("v1"), objects.PutOptions{})
	want := map[int64][]byte{1: []byte("v1")}
	for round := range rounds {
		base, err := e.store.Stat(ctx, "shared", 0)
		if err != nil {
			t.Fatal(err)
		}
		var wins, conflicts atomic.Int32
		var mu sync.Mutex
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			body := []byte(fmt.Sprintf("round %d writer %d ", round, w))
			if w%2 == 1 { // half the writers go to S3: their lost blobs must be cleaned
				body = append(body, random(16*KB, uint64(round*writers+w))...)
			}
			wg.Go(func() {
				<-start
				r, err := e.store.Put(ctx, "shared", body, objects.PutOptions{IfMatch: ptr(base.Version)})
				switch {
				case err == nil:
					wins.Add(1)
					mu.Lock()
					want[r.Version] = body
					mu.Unlock()
				case errors.Is(err, objects.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("round %d writer %d: %v", round, w, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != writers-1 {
			t.Fatalf("round %d: %d wins and %d conflicts, want 1 and %d", round, wins.Load(), conflicts.Load(), writers-1)
		}
	}
	versions, err := e.store.Versions(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != rounds+1 || versions[0].Version != rounds+1 || versions[len(versions)-1].Version != 1 {
		t.Fatalf("got %d versions from %d down to %d, want %d down to 1", len(versions), versions[0].Version, versions[len(versions)-1].Version, rounds+1)
	}
	for v, body := range want {
		got, err := e.store.Get(ctx, "shared", v)
		if err != nil || !bytes.Equal(got.Body, body) {
			t.Errorf("version %d: %v, want the winner's body", v, err)
		}
	}
	if ob, oc := e.check(t); len(ob)+len(oc) > 0 {
		t.Errorf("orphans: %v %v", ob, oc)
	}
}

var (
	errCrash   = errors.New("crash: the process died")
	errTimeout = errors.New("timeout: no reply")
	errRefused = fmt.Errorf("throttled: %w", objects.ErrNotApplied)
)

// A write that fails between its payload and its commit never leaves a
// reference to a missing payload; a payload whose commit certainly failed
// is deleted at once, any other is an orphan the sweeper removes.
func TestCrashBetweenPayloadAndCommit(t *testing.T) {
	tests := []struct {
		name          string
		body          []byte
		keep          bool
		tableBefore   map[string]error
		tableAfter    map[string]error
		bucketBefore  map[string]error
		bucketAfter   map[string]error
		wantErr       error
		wantCommitted bool
		wantOrphans   int // blobs or chunks
	}{
		{name: "blob, commit refused", body: random(20*KB, 1), tableBefore: map[string]error{objectstest.OpCommit: errRefused}, wantErr: objects.ErrNotApplied},
		{name: "blob, crash before commit", body: random(20*KB, 1), tableBefore: map[string]error{objectstest.OpCommit: errCrash}, wantErr: errCrash, wantOrphans: 1},
		{name: "blob, commit applied but reply lost", body: random(20*KB, 1), tableAfter: map[string]error{objectstest.OpCommit: errTimeout}, wantErr: errTimeout, wantCommitted: true},
		{name: "blob, commit refused and clean-up fails", body: random(20*KB, 1), tableBefore: map[string]error{objectstest.OpCommit: errRefused}, bucketBefore: map[string]error{objectstest.OpDeleteBlob: errCrash}, wantErr: objects.ErrNotApplied, wantOrphans: 1},
		{name: "blob write fails", body: random(20*KB, 1), bucketBefore: map[string]error{objectstest.OpPutBlob: errTimeout}, wantErr: errTimeout},
		{name: "blob written but reply lost", body: random(20*KB, 1), bucketAfter: map[string]error{objectstest.OpPutBlob: errTimeout}, wantErr: errTimeout},
		{name: "chunks, commit refused", body: random(600*KB, 2), keep: true, tableBefore: map[string]error{objectstest.OpCommit: errRefused}, wantErr: objects.ErrNotApplied},
		{name: "chunks, crash before commit", body: random(600*KB, 2), keep: true, tableBefore: map[string]error{objectstest.OpCommit: errCrash}, wantErr: errCrash, wantOrphans: 3},
		{name: "chunks, commit applied but reply lost", body: random(600*KB, 2), keep: true, tableAfter: map[string]error{objectstest.OpCommit: errTimeout}, wantErr: errTimeout, wantCommitted: true},
		{name: "chunk write fails after some chunks", body: random(600*KB, 2), keep: true, tableAfter: map[string]error{objectstest.OpPutChunks: errTimeout}, wantErr: errTimeout},
		{name: "inline, crash before commit", body: []byte("small"), tableBefore: map[string]error{objectstest.OpCommit: errCrash}, wantErr: errCrash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			e.mustPut(t, "k", random(30*KB, 9), objects.PutOptions{KeepInTable: tt.keep}) // version 1 stays readable throughout
			hook := func(m map[string]error) func(string) error {
				return func(op string) error { return m[op] }
			}
			e.table.Before, e.table.After = hook(tt.tableBefore), hook(tt.tableAfter)
			e.bucket.Before, e.bucket.After = hook(tt.bucketBefore), hook(tt.bucketAfter)
			_, err := e.store.Put(ctx, "k", tt.body, objects.PutOptions{IfMatch: ptr[int64](1), KeepInTable: tt.keep})
			e.table.Before, e.table.After, e.bucket.Before, e.bucket.After = nil, nil, nil, nil
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put: got %v, want %v", err, tt.wantErr)
			}
			got, err := e.store.Get(ctx, "k", 0)
			if err != nil {
				t.Fatalf("Get after the failure: %v", err)
			}
			if committed := got.Version == 2; committed != tt.wantCommitted {
				t.Errorf("latest is v%d; committed %t, want %t", got.Version, committed, tt.wantCommitted)
			}
			if tt.wantCommitted && !bytes.Equal(got.Body, tt.body) {
				t.Error("the committed version reads back different bytes")
			}
			ob, oc := e.check(t)
			if len(ob)+len(oc) != tt.wantOrphans {
				t.Errorf("orphans %v %v, want %d", ob, oc, tt.wantOrphans)
			}
			// The sweeper: past the grace period, unreferenced blobs go.
			referenced := map[string]bool{}
			for _, r := range e.table.Records() {
				if r.Blob != nil {
					referenced[r.Blob.Key] = true
				}
			}
			isRef := func(k string) bool { return referenced[k] }
			if early := objects.Orphans(e.bucket.List(), isRef, e.store.Now(), time.Hour); len(early) != 0 {
				t.Errorf("within the grace period the sweeper would delete %v", early)
			}
			e.advance(2 * time.Hour)
			sweep := objects.Orphans(e.bucket.List(), isRef, e.store.Now(), time.Hour)
			if len(sweep) != len(ob) {
				t.Errorf("sweeper finds %v, want the %d orphan blobs %v", sweep, len(ob), ob)
			}
			for _, b := range sweep {
				if err := e.bucket.DeleteBlob(ctx, objects.BlobRef{Key: b.Key}); err != nil {
					t.Fatal(err)
				}
			}
			if ob, _ := e.check(t); len(ob) != 0 {
				t.Errorf("blobs left after the sweep: %v", ob)
			}
		})
	}
}

// Deleting removes the references first; the reaper deletes the payloads
// after. A reaper that fails is retried (the stream redelivers); one that
// never runs leaves an orphan for the sweeper, never a dangling reference.
func TestCrashBetweenReferenceDeleteAndBlobDelete(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for i := range 3 {
		e.mustPut(t, "k", random(20*KB, uint64(i)), objects.PutOptions{})
	}
	e.mustPut(t, "k", random(600*KB, 7), objects.PutOptions{KeepInTable: true})
	if v, err := e.store.Delete(ctx, "k", objects.DeleteOptions{}); err != nil || v != 4 {
		t.Fatalf("Delete = %d, %v; want 4", v, err)
	}
	if _, err := e.store.Get(ctx, "k", 0); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("Get after delete: %v, want ErrNotFound", err)
	}
	if _, err := e.store.Get(ctx, "k", 2); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("Get v2 after delete: %v, want ErrNotFound", err)
	}
	// The crash: the payloads are still there, with no reference.
	ob, oc := e.check(t)
	if len(ob) != 3 || len(oc) != 3 {
		t.Fatalf("before the reaper: orphans %v %v, want 3 blobs and 3 chunks", ob, oc)
	}
	removed := e.table.Removed()
	if len(removed) != 4 {
		t.Fatalf("stream shows %d removed items, want 4", len(removed))
	}
	// The reaper fails once, then the stream delivers the records again.
	e.bucket.Before = func(op string) error {
		if op == objectstest.OpDeleteBlob {
			return errTimeout
		}
		return nil
	}
	if err := e.store.Reap(ctx, removed[0]); !errors.Is(err, errTimeout) {
		t.Fatalf("Reap with a failing bucket: %v", err)
	}
	e.bucket.Before = nil
	for _, r := range append(removed, removed...) { // redelivered: twice is harmless
		if err := e.store.Reap(ctx, r); err != nil {
			t.Fatalf("Reap: %v", err)
		}
	}
	if ob, oc := e.check(t); len(ob)+len(oc) != 0 {
		t.Errorf("after the reaper: orphans %v %v", ob, oc)
	}
	// Tombstones and inline records have nothing to reap.
	if err := e.store.Reap(ctx, objects.Record{Key: "k", Version: 4, Deleted: true}); err != nil {
		t.Error(err)
	}
}

func TestPruneAndReap(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(s *objects.Store) { s.MaxVersions = 3 })
	bodies := map[int64][]byte{}
	for i := int64(1); i <= 7; i++ {
		bodies[i] = random(20*KB, uint64(i))
		e.mustPut(t, "k", bodies[i], objects.PutOptions{})
	}
	e.reap(t)
	versions, err := e.store.Versions(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, v := range versions {
		got = append(got, v.Version)
	}
	if fmt.Sprint(got) != "[7 6 5]" {
		t.Errorf("versions %v, want [7 6 5]", got)
	}
	if n := len(e.bucket.List()); n != 3 {
		t.Errorf("%d blobs after pruning and reaping, want 3", n)
	}
	for v := int64(1); v <= 7; v++ {
		obj, err := e.store.Get(ctx, "k", v)
		if v <= 4 {
			if !errors.Is(err, objects.ErrNotFound) {
				t.Errorf("v%d: %v, want ErrNotFound", v, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(obj.Body, bodies[v]) {
			t.Errorf("v%d: %v", v, err)
		}
	}
	if ob, oc := e.check(t); len(ob)+len(oc) > 0 {
		t.Errorf("orphans: %v %v", ob, oc)
	}
}

// A prune that fails does not fail the write; the next write prunes.
func TestPruneFailureIsRetried(t *testing.T) {
	e := newEnv(t, func(s *objects.Store) { s.MaxVersions = 2 })
	e.table.Before = func(op string) error {
		if op == objectstest.OpDeleteHistory {
			return errTimeout
		}
		return nil
	}
	for i := range 4 {
		e.mustPut(t, "k", []byte{byte(i)}, objects.PutOptions{})
	}
	e.table.Before = nil
	e.mustPut(t, "k", []byte("5"), objects.PutOptions{})
	versions, err := e.store.Versions(context.Background(), "k")
	if err != nil || len(versions) != 2 {
		t.Errorf("got %d versions, %v; want 2", len(versions), err)
	}
}

func TestChecksumVerifiedOnRead(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		body    []byte
		keep    bool
		corrupt func(e *env, r objects.Record) bool
	}{
		{"blob", random(20*KB, 1), false, func(e *env, r objects.Record) bool { return e.bucket.Corrupt(r.Blob.Key) }},
		{"chunk", random(300*KB, 2), true, func(e *env, r objects.Record) bool {
			return e.table.CorruptChunk(r.Manifest.ChunkKey(r.Key, 1))
		}},
		{"inline", random(2*KB, 3), false, func(e *env, r objects.Record) bool {
			r.Data[7] ^= 1
			e.table.SetRecord(objects.LatestSortKey, r)
			return true
		}},
		{"compressed inline", text(8 * KB), false, func(e *env, r objects.Record) bool {
			r.Data[len(r.Data)/2] ^= 1
			e.table.SetRecord(objects.LatestSortKey, r)
			return true
		}},
		{"record digest", random(2*KB, 4), false, func(e *env, r objects.Record) bool {
			r.SHA256[0] ^= 1
			e.table.SetRecord(objects.LatestSortKey, r)
			return true
		}},
		{"record size", random(20*KB, 5), false, func(e *env, r objects.Record) bool {
			r.Size--
			e.table.SetRecord(objects.LatestSortKey, r)
			return true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.mustPut(t, "k", tt.body, objects.PutOptions{KeepInTable: tt.keep})
			r, _, _ := e.table.Item(ctx, "k", 0)
			if !tt.corrupt(e, r) {
				t.Fatal("nothing to corrupt")
			}
			obj, err := e.store.Get(ctx, "k", 0)
			if !errors.Is(err, objects.ErrChecksum) {
				t.Fatalf("got %v, want ErrChecksum", err)
			}
			if obj.Body != nil {
				t.Error("data returned with a checksum error")
			}
		})
	}
}

// A blob reaped while a reader holds its reference reads as not found (the
// object was deleted), not as a dangling reference; a blob removed behind
// the store's back is a dangling reference.
func TestGetRacesWithDelete(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	rec := e.mustPut(t, "k", random(20*KB, 1), objects.PutOptions{})
	var once sync.Once
	e.bucket.Before = func(op string) error {
		if op == objectstest.OpGetBlob {
			once.Do(func() {
				if _, err := e.store.Delete(ctx, "k", objects.DeleteOptions{}); err != nil {
					t.Error(err)
				}
				e.reap(t)
			})
		}
		return nil
	}
	if _, err := e.store.Get(ctx, "k", 0); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("got %v, want ErrNotFound", err)
	}
	e.bucket.Before = nil

	rec = e.mustPut(t, "k2", random(20*KB, 2), objects.PutOptions{})
	if err := e.bucket.DeleteBlob(ctx, *rec.Blob); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Get(ctx, "k2", 0); !errors.Is(err, objects.ErrDangling) {
		t.Errorf("got %v, want ErrDangling", err)
	}
}

// A write that replaces v0 while a reader fetches the old blob: the reader
// gets the old version's bytes (the blob lives as long as its history item).
func TestGetDuringOverwrite(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	first := random(20*KB, 1)
	e.mustPut(t, "k", first, objects.PutOptions{})
	var once sync.Once
	e.bucket.Before = func(op string) error {
		if op == objectstest.OpGetBlob {
			once.Do(func() { e.mustPut(t, "k", random(20*KB, 2), objects.PutOptions{}) })
		}
		return nil
	}
	got, err := e.store.Get(ctx, "k", 0)
	if err != nil || got.Version != 1 || !bytes.Equal(got.Body, first) {
		t.Errorf("got v%d, %v; want version 1 and its bytes", got.Version, err)
	}
}

func TestPutRejects(t *testing.T) {
	tests := []struct {
		name string
		key  string
		body []byte
		o    objects.PutOptions
		want objects.Reason
	}{
		{"empty key", "", nil, objects.PutOptions{}, objects.ReasonEmptyKey},
		{"NUL in the key", "a\x00b", nil, objects.PutOptions{}, objects.ReasonKeyBadChar},
		{"key not UTF-8", "a\xff", nil, objects.PutOptions{}, objects.ReasonKeyNotUTF8},
		{"bad content type", "a", nil, objects.PutOptions{ContentType: "nonsense"}, objects.ReasonBadContentType},
		{"negative If-Match", "a", nil, objects.PutOptions{IfMatch: ptr[int64](-1)}, objects.ReasonBadVersion},
		{"too large", "a", make([]byte, 2*MB+1), objects.PutOptions{}, objects.ReasonTooLarge},
		{"too large for the table", "a", random(MB+KB*2, 1), objects.PutOptions{KeepInTable: true}, objects.ReasonTooLargeForTable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(s *objects.Store) { s.Policy = objects.Policy{MaxSize: 2 * MB, ChunkedMax: MB} })
			_, err := e.store.Put(context.Background(), tt.key, tt.body, tt.o)
			if got := objects.ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
			if len(e.table.Records())+len(e.bucket.List())+len(e.table.ChunkKeys()) != 0 {
				t.Error("a refused write stored something")
			}
		})
	}
}

func TestReadRejects(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mustPut(t, "k", []byte("x"), objects.PutOptions{})
	tests := []struct {
		name    string
		call    func() error
		reason  objects.Reason
		wantErr error
	}{
		{"get bad key", func() error { _, err := e.store.Get(ctx, "a\xffb", 0); return err }, objects.ReasonKeyNotUTF8, nil},
		{"get negative version", func() error { _, err := e.store.Get(ctx, "k", -1); return err }, objects.ReasonBadVersion, nil},
		{"get missing key", func() error { _, err := e.store.Get(ctx, "nope", 0); return err }, "", objects.ErrNotFound},
		{"get missing version", func() error { _, err := e.store.Get(ctx, "k", 9); return err }, "", objects.ErrNotFound},
		{"versions bad key", func() error { _, err := e.store.Versions(ctx, "k\x00"); return err }, objects.ReasonKeyBadChar, nil},
		{"versions missing key", func() error { _, err := e.store.Versions(ctx, "nope"); return err }, "", objects.ErrNotFound},
		{"delete bad key", func() error {
			_, err := e.store.Delete(ctx, strings.Repeat("k", objects.MaxKeyBytes+1), objects.DeleteOptions{})
			return err
		}, objects.ReasonKeyTooLong, nil},
		{"delete If-Match 0", func() error {
			_, err := e.store.Delete(ctx, "k", objects.DeleteOptions{IfMatch: ptr[int64](0)})
			return err
		}, objects.ReasonBadVersion, nil},
		{"delete missing key", func() error { _, err := e.store.Delete(ctx, "nope", objects.DeleteOptions{}); return err }, "", objects.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if got := objects.ReasonOf(err); got != tt.reason {
				t.Errorf("reason %q (%v), want %q", got, err, tt.reason)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// A delete of an object with more history than a transaction holds removes
// it all: the tombstone and 99 items together, the rest after.
func TestDeleteLongHistory(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(s *objects.Store) { s.MaxVersions = 150 })
	for i := range 120 {
		e.mustPut(t, "k", []byte(fmt.Sprint(i)), objects.PutOptions{})
	}
	if _, err := e.store.Delete(ctx, "k", objects.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recs := e.table.Records()
	if len(recs) != 1 || !recs[0].Deleted || recs[0].Version != 120 {
		t.Errorf("left %d items (first %+v), want only the tombstone of v120", len(recs), recs[0].Meta())
	}
}

// Without a bucket, documents over the inline limits are chunked.
func TestNoBucket(t *testing.T) {
	e := newEnv(t, func(s *objects.Store) { s.Blobs = nil })
	body := random(50*KB, 1)
	rec := e.mustPut(t, "k", body, objects.PutOptions{})
	if rec.Kind != objects.Chunked {
		t.Errorf("kind %s, want chunked", rec.Kind)
	}
	got, err := e.store.Get(context.Background(), "k", 0)
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Errorf("Get: %v", err)
	}
	e = newEnv(t, func(s *objects.Store) { s.Blobs, s.Chunks = nil, nil })
	if _, err := e.store.Put(context.Background(), "k", body, objects.PutOptions{}); objects.ReasonOf(err) != objects.ReasonTooLargeForTable {
		t.Errorf("no bucket and no chunks: %v, want %s", err, objects.ReasonTooLargeForTable)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	keys := []string{"a", "a/b", "a.b", "relatório", "a-b"}
	for i, k := range keys {
		e.mustPut(t, k, []byte(strings.Repeat(k, i+1)), objects.PutOptions{})
	}
	for i, k := range keys {
		got, err := e.store.Get(ctx, k, 0)
		if err != nil || string(got.Body) != strings.Repeat(k, i+1) || got.Version != 1 {
			t.Errorf("%s: %q v%d, %v", k, got.Body, got.Version, err)
		}
	}
}

// A write based on a version (If-Match n > 0) reads v0 once before
// anything else, as every write does (the same document is not written
// again): a stale one is refused without staging a payload, at the cost of
// that read (1 read unit per 4 KB of v0). Before idempotent writes it went
// straight to its commit and paid a staged payload, deleted, instead.
func TestConditionalWriteReadsOnceAndStagesNothingStale(t *testing.T) {
	e := newEnv(t)
	v1 := e.mustPut(t, "k", []byte("one"), objects.PutOptions{})
	var reads, staged atomic.Int32
	e.table.Before = func(op string) error {
		if op == objectstest.OpItem {
			reads.Add(1)
		}
		return nil
	}
	e.bucket.Before = func(op string) error {
		if op == objectstest.OpPutBlob {
			staged.Add(1)
		}
		return nil
	}
	e.mustPut(t, "k", []byte("two"), objects.PutOptions{IfMatch: &v1.Version})
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads of v0 for a write, want 1", n)
	}
	if _, err := e.store.Put(context.Background(), "k", random(20*KB, 1), objects.PutOptions{IfMatch: &v1.Version}); !errors.Is(err, objects.ErrConflict) {
		t.Errorf("stale write: %v, want a conflict", err)
	}
	if n, b := reads.Load(), staged.Load(); n != 2 || b != 0 {
		t.Errorf("stale write: %d reads in all, %d blobs staged; want 2 and none", n, b)
	}
}

// The proofs' byte generators, shared with the adapters' tests.
var (
	random = objectstest.Random
	text   = objectstest.Text
)

// A record's creation time is UTC to the microsecond, the precision of the
// archive's timestamp columns, however fine the clock.
func TestCreatedAtToTheMicrosecond(t *testing.T) {
	e := newEnv(t)
	fine := time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
	e.now.Store(&fine)
	r := e.mustPut(t, "times/doc", []byte("x"), objects.PutOptions{})
	if want := time.Date(2026, 11, 23, 9, 0, 0, 123456000, time.UTC); !r.CreatedAt.Equal(want) || r.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v", r.CreatedAt, want)
	}
}
