package objects

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// text is compressible: about 10:1 with gzip.
func text(n int) []byte {
	words := strings.Fields("the quick brown fox jumps over the lazy dog while ddbpipe stores documents inline compressed chunked or in s3")
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(words[(i*7+i/3)%len(words)])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

func TestPlace(t *testing.T) {
	const KB, MB = 1 << 10, 1 << 20
	tests := []struct {
		name        string
		data        []byte
		keep        bool
		policy      Policy
		want        Kind
		wantCodec   Codec
		wantChunks  int
		wantReason  Reason
		wantTriedGz bool // compressedSize was called
	}{
		{name: "empty", data: nil, want: Inline, wantCodec: Identity},
		{name: "100 B text: one unit either way", data: text(100), want: Inline, wantCodec: Identity},
		{name: "1 KB random", data: randomBytes(KB, 1), want: Inline, wantCodec: Identity, wantTriedGz: true},
		{name: "1 KB text saves a unit", data: text(KB), want: CompressedInline, wantCodec: Gzip, wantTriedGz: true},
		{name: "9 KB random", data: randomBytes(9*KB, 2), want: Inline, wantCodec: Identity, wantTriedGz: true},
		{name: "9 KB text", data: text(9 * KB), want: CompressedInline, wantCodec: Gzip, wantTriedGz: true},
		{name: "9 KB + 1 random", data: randomBytes(9*KB+1, 3), want: InS3, wantCodec: Identity, wantTriedGz: true},
		{name: "100 KB text fits compressed", data: text(100 * KB), want: CompressedInline, wantCodec: Gzip, wantTriedGz: true},
		{name: "100 KB random", data: randomBytes(100*KB, 4), want: InS3, wantCodec: Identity, wantTriedGz: true},
		{name: "399 KB random", data: randomBytes(399*KB, 5), want: InS3, wantCodec: Identity},
		{name: "399 KB random kept in the table", data: randomBytes(399*KB, 5), keep: true, want: Chunked, wantCodec: Identity, wantChunks: 2, wantTriedGz: true},
		{name: "5 MB random: too big to try compressing", data: randomBytes(5*MB, 6), want: InS3, wantCodec: Identity},
		{name: "5 MB random kept in the table", data: randomBytes(5*MB, 6), keep: true, want: Chunked, wantCodec: Identity, wantChunks: 20, wantTriedGz: true},
		{name: "5 MB text kept in the table, compressed", data: text(5 * MB), keep: true, want: Chunked, wantCodec: Gzip, wantChunks: 1, wantTriedGz: true},
		{name: "over MaxSize", data: make([]byte, 2*MB+1), policy: Policy{MaxSize: 2 * MB}, wantReason: ReasonTooLarge},
		{name: "over ChunkedMax", data: randomBytes(MB+1, 7), keep: true, policy: Policy{ChunkedMax: MB}, wantReason: ReasonTooLargeForTable, wantTriedGz: true},
		{name: "custom InlineMax", data: randomBytes(3*KB, 8), policy: Policy{InlineMax: 2 * KB}, want: InS3, wantCodec: Identity, wantTriedGz: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			gz := func() int { calls++; return len(Compress(tt.data)) }
			pl, err := tt.policy.Place(len(tt.data), gz, PlaceOptions{Key: "docs/a", ContentType: "application/json", KeepInTable: tt.keep})
			if calls > 1 {
				t.Errorf("compressedSize called %d times, want at most once", calls)
			}
			if got := calls == 1; got != tt.wantTriedGz {
				t.Errorf("compressedSize called: %t, want %t", got, tt.wantTriedGz)
			}
			if tt.wantReason != "" {
				if got := ReasonOf(err); got != tt.wantReason {
					t.Fatalf("reason %q (%v), want %q", got, err, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pl.Kind != tt.want || pl.Codec != tt.wantCodec || pl.Chunks != tt.wantChunks {
				t.Errorf("got %s/%s/%d chunks, want %s/%s/%d", pl.Kind, pl.Codec, pl.Chunks, tt.want, tt.wantCodec, tt.wantChunks)
			}
			if pl.ItemBytes > MaxItemBytes || pl.ChunkItemBytes > MaxItemBytes {
				t.Errorf("item %d bytes, chunk item %d bytes: over the %d limit", pl.ItemBytes, pl.ChunkItemBytes, MaxItemBytes)
			}
			if (pl.Kind == Inline || pl.Kind == CompressedInline) && pl.StoredSize > tt.policy.withDefaults().InlineMax {
				t.Errorf("%d bytes stored inline, over InlineMax", pl.StoredSize)
			}
		})
	}
}

// Without a compressor (media already compressed), nothing is compressed.
func TestPlaceWithoutCompression(t *testing.T) {
	for _, n := range []int{2 << 10, 100 << 10} {
		pl, err := Policy{}.Place(n, nil, PlaceOptions{Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Codec != Identity {
			t.Errorf("%d bytes: codec %s, want identity", n, pl.Codec)
		}
	}
}

// Every item a valid policy produces fits DynamoDB, with the longest key and
// content type there are.
func TestPlaceFitsTheItemLimit(t *testing.T) {
	key := strings.Repeat("é", MaxKeyBytes/2)
	ct := "application/" + strings.Repeat("x", MaxContentTypeBytes-len("application/"))
	for _, p := range []Policy{{}, {InlineMax: 350 << 10}, {InlineMax: MaxItemBytes - ItemOverhead(key, ct), ChunkSize: MaxItemBytes - chunkItemOverhead - MaxKeyBytes}} {
		if err := p.Validate(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		for _, n := range []int{0, p.withDefaults().InlineMax, p.withDefaults().InlineMax + 1, 3 << 20} {
			for _, keep := range []bool{false, true} {
				pl, err := p.Place(n, nil, PlaceOptions{Key: key, ContentType: ct, KeepInTable: keep})
				if err != nil {
					t.Fatalf("%+v, %d bytes: %v", p, n, err)
				}
				if pl.ItemBytes > MaxItemBytes || pl.ChunkItemBytes > MaxItemBytes {
					t.Errorf("%+v, %d bytes: item %d, chunk item %d: over %d", p, n, pl.ItemBytes, pl.ChunkItemBytes, MaxItemBytes)
				}
			}
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"defaults", Policy{}, true},
		{"template maximum", Policy{InlineMax: 358400}, true},
		{"inline past the item limit", Policy{InlineMax: MaxItemBytes}, false},
		{"negative inline", Policy{InlineMax: -1}, false},
		{"tiny chunks", Policy{ChunkSize: 100}, false},
		{"chunks past the item limit", Policy{ChunkSize: MaxItemBytes}, false},
		{"too many chunks", Policy{ChunkSize: 1 << 10, ChunkedMax: 200 << 20}, false},
		{"ratio below 1", Policy{MaxCompressRatio: -3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %t", err, tt.ok)
			}
		})
	}
}

// The numbers Policy's documentation argues with.
func TestPricesBreakEven(t *testing.T) {
	p := DefaultPrices
	opts := PlaceOptions{Key: "docs/report-2026.json", ContentType: "application/json"}
	place := func(size int, pol Policy) Placement {
		pl, err := pol.Place(size, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	inline := func(size int) Placement { return place(size, Policy{InlineMax: 64 << 10}) }
	s3 := func(size int) Placement { return place(size, Policy{InlineMax: 1}) }

	// One copy, plain PutItem: k units against 1 unit plus a PUT (8 units).
	if got := p.S3Put / p.WriteUnit; got != 8 {
		t.Errorf("a PUT costs %v write units, want 8", got)
	}
	if got := p.S3Get / p.ReadUnit; math.Abs(got-3.2) > 1e-9 {
		t.Errorf("a GET costs %v read units, want 3.2", got)
	}

	// Writes alone: inline is cheaper up to about 2 KB, dearer from 3 KB.
	if w2, w3, ws := p.WriteCost(inline(2<<10)), p.WriteCost(inline(3<<10)), p.WriteCost(s3(2<<10)); w2 > ws || w3 <= ws {
		t.Errorf("write costs: inline 2 KB %g, 3 KB %g, S3 %g: want the break-even between", w2, w3, ws)
	}
	// With R reads per write.
	breakEven := func(kb int) float64 {
		in, out := inline(kb<<10), s3(kb<<10)
		return (p.WriteCost(in) - p.WriteCost(out)) / (p.ReadCost(out) - p.ReadCost(in))
	}
	tests := []struct {
		kb       int
		min, max float64
	}{
		{3, 5, 7},
		{4, 15, 20},
		{9, 100, 130},
	}
	for _, tt := range tests {
		if got := breakEven(tt.kb); got < tt.min || got > tt.max {
			t.Errorf("%d KB: inline pays from %.1f reads per write, want %v to %v", tt.kb, got, tt.min, tt.max)
		}
	}
	// Compressed text is cheaper inline than in S3 at any read rate.
	doc := text(9 << 10)
	gz, err := Policy{}.Place(len(doc), func() int { return len(Compress(doc)) }, opts)
	if err != nil || gz.Kind != CompressedInline {
		t.Fatalf("9 KB text: %+v, %v", gz, err)
	}
	if p.WriteCost(gz) > p.WriteCost(s3(len(doc))) || p.ReadCost(gz) > p.ReadCost(s3(len(doc))) {
		t.Errorf("compressed 9 KB text: write %g read %g; S3 write %g read %g", p.WriteCost(gz), p.ReadCost(gz), p.WriteCost(s3(len(doc))), p.ReadCost(s3(len(doc))))
	}
	// Chunks: about a unit per KB written, the manifest's transaction on top.
	ch, err := Policy{}.Place(1<<20, nil, PlaceOptions{Key: "k", KeepInTable: true})
	if err != nil {
		t.Fatal(err)
	}
	if units := p.WriteCost(ch) / p.WriteUnit; units < 1024 || units > 1024+4*4+8 {
		t.Errorf("1 MB chunked: %v write units", units)
	}
}
