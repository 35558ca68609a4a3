package objects_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

func TestParseRange(t *testing.T) {
	spec := func(first, last int64) objects.RangeSpec { return objects.RangeSpec{First: first, Last: last} }
	suffix := func(n int64) objects.RangeSpec { return objects.RangeSpec{IsSuffix: true, Suffix: n} }
	tests := []struct {
		name   string
		header string
		want   objects.RangeSpec
		ok     bool
		reason objects.Reason
	}{
		{"no header", "", objects.RangeSpec{}, false, ""},
		{"first and last", "bytes=0-99", spec(0, 99), true, ""},
		{"one byte", "bytes=7-7", spec(7, 7), true, ""},
		{"to the end", "bytes=5-", spec(5, -1), true, ""},
		{"suffix", "bytes=-10", suffix(10), true, ""},
		{"suffix of zero parses (Resolve refuses it)", "bytes=-0", suffix(0), true, ""},
		{"unit in capitals", "Bytes=1-2", spec(1, 2), true, ""},
		{"spaces around", "  bytes=1-2  ", spec(1, 2), true, ""},
		{"space after =", "bytes= 1-2", spec(1, 2), true, ""},
		{"an empty list element", "bytes=1-2, ,", spec(1, 2), true, ""},
		{"last byte past int64", "bytes=0-99999999999999999999", spec(0, math.MaxInt64), true, ""},
		{"another unit is ignored", "items=0-1", objects.RangeSpec{}, false, ""},
		{"no =", "bytes 0-1", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"no unit", "=0-1", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"unit with a space", "by tes=0-1", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"no range", "bytes=", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"only commas", "bytes=,,", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"words", "bytes=first-last", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"no dash", "bytes=5", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"only a dash", "bytes=-", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"reversed", "bytes=5-2", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"negative first", "bytes=-5-10", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"plus sign", "bytes=+1-2", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"two dashes", "bytes=1-2-3", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"space inside", "bytes=1 -2", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"hex", "bytes=0x10-0x20", objects.RangeSpec{}, false, objects.ReasonBadRange},
		{"two ranges", "bytes=0-1,5-6", objects.RangeSpec{}, false, objects.ReasonMultipleRanges},
		{"overlapping ranges", "bytes=0-5,3-8", objects.RangeSpec{}, false, objects.ReasonMultipleRanges},
		{"the same range twice", "bytes=0-1,0-1", objects.RangeSpec{}, false, objects.ReasonMultipleRanges},
		{"a range and a suffix", "bytes=0-1,-1", objects.RangeSpec{}, false, objects.ReasonMultipleRanges},
		{"a good range and a bad one", "bytes=0-1,x", objects.RangeSpec{}, false, objects.ReasonBadRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := objects.ParseRange(tt.header)
			if r := objects.ReasonOf(err); r != tt.reason || (err != nil) != (tt.reason != "") {
				t.Fatalf("ParseRange(%q): %v (reason %q), want reason %q", tt.header, err, r, tt.reason)
			}
			if err != nil && !errors.Is(err, objects.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRange(%q) = %+v, %t; want %+v, %t", tt.header, got, ok, tt.want, tt.ok)
			}
			if ok {
				if again, _, err := objects.ParseRange(got.String()); err != nil || again != got {
					t.Errorf("the spec's String %q parses as %+v, %v", got.String(), again, err)
				}
			}
		})
	}
}

