package objectsddb

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// '#' separates the parts of the table's own item keys (chunks, uploads,
// shared blobs), and object keys may hold it: keys shaped like those item
// keys are objects of their own, next to the items they look like. Each
// reads back its own bytes, the scan that the sweeper and Check read
// classifies every item right (no dangling reference, no orphan), and a
// delete removes its object only.
func TestDomainKeysShapedLikeItemKeys(t *testing.T) {
	d := newDomain(t)
	ctx := context.Background()
	shared := "blob#" + strings.TrimPrefix(objects.ContentKey(objects.SumOf(nil), 0), objects.BlobPrefix)
	// NewID gives w000001 to the first write: "a"'s chunks are
	// a#w000001#00000 and a#w000001#00001, each also a key below.
	docs := []struct {
		key  string
		body []byte
		keep bool
		want objects.Kind
	}{
		{"a", random(399*KB, 1), true, objects.Chunked},
		{"a#w000001#00000", random(100*KB, 2), false, objects.InS3},
		{"a#w000001#00001", random(399*KB, 3), true, objects.Chunked},
		{"a#w000001", []byte("inline"), false, objects.Inline},
		{"a#1", []byte("a#1"), false, objects.Inline},
		{"#", random(100*KB, 4), false, objects.InS3},
		{"a#", []byte("a#"), false, objects.Inline},
		{shared, random(100*KB, 5), false, objects.InS3},
		{shared + "#w1#00000", []byte("x"), false, objects.Inline},
		{objects.RefSortKey("a", "w000001"), []byte("r"), false, objects.Inline},
		{UploadPartitionPrefix + "w000001", random(100*KB, 6), false, objects.InS3},
	}
	for _, doc := range docs {
		rec, err := d.store.Put(ctx, doc.key, doc.body, objects.PutOptions{KeepInTable: doc.keep})
		if err != nil {
			t.Fatalf("Put %q: %v", doc.key, err)
		}
		if rec.Kind != doc.want {
			t.Errorf("Put %q: %s, want %s", doc.key, rec.Kind, doc.want)
		}
	}
	read := func(skip string) {
		t.Helper()
		for _, doc := range docs {
			if doc.key == skip {
				continue
			}
			got, err := d.store.Get(ctx, doc.key, 0)
			if err != nil {
				t.Fatalf("Get %q: %v", doc.key, err)
			}
			if !bytes.Equal(got.Body, doc.body) || got.Version != 1 {
				t.Errorf("Get %q: v%d, %d bytes; want v1, its %d bytes", doc.key, got.Version, len(got.Body), len(doc.body))
			}
			if vs, err := d.store.Versions(ctx, doc.key); err != nil || len(vs) != 1 {
				t.Errorf("Versions %q: %d, %v; want one", doc.key, len(vs), err)
			}
		}
	}
	read("")
	p := d.check(t)
	if p.blobs != 4 || p.chunks != 4 || len(p.orphanBlobs)+len(p.orphanChunks) != 0 {
		t.Errorf("%d blobs, %d chunks, orphans %v %v; want 4, 4, none", p.blobs, p.chunks, p.orphanBlobs, p.orphanChunks)
	}
	// Deleting "a" leaves its chunks to the reaper: they, and not the
	// objects named like them, are what no reference names any more.
	if _, err := d.store.Delete(ctx, "a", objects.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.Get(ctx, "a", 0); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("Get a after its delete: %v, want not found", err)
	}
	read("a")
	p = d.check(t)
	if want := []string{"a#w000001#00000", "a#w000001#00001"}; !slices.Equal(p.orphanChunks, want) || len(p.orphanBlobs) != 0 {
		t.Errorf("after the delete: orphans %v %v; want chunks %v", p.orphanBlobs, p.orphanChunks, want)
	}
}
