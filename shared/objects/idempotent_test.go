package objects_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// calls counts the writes a store makes: payloads staged (blobs, chunk
// batches) and commits.
type calls struct {
	mu                     sync.Mutex
	blobs, chunks, commits int
}

func (c *calls) count(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch op {
	case objectstest.OpPutBlob:
		c.blobs++
	case objectstest.OpPutChunks:
		c.chunks++
	case objectstest.OpCommit:
		c.commits++
	}
	return nil
}

func (c *calls) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blobs + c.chunks + c.commits
}

// A write of the document the latest version already holds writes
// nothing and answers with that version; everything else is a write or a
// conflict as before. Documents of 20 KiB go to S3, so a staged payload
// would show as a blob.
func TestWriteIsIdempotent(t *testing.T) {
	a, b, c := objectstest.Random(20*KB, 1), objectstest.Random(20*KB, 2), objectstest.Random(20*KB, 3)
	small := []byte("hello\n")
	type put struct {
		body []byte
		o    objects.PutOptions
	}
	typed := func(ct string) objects.PutOptions { return objects.PutOptions{ContentType: ct, NoCompress: true} }
	plain := typed("application/x-a")
	match := func(n int64) objects.PutOptions { o := plain; o.IfMatch = ptr(n); return o }
	kept := plain
	kept.KeepInTable = true
	tests := []struct {
		name   string
		before []put // each must succeed
		del    bool  // then delete the object
		write  put
		// want: the version answered and whether it is unchanged, or a
		// conflict with the current version (and whether it was deleted).
		version   int64
		unchanged bool
		conflict  bool
		current   int64
		deleted   bool
	}{
		{name: "same bytes, same type", before: []put{{a, plain}}, write: put{a, plain}, version: 1, unchanged: true},
		{name: "same bytes, same type, inline", before: []put{{small, plain}}, write: put{small, plain}, version: 1, unchanged: true},
		{name: "same bytes, other type", before: []put{{a, plain}}, write: put{a, typed("application/x-b")}, version: 2},
		{name: "other bytes", before: []put{{a, plain}}, write: put{b, plain}, version: 2},
		{name: "same bytes as an older version", before: []put{{a, plain}, {b, plain}}, write: put{a, plain}, version: 3},
		{name: "tombstone: a deleted object is not the same", before: []put{{a, plain}}, del: true, write: put{a, plain}, version: 2},
		{name: "no object", write: put{a, plain}, version: 1},

		{name: "If-Match n, latest n, same bytes: nothing to change", before: []put{{a, plain}}, write: put{a, match(1)}, version: 1, unchanged: true},
		{name: "If-Match n retried after its commit", before: []put{{a, plain}, {b, match(1)}}, write: put{b, match(1)}, version: 2, unchanged: true},
		{name: "If-Match n stale, other bytes at n+1", before: []put{{a, plain}, {b, match(1)}}, write: put{c, match(1)}, conflict: true, current: 2},
		{name: "If-Match n retried, n+1 has another type", before: []put{{a, plain}, {b, match(1)}}, write: put{b, func() objects.PutOptions { o := match(1); o.ContentType = "application/x-b"; return o }()}, conflict: true, current: 2},
		{name: "If-Match n, same bytes at n+2", before: []put{{a, plain}, {b, plain}, {c, plain}}, write: put{c, match(1)}, conflict: true, current: 3},
		{name: "If-Match n on a deleted object", before: []put{{a, plain}}, del: true, write: put{a, match(1)}, conflict: true, current: 1, deleted: true},
		{name: "If-Match n on no object", write: put{a, match(1)}, conflict: true},

		{name: "If-Match 0 retried after its commit", before: []put{{a, match(0)}}, write: put{a, match(0)}, version: 1, unchanged: true},
		{name: "If-Match 0, same bytes at a later version", before: []put{{b, plain}, {a, plain}}, write: put{a, match(0)}, version: 2, unchanged: true},
		{name: "If-Match 0, other bytes", before: []put{{a, match(0)}}, write: put{b, match(0)}, conflict: true, current: 1},
		{name: "If-Match 0 after a delete", before: []put{{a, plain}}, del: true, write: put{a, match(0)}, version: 2},

		{name: "placement=table, latest in S3", before: []put{{a, plain}}, write: put{a, kept}, version: 2},
		{name: "latest in the table, placement auto", before: []put{{a, kept}}, write: put{a, plain}, version: 1, unchanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			for _, p := range tt.before {
				e.mustPut(t, "docs/a", p.body, p.o)
			}
			if tt.del {
				if _, err := e.store.Delete(ctx, "docs/a", objects.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				e.reap(t) // the deleted versions' blobs
			}
			blobsBefore := len(e.bucket.List())
			var n calls
			e.table.Before, e.bucket.Before = n.count, n.count

			w, err := e.store.Write(ctx, "docs/a", tt.write.body, tt.write.o)

			e.table.Before, e.bucket.Before = nil, nil
			var ce *objects.ConflictError
			switch {
			case tt.conflict:
				if !errors.As(err, &ce) || ce.Current != tt.current || ce.Deleted != tt.deleted {
					t.Fatalf("got %+v, %v; want a conflict at version %d (deleted %t)", w, err, tt.current, tt.deleted)
				}
				if n.writes() != 0 {
					t.Errorf("a refused write staged or committed: %+v", &n)
				}
			case err != nil:
				t.Fatalf("got %v, want version %d (unchanged %t)", err, tt.version, tt.unchanged)
			case w.Version != tt.version || w.Unchanged != tt.unchanged:
				t.Fatalf("got version %d unchanged %t, want version %d unchanged %t", w.Version, w.Unchanged, tt.version, tt.unchanged)
			case tt.unchanged && n.writes() != 0:
				t.Errorf("an unchanged write staged or committed: %+v", &n)
			case tt.unchanged && len(e.bucket.List()) != blobsBefore:
				t.Errorf("an unchanged write left %d blobs, want %d", len(e.bucket.List()), blobsBefore)
			}
			if err == nil && (w.SHA256 != objects.SumOf(tt.write.body) || w.Data != nil) {
				t.Errorf("answer %s (data %d bytes), want the document's SHA-256 and no payload", w.SHA256, len(w.Data))
			}
			latest, gerr := e.store.Get(ctx, "docs/a", 0)
			if err == nil && (gerr != nil || latest.Version != tt.version) {
				t.Errorf("latest is version %d (%v), want %d", latest.Version, gerr, tt.version)
			}
			if orphans, chunks := e.check(t); len(orphans)+len(chunks) != 0 {
				t.Errorf("orphans left: %v %v", orphans, chunks)
			}
		})
	}
}