func TestResolveRange(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		size    int64
		want    objects.Range
		partial bool
		reason  objects.Reason
	}{
		{"first byte", "bytes=0-0", 10, objects.Range{Start: 0, End: 1}, true, ""},
		{"last byte", "bytes=9-9", 10, objects.Range{Start: 9, End: 10}, true, ""},
		{"last byte, open", "bytes=9-", 10, objects.Range{Start: 9, End: 10}, true, ""},
		{"last byte as a suffix", "bytes=-1", 10, objects.Range{Start: 9, End: 10}, true, ""},
		{"the whole document is still a range", "bytes=0-", 10, objects.Range{Start: 0, End: 10}, true, ""},
		{"middle", "bytes=3-6", 10, objects.Range{Start: 3, End: 7}, true, ""},
		{"last byte past the end stops there", "bytes=4-100", 10, objects.Range{Start: 4, End: 10}, true, ""},
		{"last byte past int64", "bytes=4-99999999999999999999", 10, objects.Range{Start: 4, End: 10}, true, ""},
		{"suffix as long as the document", "bytes=-10", 10, objects.Range{Start: 0, End: 10}, true, ""},
		{"suffix longer than the document", "bytes=-11", 10, objects.Range{Start: 0, End: 10}, true, ""},
		{"starts at the end", "bytes=10-", 10, objects.Range{}, false, objects.ReasonRangeNotSatisfiable},
		{"starts past the end", "bytes=10-20", 10, objects.Range{}, false, objects.ReasonRangeNotSatisfiable},
		{"first byte past int64", "bytes=99999999999999999999-", 10, objects.Range{}, false, objects.ReasonRangeNotSatisfiable},
		{"suffix of zero", "bytes=-0", 10, objects.Range{}, false, objects.ReasonRangeNotSatisfiable},
		{"empty document, first byte", "bytes=0-0", 0, objects.Range{}, false, ""},
		{"empty document, suffix", "bytes=-5", 0, objects.Range{}, false, ""},
		{"empty document, past the end", "bytes=7-", 0, objects.Range{}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, ok, err := objects.ParseRange(tt.header)
			if err != nil || !ok {
				t.Fatalf("ParseRange(%q): %t, %v", tt.header, ok, err)
			}
			got, partial, err := spec.Resolve(tt.size)
			if r := objects.ReasonOf(err); r != tt.reason || (err != nil) != (tt.reason != "") {
				t.Fatalf("Resolve(%d): %v (reason %q), want reason %q", tt.size, err, r, tt.reason)
			}
			if got != tt.want || partial != tt.partial {
				t.Errorf("Resolve(%d) = %+v, %t; want %+v, %t", tt.size, got, partial, tt.want, tt.partial)
			}
		})
	}
}

func TestChunkSpan(t *testing.T) {
	ten := objects.Manifest{WriteID: "w", Count: 10, ChunkSize: 100, Size: 1000}
	short := objects.Manifest{WriteID: "w", Count: 10, ChunkSize: 100, Size: 950} // the last chunk is 50 bytes
	one := objects.Manifest{WriteID: "w", Count: 1, ChunkSize: 100, Size: 30}
	tests := []struct {
		name     string
		m        objects.Manifest
		r        objects.Range
		from, to int
	}{
		{"first byte", ten, objects.Range{Start: 0, End: 1}, 0, 1},
		{"last byte", ten, objects.Range{Start: 999, End: 1000}, 9, 10},
		{"last byte of a short last chunk", short, objects.Range{Start: 949, End: 950}, 9, 10},
		{"exactly one chunk", ten, objects.Range{Start: 100, End: 200}, 1, 2},
		{"inside one chunk", ten, objects.Range{Start: 150, End: 160}, 1, 2},
		{"last byte of a chunk", ten, objects.Range{Start: 199, End: 200}, 1, 2},
		{"first byte of a chunk", ten, objects.Range{Start: 200, End: 201}, 2, 3},
		{"across one boundary", ten, objects.Range{Start: 199, End: 201}, 1, 3},
		{"across several", ten, objects.Range{Start: 150, End: 450}, 1, 5},
		{"two whole chunks", ten, objects.Range{Start: 300, End: 500}, 3, 5},
		{"everything", ten, objects.Range{Start: 0, End: 1000}, 0, 10},
		{"a document of one short chunk", one, objects.Range{Start: 10, End: 30}, 0, 1},
		{"an empty range needs none", ten, objects.Range{Start: 500, End: 500}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := tt.m.ChunkSpan(tt.r)
			if from != tt.from || to != tt.to {
				t.Errorf("ChunkSpan(%+v) = [%d, %d), want [%d, %d)", tt.r, from, to, tt.from, tt.to)
			}
		})
	}
}

