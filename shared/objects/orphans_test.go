package objects_test

import (
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

func TestParseChunkKey(t *testing.T) {
	m := objects.Manifest{WriteID: "w1", Count: 3}
	tests := []struct {
		name string
		pk   string
		want objects.ChunkOf
		ok   bool
	}{
		{name: "a manifest's key", pk: m.ChunkKey("docs/a", 2).PK, want: objects.ChunkOf{Key: "docs/a", WriteID: "w1", Index: 2}, ok: true},
		{name: "an object key", pk: "docs/a"},
		{name: "no index", pk: "docs/a#w1"},
		{name: "short index", pk: "docs/a#w1#001"},
		{name: "signed index", pk: "docs/a#w1#+0001"},
		{name: "bad write id", pk: "docs/a#W!#00001"},
		{name: "empty key", pk: "#w1#00001"},
		{name: "extra part", pk: "docs/a#w1#00001#x"},
		{name: "a key with '#'", pk: m.ChunkKey("a#b", 1).PK, want: objects.ChunkOf{Key: "a#b", WriteID: "w1", Index: 1}, ok: true},
		{name: "a key shaped like a chunk's", pk: m.ChunkKey("a#w1#00000", 0).PK, want: objects.ChunkOf{Key: "a#w1#00000", WriteID: "w1", Index: 0}, ok: true},
		{name: "the key '#'", pk: m.ChunkKey("#", 2).PK, want: objects.ChunkOf{Key: "#", WriteID: "w1", Index: 2}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := objects.ParseChunkKey(tt.pk)
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseChunkKey(%q) = %+v, %t; want %+v, %t", tt.pk, got, ok, tt.want, tt.ok)
			}
			if ok && !m.References(tt.want.Key, got) {
				t.Errorf("the manifest does not reference %+v", got)
			}
		})
	}
	if m.References("docs/a", objects.ChunkOf{Key: "docs/a", WriteID: "w1", Index: 3}) {
		t.Error("chunk 3 of a 3-chunk manifest is referenced")
	}
}

func TestOrphansUnder(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old, fresh := now.Add(-2*time.Hour), now.Add(-time.Minute)
	listed := []objects.BlobInfo{
		{Key: "uploads/a/1", LastModified: old},
		{Key: "uploads/a/2", LastModified: old},
		{Key: "uploads/a/3", LastModified: fresh},
		{Key: "blobs/a/4", LastModified: old},
	}
	ref := func(k string) bool { return k == "uploads/a/2" }
	got := objects.OrphansUnder("uploads/", listed, ref, now, time.Hour)
	if len(got) != 1 || got[0].Key != "uploads/a/1" {
		t.Errorf("got %v, want only uploads/a/1", got)
	}
}