// Put is Write without the outcome: the same record either way.
func TestPutAnswersTheUnchangedVersion(t *testing.T) {
	e := newEnv(t)
	first := e.mustPut(t, "docs/a", []byte("x"), objects.PutOptions{})
	again := e.mustPut(t, "docs/a", []byte("x"), objects.PutOptions{})
	if again.Version != first.Version || again.WriteID != first.WriteID {
		t.Errorf("again: version %d write %s, want the first's %d %s", again.Version, again.WriteID, first.Version, first.WriteID)
	}
}

// A write that loses its commit to a write of the same document (another
// client's, or its own first attempt's) answers with the winner's version,
// unchanged, and deletes its staged payload; a winner with other bytes is
// still a conflict for a conditional write and a new version on top for an
// unconditional one.
func TestWriteLosesARaceToTheSameDocument(t *testing.T) {
	a, b := objectstest.Random(20*KB, 1), objectstest.Random(20*KB, 2)
	tests := []struct {
		name      string
		ifMatch   *int64
		winner    []byte // what the other writer commits just before our commit
		version   int64
		unchanged bool
		conflict  bool
	}{
		{name: "unconditional, same bytes", winner: a, version: 2, unchanged: true},
		{name: "If-Match 1, same bytes", ifMatch: ptr(int64(1)), winner: a, version: 2, unchanged: true},
		{name: "If-Match 1, other bytes", ifMatch: ptr(int64(1)), winner: b, conflict: true},
		{name: "unconditional, other bytes", winner: b, version: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			opts := objects.PutOptions{ContentType: "application/x-a", NoCompress: true}
			e.mustPut(t, "docs/a", objectstest.Random(20*KB, 9), opts)
			var once sync.Once
			other := &objects.Store{Items: e.table, Chunks: e.table, Blobs: e.bucket, NewID: func() string { return "other" }}
			e.table.Before = func(op string) error {
				if op == objectstest.OpCommit {
					once.Do(func() {
						e.table.Before = nil
						if _, err := other.Put(ctx, "docs/a", tt.winner, opts); err != nil {
							t.Errorf("the other writer: %v", err)
						}
					})
				}
				return nil
			}
			o := opts
			o.IfMatch = tt.ifMatch
			w, err := e.store.Write(ctx, "docs/a", a, o)
			var ce *objects.ConflictError
			switch {
			case tt.conflict:
				if !errors.As(err, &ce) || ce.Current != 2 {
					t.Fatalf("got %+v, %v; want a conflict at version 2", w, err)
				}
			case err != nil || w.Version != tt.version || w.Unchanged != tt.unchanged:
				t.Fatalf("got version %d unchanged %t (%v), want version %d unchanged %t", w.Version, w.Unchanged, err, tt.version, tt.unchanged)
			}
			if orphans, chunks := e.check(t); len(orphans)+len(chunks) != 0 {
				t.Errorf("orphans left: %v %v", orphans, chunks)
			}
		})
	}
}

// The reply of a commit is lost (it took effect): the caller's retry, the
// same call again, answers with the version the first attempt committed,
// whatever its If-Match, and makes no second version.
func TestRetryAfterALostReply(t *testing.T) {
	body := objectstest.Random(20*KB, 1)
	for _, tt := range []struct {
		name    string
		exists  bool // version 1 is there before the write
		ifMatch *int64
		want    int64
	}{
		{name: "unconditional", exists: true, want: 2},
		{name: "If-Match 1", exists: true, ifMatch: ptr(int64(1)), want: 2},
		{name: "If-Match 0 (create)", ifMatch: ptr(int64(0)), want: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			if tt.exists {
				e.mustPut(t, "docs/a", []byte("v1"), objects.PutOptions{})
			}
			o := objects.PutOptions{IfMatch: tt.ifMatch, NoCompress: true}
			lost := errors.New("injected: reply lost")
			e.table.After = func(op string) error {
				if op == objectstest.OpCommit {
					e.table.After = nil
					return lost
				}
				return nil
			}
			if _, err := e.store.Write(ctx, "docs/a", body, o); !errors.Is(err, lost) {
				t.Fatalf("first attempt: %v, want the lost reply", err)
			}
			w, err := e.store.Write(ctx, "docs/a", body, o)
			if err != nil || w.Version != tt.want || !w.Unchanged {
				t.Fatalf("retry: version %d unchanged %t (%v), want version %d unchanged", w.Version, w.Unchanged, err, tt.want)
			}
			vs, err := e.store.Versions(ctx, "docs/a")
			if err != nil || len(vs) != int(tt.want) {
				t.Errorf("%d versions (%v), want %d", len(vs), err, tt.want)
			}
		})
	}
}