// A 20 KiB document kept in the table in chunks of 1 KiB: each range reads
// only the chunks that hold it, and gives the document's bytes.
func TestGetRangeReadsOnlyItsChunks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(s *objects.Store) { s.Policy = objects.Policy{ChunkSize: KB} })
	body := objectstest.Random(20*KB+300, 11) // 21 chunks, the last of 300 bytes
	rec := e.mustPut(t, "docs/chunked.bin", body, objects.PutOptions{KeepInTable: true, NoCompress: true})
	if rec.Kind != objects.Chunked || rec.Manifest == nil || !rec.Manifest.HasSums() || rec.Manifest.Count != 21 {
		t.Fatalf("stored %s, manifest %+v; want 21 chunks with their digests", rec.Kind, rec.Manifest)
	}
	size := int64(len(body))
	tests := []struct {
		name   string
		r      objects.Range
		chunks int
	}{
		{"first byte", objects.Range{Start: 0, End: 1}, 1},
		{"last byte", objects.Range{Start: size - 1, End: size}, 1},
		{"the short last chunk whole", objects.Range{Start: 20 * KB, End: size}, 1},
		{"exactly one chunk", objects.Range{Start: 3 * KB, End: 4 * KB}, 1},
		{"1 KiB across a boundary", objects.Range{Start: 3*KB + 512, End: 4*KB + 512}, 2},
		{"two bytes across a boundary", objects.Range{Start: 5*KB - 1, End: 5*KB + 1}, 2},
		{"five chunks and a bit", objects.Range{Start: 2*KB + 10, End: 7*KB + 10}, 6},
		{"everything", objects.Range{Start: 0, End: size}, 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.table.ChunksRead()
			p, err := e.store.GetRange(ctx, "docs/chunked.bin", 0, tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if read := e.table.ChunksRead() - before; read != tt.chunks {
				t.Errorf("read %d chunks, want %d", read, tt.chunks)
			}
			if !bytes.Equal(p.Body, body[tt.r.Start:tt.r.End]) || p.Range != tt.r {
				t.Errorf("got %d bytes for %+v, want bytes %d-%d of the document", len(p.Body), p.Range, tt.r.Start, tt.r.Last())
			}
			if p.Size != size || p.Version != 1 || p.Data != nil {
				t.Errorf("record %+v: want the whole document's size, version 1, no stored bytes", p.Record)
			}
		})
	}
	if _, err := e.store.GetRange(ctx, "docs/chunked.bin", 0, objects.Range{Start: size - 1, End: size + 1}); objects.ReasonOf(err) != objects.ReasonRangeNotSatisfiable {
		t.Errorf("a range past the end: %v, want range-not-satisfiable", err)
	}
}

