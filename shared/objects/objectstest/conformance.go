package objectstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// Ports are the objects table's ports that objects.Store and the
// maintenance (Sweeper, Check) use, as one implementation provides them.
type Ports struct {
	Items  objects.Items
	Chunks objects.Chunks
	Refs   objects.RefScanner
}

// TestPorts is the conformance suite of the objects table's ports: every
// implementation (the in-memory Table, the DynamoDB adapter) must behave
// the same way, the way objects.Store relies on. open returns ports over
// a new, empty table.
func TestPorts(t *testing.T, open func(t *testing.T) Ports) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, p Ports)
	}{
		{"a missing item is no error", testMissing},
		{"a commit writes v0 and vN alike", testCommit},
		{"a stale base is a conflict that wrote nothing", testConflict},
		{"a commit whose version is not the base's next is refused", testBadVersion},
		{"a listing is v0 and the history, oldest first, without payloads", testList},
		{"a removal tombstones v0 and deletes the history", testRemove},
		{"history deletes spare v0 and ignore missing items", testDeleteHistory},
		{"chunks come back in order and go", testChunks},
		{"the references scan sees versions, blobs, manifests and chunks", testScan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

var created = time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)

// record is version v of key, inline.
func record(key string, v int64, body string) objects.Record {
	return objects.Record{
		Key: key, Version: v, Kind: objects.Inline, Size: int64(len(body)), SHA256: objects.SumOf([]byte(body)),
		ContentType: "text/plain", Codec: objects.Identity, Data: []byte(body), WriteID: fmt.Sprintf("w%d", v), CreatedAt: created,
	}
}

// commit writes version v of key on base v-1 and fails the test on error.
func commit(t *testing.T, p Ports, r objects.Record) {
	t.Helper()
	if err := p.Items.Commit(context.Background(), objects.Commit{Base: objects.Base{Version: r.Version - 1}, Record: r}); err != nil {
		t.Fatalf("commit %s v%d: %v", r.Key, r.Version, err)
	}
}

func item(t *testing.T, p Ports, key string, v int64) (objects.Record, bool) {
	t.Helper()
	r, ok, err := p.Items.Item(context.Background(), key, v)
	if err != nil {
		t.Fatalf("Item(%s, %d): %v", key, v, err)
	}
	return r, ok
}

// same reports how got differs from want ("" when it does not).
func same(got, want objects.Record, withData bool) string {
	switch {
	case got.Key != want.Key || got.Version != want.Version || got.Kind != want.Kind || got.Deleted != want.Deleted:
		return fmt.Sprintf("%s v%d %s deleted=%t, want %s v%d %s deleted=%t", got.Key, got.Version, got.Kind, got.Deleted, want.Key, want.Version, want.Kind, want.Deleted)
	case got.Size != want.Size || got.SHA256 != want.SHA256 || got.ContentType != want.ContentType || got.Codec != want.Codec || got.WriteID != want.WriteID:
		return fmt.Sprintf("metadata %+v, want %+v", got.Meta(), want.Meta())
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("created %v, want %v", got.CreatedAt, want.CreatedAt)
	case withData && !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("data %q, want %q", got.Data, want.Data)
	case !withData && got.Data != nil:
		return fmt.Sprintf("data %q, want none", got.Data)
	case (got.Manifest == nil) != (want.Manifest == nil) || got.Manifest != nil && !got.Manifest.Equal(*want.Manifest):
		return fmt.Sprintf("manifest %+v, want %+v", got.Manifest, want.Manifest)
	case (got.Blob == nil) != (want.Blob == nil) || got.Blob != nil && *got.Blob != *want.Blob:
		return fmt.Sprintf("blob %+v, want %+v", got.Blob, want.Blob)
	}
	return ""
}

func testMissing(t *testing.T, p Ports) {
	for _, v := range []int64{0, 1} {
		if _, ok := item(t, p, "docs/none", v); ok {
			t.Errorf("Item(docs/none, %d) found an item", v)
		}
	}
	l, err := p.Items.List(context.Background(), "docs/none")
	if err != nil || l.Exists || len(l.History) != 0 {
		t.Errorf("List of nothing: %+v, %v; want empty", l, err)
	}
}

func testCommit(t *testing.T, p Ports) {
	want := record("docs/a", 1, "hello")
	commit(t, p, want)
	for _, v := range []int64{0, 1} {
		got, ok := item(t, p, "docs/a", v)
		if !ok {
			t.Fatalf("no item for version %d", v)
		}
		if d := same(got, want, true); d != "" {
			t.Errorf("Item(docs/a, %d): %s", v, d)
		}
	}
	s3 := record("docs/a", 2, "")
	s3.Kind, s3.Data, s3.Size = objects.InS3, nil, 1<<20
	s3.Blob = &objects.BlobRef{Bucket: "b", Key: objects.BlobKey("docs/a", "w2"), VersionID: "v9", Size: 1 << 20, SHA256: s3.SHA256, ContentType: s3.ContentType, Codec: s3.Codec}
	commit(t, p, s3)
	if got, _ := item(t, p, "docs/a", 0); same(got, s3, true) != "" {
		t.Errorf("v0 after version 2: %s", same(got, s3, true))
	}
}

func testConflict(t *testing.T, p Ports) {
	commit(t, p, record("docs/a", 1, "one"))
	commit(t, p, record("docs/a", 2, "two"))
	stale := objects.Commit{Base: objects.Base{Version: 1}, Record: record("docs/a", 2, "stale")}
	err := p.Items.Commit(context.Background(), stale)
	var ce *objects.ConflictError
	if !errors.As(err, &ce) || ce.Current != 2 || ce.Deleted || !errors.Is(err, objects.ErrNotApplied) {
		t.Fatalf("stale commit: %v, want a conflict at version 2 that wrote nothing", err)
	}
	fresh := objects.Commit{Base: objects.Base{}, Record: record("docs/a", 1, "again")}
	if err := p.Items.Commit(context.Background(), fresh); !errors.As(err, &ce) || ce.Current != 2 {
		t.Fatalf("create over an object: %v, want a conflict at version 2", err)
	}
	if got, _ := item(t, p, "docs/a", 0); got.Version != 2 || string(got.Data) != "two" {
		t.Errorf("v0 after the conflicts: version %d %q, want 2 \"two\"", got.Version, got.Data)
	}
}

func testBadVersion(t *testing.T, p Ports) {
	bad := objects.Commit{Base: objects.Base{}, Record: record("docs/a", 3, "x")}
	if err := p.Items.Commit(context.Background(), bad); !errors.Is(err, objects.ErrNotApplied) {
		t.Fatalf("version 3 on base 0: %v, want ErrNotApplied", err)
	}
	if _, ok := item(t, p, "docs/a", 0); ok {
		t.Error("the refused commit wrote v0")
	}
}

func testList(t *testing.T, p Ports) {
	var want []objects.Record
	for v := int64(1); v <= 3; v++ {
		r := record("docs/l", v, fmt.Sprint("body ", v))
		commit(t, p, r)
		want = append(want, r)
	}
	commit(t, p, record("docs/l-other", 1, "not listed"))
	l, err := p.Items.List(context.Background(), "docs/l")
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exists || same(l.Latest, want[2], false) != "" {
		t.Errorf("latest: exists %t, %s", l.Exists, same(l.Latest, want[2], false))
	}
	if len(l.History) != len(want) {
		t.Fatalf("%d history items, want %d", len(l.History), len(want))
	}
	for i, r := range l.History {
		if d := same(r, want[i], false); d != "" {
			t.Errorf("history[%d]: %s", i, d)
		}
	}
}

func testRemove(t *testing.T, p Ports) {
	ctx := context.Background()
	commit(t, p, record("docs/r", 1, "one"))
	commit(t, p, record("docs/r", 2, "two"))
	rm := objects.Removal{Key: "docs/r", Base: objects.Base{Version: 2}, Tombstone: objects.Record{Key: "docs/r", Version: 2, CreatedAt: created}, History: []int64{1, 2}}
	if err := p.Items.Remove(ctx, rm); err != nil {
		t.Fatal(err)
	}
	v0, ok := item(t, p, "docs/r", 0)
	if !ok || !v0.Deleted || v0.Version != 2 {
		t.Fatalf("v0 after the removal: %+v (found %t), want a tombstone at version 2", v0.Meta(), ok)
	}
	for _, v := range []int64{1, 2} {
		if _, ok := item(t, p, "docs/r", v); ok {
			t.Errorf("v%d survived the removal", v)
		}
	}
	if err := p.Items.Remove(ctx, rm); !errors.Is(err, objects.ErrConflict) {
		t.Errorf("a second removal on a live base: %v, want a conflict", err)
	}
	var ce *objects.ConflictError
	live := objects.Commit{Base: objects.Base{Version: 2}, Record: record("docs/r", 3, "x")}
	if err := p.Items.Commit(ctx, live); !errors.As(err, &ce) || !ce.Deleted || ce.Current != 2 {
		t.Errorf("a commit on the live base: %v, want a conflict with a deleted object at 2", err)
	}
	again := objects.Commit{Base: objects.Base{Version: 2, Deleted: true}, Record: record("docs/r", 3, "three")}
	if err := p.Items.Commit(ctx, again); err != nil {
		t.Fatalf("a commit on the tombstone: %v", err)
	}
	if got, _ := item(t, p, "docs/r", 0); got.Version != 3 || got.Deleted {
		t.Errorf("v0 after writing again: version %d deleted %t, want 3, live", got.Version, got.Deleted)
	}
}

func testDeleteHistory(t *testing.T, p Ports) {
	ctx := context.Background()
	for v := int64(1); v <= 3; v++ {
		commit(t, p, record("docs/h", v, "x"))
	}
	if err := p.Items.DeleteHistory(ctx, "docs/h", []int64{1, 2, 7}); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[int64]bool{0: true, 1: false, 2: false, 3: true} {
		if _, ok := item(t, p, "docs/h", v); ok != want {
			t.Errorf("v%d exists: %t, want %t", v, ok, want)
		}
	}
	if err := p.Items.DeleteHistory(ctx, "docs/h", []int64{0}); err == nil {
		t.Error("DeleteHistory of v0 succeeded")
	}
	if _, ok := item(t, p, "docs/h", 0); !ok {
		t.Error("DeleteHistory of v0 deleted it")
	}
}

func testChunks(t *testing.T, p Ports) {
	ctx := context.Background()
	body := Random(10_000, 7)
	m, chunks, err := objects.Split(body, 4096, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Chunks.PutChunks(ctx, "docs/c", m, chunks); err != nil {
		t.Fatal(err)
	}
	got, err := p.Chunks.GetChunks(ctx, "docs/c", m)
	if err != nil {
		t.Fatal(err)
	}
	joined, err := objects.Join(m, got)
	if err != nil || !bytes.Equal(joined, body) {
		t.Fatalf("chunks read back: %v (equal %t)", err, bytes.Equal(joined, body))
	}
	// Some chunks alone: [1, 3) of 3, then none.
	part, err := p.Chunks.GetChunkRange(ctx, "docs/c", m, 1, 3)
	if err != nil || len(part) != 2 || !bytes.Equal(part[0], chunks[1]) || !bytes.Equal(part[1], chunks[2]) {
		t.Errorf("chunks [1, 3): %d chunks, %v; want chunks 1 and 2", len(part), err)
	}
	for i := range part {
		if err := m.CheckChunk(1+i, part[i]); err != nil {
			t.Errorf("chunk %d read alone: %v", 1+i, err)
		}
	}
	if none, err := p.Chunks.GetChunkRange(ctx, "docs/c", m, 2, 2); err != nil || len(none) != 0 {
		t.Errorf("chunks [2, 2): %d chunks, %v; want none", len(none), err)
	}
	if _, err := p.Chunks.GetChunkRange(ctx, "docs/c", m, 2, 4); err == nil {
		t.Error("chunks [2, 4) of 3: no error")
	}
	if err := p.Chunks.DeleteChunks(ctx, "docs/c", m); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Chunks.GetChunks(ctx, "docs/c", m); !errors.Is(err, objects.ErrBlobNotFound) {
		t.Errorf("chunks after their delete: %v, want ErrBlobNotFound", err)
	}
	if _, err := p.Chunks.GetChunkRange(ctx, "docs/c", m, 1, 2); !errors.Is(err, objects.ErrBlobNotFound) {
		t.Errorf("chunk 1 after its delete: %v, want ErrBlobNotFound", err)
	}
	if err := p.Chunks.DeleteChunks(ctx, "docs/c", m); err != nil {
		t.Errorf("a second delete: %v", err)
	}
}

func testScan(t *testing.T, p Ports) {
	ctx := context.Background()
	commit(t, p, record("docs/i", 1, "inline"))
	s3 := record("docs/s", 1, "")
	s3.Kind, s3.Data = objects.InS3, nil
	s3.Blob = &objects.BlobRef{Key: objects.BlobKey("docs/s", "w1"), Size: 1, SHA256: s3.SHA256, ContentType: s3.ContentType, Codec: s3.Codec}
	commit(t, p, s3)
	m, chunks, err := objects.Split(Random(5000, 3), 4096, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Chunks.PutChunks(ctx, "docs/c", m, chunks); err != nil {
		t.Fatal(err)
	}
	ch := record("docs/c", 1, "")
	ch.Kind, ch.Data, ch.Manifest = objects.Chunked, nil, &m
	commit(t, p, ch)

	got := map[objects.ItemKey]objects.ItemRef{}
	if err := p.Refs.Scan(ctx, func(r objects.ItemRef) { got[objects.ItemKey{PK: r.PK, SK: r.SK}] = r }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6+len(chunks) {
		t.Errorf("%d items scanned, want %d (v0 and v1 of three objects, %d chunks)", len(got), 6+len(chunks), len(chunks))
	}
	for _, sk := range []string{objects.LatestSortKey, objects.SortKey(1)} {
		if r := got[objects.ItemKey{PK: "docs/i", SK: sk}]; r.Version != 1 || r.WriteID != "w1" || r.BlobKey != "" || r.Manifest != nil {
			t.Errorf("docs/i %s: %+v, want version 1 of write w1, no payload", sk, r)
		}
		if r := got[objects.ItemKey{PK: "docs/s", SK: sk}]; r.BlobKey != s3.Blob.Key {
			t.Errorf("docs/s %s: blob key %q, want %q", sk, r.BlobKey, s3.Blob.Key)
		}
		if r := got[objects.ItemKey{PK: "docs/c", SK: sk}]; r.Manifest == nil || r.Manifest.WriteID != "w1" || r.Manifest.Count != m.Count {
			t.Errorf("docs/c %s: manifest %+v, want write w1 of %d chunks", sk, r.Manifest, m.Count)
		}
	}
	for _, k := range m.ChunkKeys("docs/c") {
		r, ok := got[k]
		if !ok || r.Chunk == nil || r.Chunk.Key != "docs/c" || r.Chunk.WriteID != "w1" || !r.UnreferencedSince.IsZero() {
			t.Errorf("chunk %s: %+v (found %t), want a chunk of docs/c, write w1, unmarked", k.PK, r, ok)
		}
	}
}