// Each chunk read for a range is verified against its own digest; a chunk
// outside the range is never read (none but the range's are counted), so
// its damage does not matter to that range.
func TestGetRangeVerifiesItsChunks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(s *objects.Store) { s.Policy = objects.Policy{ChunkSize: KB} })
	body := objectstest.Random(10*KB, 12)
	rec := e.mustPut(t, "docs/c.bin", body, objects.PutOptions{KeepInTable: true, NoCompress: true})
	m := *rec.Manifest
	if !e.table.CorruptChunk(m.ChunkKey(rec.Key, 2)) {
		t.Fatal("no chunk 2 to corrupt")
	}
	if !e.table.CorruptChunk(m.ChunkKey(rec.Key, 7)) {
		t.Fatal("no chunk 7 to corrupt")
	}
	for _, tt := range []struct {
		name string
		r    objects.Range
		want error
	}{
		{"inside the corrupted chunk", objects.Range{Start: 2*KB + 5, End: 2*KB + 10}, objects.ErrChecksum},
		{"across into the corrupted chunk", objects.Range{Start: 2*KB - 1, End: 2*KB + 1}, objects.ErrChecksum},
		{"in a good chunk beside it", objects.Range{Start: 3 * KB, End: 3*KB + 100}, nil},
		{"the chunk before it", objects.Range{Start: KB, End: 2 * KB}, nil},
		{"the last chunk", objects.Range{Start: 9 * KB, End: 10 * KB}, nil},
		{"the other corrupted chunk", objects.Range{Start: 7*KB + 1, End: 7*KB + 2}, objects.ErrChecksum},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.table.ChunksRead()
			p, err := e.store.GetRange(ctx, rec.Key, 0, tt.r)
			from, to := m.ChunkSpan(tt.r)
			if read := e.table.ChunksRead() - before; read != to-from {
				t.Errorf("read %d chunks, want the %d that hold the range", read, to-from)
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) || p.Body != nil {
					t.Fatalf("got %d bytes, %v; want no bytes and %v", len(p.Body), err, tt.want)
				}
				return
			}
			if err != nil || !bytes.Equal(p.Body, body[tt.r.Start:tt.r.End]) {
				t.Fatalf("got %d bytes, %v; want bytes %d-%d", len(p.Body), err, tt.r.Start, tt.r.Last())
			}
		})
	}
	// The whole document is verified whole: the damage is found.
	if _, err := e.store.Get(ctx, rec.Key, 0); err == nil {
		t.Error("Get of the damaged document succeeded")
	}
}

// Documents that cannot be entered in the middle are read and verified
// whole, then cut: inline, compressed inline, in S3, chunked gzip, and
// chunked under a manifest written without chunk digests.
func TestGetRangeOtherPlacements(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		body      []byte
		o         objects.PutOptions
		kind      objects.Kind
		codec     objects.Codec
		inlineMax int
		dropSums  bool
		wantReads int // chunk items read for one range (-1: the document's count)
	}{
		{"inline", objectstest.Random(2*KB, 1), objects.PutOptions{}, objects.Inline, objects.Identity, 0, false, 0},
		{"compressed inline", objectstest.Text(8 * KB), objects.PutOptions{}, objects.CompressedInline, objects.Gzip, 0, false, 0},
		{"in S3", objectstest.Random(40*KB, 2), objects.PutOptions{}, objects.InS3, objects.Identity, 0, false, 0},
		{"chunked gzip", objectstest.Text(256 * KB), objects.PutOptions{KeepInTable: true}, objects.Chunked, objects.Gzip, KB, false, -1},
		{"chunked without chunk digests", objectstest.Random(12*KB, 3), objects.PutOptions{KeepInTable: true, NoCompress: true}, objects.Chunked, objects.Identity, 0, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(s *objects.Store) { s.Policy = objects.Policy{ChunkSize: KB, InlineMax: tt.inlineMax} })
			rec := e.mustPut(t, "docs/d", tt.body, tt.o)
			if rec.Kind != tt.kind || rec.Codec != tt.codec {
				t.Fatalf("stored %s (%s), want %s (%s)", rec.Kind, rec.Codec, tt.kind, tt.codec)
			}
			if tt.dropSums {
				full, _, _ := e.table.Item(ctx, rec.Key, 0)
				full.Manifest.Sums = nil
				e.table.SetRecord(objects.LatestSortKey, full)
			}
			r := objects.Range{Start: int64(len(tt.body)) / 3, End: int64(len(tt.body))/3 + 1000}
			before := e.table.ChunksRead()
			p, err := e.store.GetRange(ctx, rec.Key, 0, r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Body, tt.body[r.Start:r.End]) {
				t.Errorf("got %d bytes that differ from bytes %d-%d", len(p.Body), r.Start, r.Last())
			}
			want := tt.wantReads
			if want < 0 {
				want = rec.Manifest.Count
			}
			if read := e.table.ChunksRead() - before; read != want {
				t.Errorf("read %d chunks, want %d", read, want)
			}
		})
	}
}
