package objects

import "fmt"

// DynamoDB's item limit, and its billing granularity on demand.
const (
	MaxItemBytes  = 400 << 10 // attribute names and values, keys included
	WriteUnitSize = 1 << 10   // a write unit covers 1 KB of item; a transactional write costs two
	ReadUnitSize  = 4 << 10   // a strongly consistent read unit covers 4 KB (eventually consistent: two reads)
)

// Estimated item overheads, in bytes, beyond the key, the content type and
// the payload. Each is an upper bound the table adapter's items must stay
// under (its tests measure them): the attribute names, the sort key, the
// version, sizes, digests, codec, write id and timestamps of a version item
// (a blob reference adds bucket, key and version id), and the names and
// key suffix of a chunk item.
const (
	versionItemOverhead = 384
	// listEntryOverhead is v0's packed listing entry beyond its content
	// type (which it holds a second time): name, three varints, SHA-256.
	listEntryOverhead = 64
	blobRefOverhead   = 320 // bucket (63), blob key (~90), version id (32 on AWS), names
	chunkItemOverhead = 160
)

// ItemOverhead is the estimated size of a version item without its
// payload (v0's, the larger: it also holds the listing index's entry). Placement uses it to keep items under MaxItemBytes and to count
// write units.
func ItemOverhead(key, contentType string) int {
	return versionItemOverhead + listEntryOverhead + len(key) + 2*len(contentType)
}

// WriteUnits is the on-demand write units one (non-transactional) write of
// an item of n bytes consumes.
func WriteUnits(n int) int { return max(1, (n+WriteUnitSize-1)/WriteUnitSize) }

// ReadUnits is the read units a strongly consistent read of an item of n
// bytes consumes.
func ReadUnits(n int) int { return max(1, (n+ReadUnitSize-1)/ReadUnitSize) }

// Policy decides where a document goes. The zero value uses the defaults.
//
// # Why these thresholds
//
// On demand, DynamoDB bills a write per started KB of item ($0.625 per
// million write units in us-east-1) and a strongly consistent read per
// started 4 KB ($0.125 per million read units); S3 bills $5 per million PUTs
// and $0.40 per million GETs. One S3 PUT thus costs what 8 write units do,
// one GET what 3.2 read units do. For one copy of an item, moving a k KB
// payload to S3 turns k write units into 1 write unit plus a PUT (9 units'
// worth): writes break even at about 9 KB, reads (⌈k/4⌉ units against 1
// unit plus a GET) at about 16 KB. That is the classic "inline below ~9 KB".
//
// This store writes each version twice (v0, the copy the latest read hits,
// and vN, the history) in one transaction, which bills each item twice: an
// inline payload costs 4 write units per KB while the S3 pointer still
// takes one PUT. Counted on writes alone, with the item's ~0.4 KB of
// metadata, the break-even falls to about 2 KB; counted with reads of the
// latest version (one GetItem of ⌈k/4⌉ units inline, against one unit plus
// a GET), an incompressible 3 KB document is cheaper inline from about 6
// reads per write, 4 KB from about 18, 9 KB from about 120 (Prices models
// this; its tests pin these numbers). We still default InlineMax to 9 KiB,
// for what the dollars leave out: an inline read is one request of
// single-digit milliseconds where an S3 read adds a second, slower round
// trip; an inline version has no payload outside its item, so it can never
// be orphaned or left dangling; and documents of that size are mostly text,
// which compressed inline (below) stores in a fraction of the units, so
// the 3-to-9 KB incompressible documents that pay more are the exception.
// Stacks that write such documents often and read them rarely should lower
// InlineMax toward 2 KiB (the template's ObjectsInlineMaxBytes); the
// benchmark reports both.
//
// Compression is used where it pays in billed units: a document that fits
// inline is stored gzip-compressed when that saves at least one write unit
// on its item, and a bigger one when compression brings it under
// InlineMax. Trying costs CPU, so documents over InlineMax×MaxCompressRatio
// are not tried (a ratio above 20 is rare outside synthetic data).
//
// Chunked placement is for documents that must stay in the table
// (PlaceOptions.KeepInTable, or no bucket configured): the stored bytes
// (compressed when that saves a unit) are cut into ChunkSize items, each
// with its own partition key, written before the commit and read in one
// parallel round. It costs about a write unit per KB, so it is opt-in and
// bounded by ChunkedMax; everything else over the inline limits goes to S3.
type Policy struct {
	InlineMax        int   // largest payload stored in the item (default 9 KiB)
	MaxCompressRatio int   // compression is tried up to InlineMax×this (default 20)
	ChunkSize        int   // bytes per chunk item (default 256 KiB)
	ChunkedMax       int   // largest stored payload a chunked placement takes (default 16 MiB)
	MaxSize          int64 // largest document accepted at all (default 32 MiB)
}

// Policy defaults.
const (
	DefaultInlineMax        = 9 << 10
	DefaultMaxCompressRatio = 20
	DefaultChunkSize        = 256 << 10
	DefaultChunkedMax       = 16 << 20
	DefaultMaxSize          = 32 << 20
)

func (p Policy) withDefaults() Policy {
	if p.InlineMax == 0 {
		p.InlineMax = DefaultInlineMax
	}
	if p.MaxCompressRatio == 0 {
		p.MaxCompressRatio = DefaultMaxCompressRatio
	}
	if p.ChunkSize == 0 {
		p.ChunkSize = DefaultChunkSize
	}
	if p.ChunkedMax == 0 {
		p.ChunkedMax = DefaultChunkedMax
	}
	if p.MaxSize == 0 {
		p.MaxSize = DefaultMaxSize
	}
	return p
}

// Validate checks that every item the policy can produce fits DynamoDB's
// limit, with the longest key and content type allowed.
func (p Policy) Validate() error {
	p = p.withDefaults()
	worst := ItemOverhead(string(make([]byte, MaxKeyBytes)), string(make([]byte, MaxContentTypeBytes)))
	switch {
	case p.InlineMax < 0 || p.InlineMax+worst > MaxItemBytes:
		return fmt.Errorf("objects: policy: InlineMax %d: want 0 to %d (the item limit less its overhead)", p.InlineMax, MaxItemBytes-worst)
	case p.MaxCompressRatio < 1:
		return fmt.Errorf("objects: policy: MaxCompressRatio %d: want at least 1", p.MaxCompressRatio)
	case p.ChunkSize < WriteUnitSize || p.ChunkSize+chunkItemOverhead+MaxKeyBytes > MaxItemBytes:
		return fmt.Errorf("objects: policy: ChunkSize %d: want %d to %d", p.ChunkSize, WriteUnitSize, MaxItemBytes-chunkItemOverhead-MaxKeyBytes)
	case p.ChunkedMax < 0 || chunkCount(int64(p.ChunkedMax), p.ChunkSize) > MaxChunks:
		return fmt.Errorf("objects: policy: ChunkedMax %d: want 0 to %d chunks of %d", p.ChunkedMax, MaxChunks, p.ChunkSize)
	case p.MaxSize < 0:
		return fmt.Errorf("objects: policy: MaxSize %d", p.MaxSize)
	}
	return nil
}

// PlaceOptions are what placement needs to know beyond the size.
type PlaceOptions struct {
	Key         string // the object key (its length counts in the item)
	ContentType string
	// KeepInTable refuses S3: too big for inline is chunked, or refused.
	KeepInTable bool
}

// Placement is where a document goes and what that costs in items.
type Placement struct {
	Kind  Kind
	Codec Codec
	// StoredSize is the bytes stored: in the item, in the chunks or in the blob.
	StoredSize int
	// ItemBytes is the estimated size of the version item (each of v0 and vN).
	ItemBytes int
	// Chunks, ChunkSize and ChunkItemBytes describe a chunked placement;
	// ChunkItemBytes is the estimated size of a full chunk item.
	Chunks         int
	ChunkSize      int
	ChunkItemBytes int
}

// Place decides where a document of size bytes goes. compressedSize
// returns its gzip size; Place calls it at most once, and only when the
// answer can change the placement. A nil compressedSize means "do not
// compress" (already-compressed media types, say).
func (p Policy) Place(size int, compressedSize func() int, o PlaceOptions) (Placement, error) {
	p = p.withDefaults()
	if size < 0 {
		return Placement{}, fmt.Errorf("objects: place: size %d", size)
	}
	if int64(size) > p.MaxSize {
		return Placement{}, invalid(ReasonTooLarge, "the document is %d bytes, the limit is %d", size, p.MaxSize)
	}
	overhead := ItemOverhead(o.Key, o.ContentType)
	csize := -1
	compressed := func() int {
		if csize < 0 {
			csize = compressedSize()
		}
		return csize
	}
	canCompress := compressedSize != nil
	inline := func(kind Kind, codec Codec, stored int) (Placement, error) {
		pl := Placement{Kind: kind, Codec: codec, StoredSize: stored, ItemBytes: overhead + stored}
		if pl.ItemBytes > MaxItemBytes { // only a policy that fails Validate gets here
			return Placement{}, fmt.Errorf("objects: place: an item of %d bytes is over the %d limit", pl.ItemBytes, MaxItemBytes)
		}
		return pl, nil
	}

	if size <= p.InlineMax {
		if canCompress && WriteUnits(overhead+size) > 1 && WriteUnits(overhead+compressed()) < WriteUnits(overhead+size) {
			return inline(CompressedInline, Gzip, compressed())
		}
		return inline(Inline, Identity, size)
	}
	if canCompress && size <= p.InlineMax*p.MaxCompressRatio && compressed() <= p.InlineMax {
		return inline(CompressedInline, Gzip, compressed())
	}
	if !o.KeepInTable {
		return Placement{Kind: InS3, Codec: Identity, StoredSize: size, ItemBytes: overhead + blobRefOverhead}, nil
	}

	stored, codec := size, Identity
	if canCompress && compressed()+WriteUnitSize <= size {
		stored, codec = compressed(), Gzip
	}
	if stored > p.ChunkedMax {
		return Placement{}, invalid(ReasonTooLargeForTable, "the document is %d bytes (%d stored), over the %d bytes a document kept in the table may take", size, stored, p.ChunkedMax)
	}
	chunkOverhead := chunkItemOverhead + len(o.Key)
	chunks := chunkCount(int64(stored), p.ChunkSize)
	return Placement{
		Kind: Chunked, Codec: codec, StoredSize: stored,
		ItemBytes: overhead + 128 + ChunkSumsSize(chunks), // the manifest and its chunk digests
		Chunks:    chunks, ChunkSize: p.ChunkSize,
		ChunkItemBytes: min(stored, p.ChunkSize) + chunkOverhead,
	}, nil
}

// Prices are on-demand prices in dollars per request unit or request.
type Prices struct {
	WriteUnit float64 // DynamoDB write request unit
	ReadUnit  float64 // DynamoDB read request unit
	S3Put     float64 // S3 PUT (Standard)
	S3Get     float64 // S3 GET (Standard)
}

// DefaultPrices are us-east-1's on-demand prices (DynamoDB since November
// 2024, S3 Standard).
var DefaultPrices = Prices{WriteUnit: 0.625e-6, ReadUnit: 0.125e-6, S3Put: 5e-6, S3Get: 0.4e-6}

// WriteCost is the modelled request cost of storing a new version with
// placement pl: the transaction that writes v0 and vN (two units per KB
// each), plus the blob PUT or the chunk writes.
func (pr Prices) WriteCost(pl Placement) float64 {
	c := 4 * float64(WriteUnits(pl.ItemBytes)) * pr.WriteUnit
	switch pl.Kind {
	case InS3:
		c += pr.S3Put
	case Chunked:
		c += pr.chunkUnits(pl, WriteUnits) * pr.WriteUnit
	}
	return c
}

// ReadCost is the modelled request cost of reading the latest version
// (strongly consistent): the v0 item, plus the blob GET or the chunks.
func (pr Prices) ReadCost(pl Placement) float64 {
	c := float64(ReadUnits(pl.ItemBytes)) * pr.ReadUnit
	switch pl.Kind {
	case InS3:
		c += pr.S3Get
	case Chunked:
		c += pr.chunkUnits(pl, ReadUnits) * pr.ReadUnit
	}
	return c
}

func (pr Prices) chunkUnits(pl Placement, units func(int) int) float64 {
	if pl.Chunks == 0 {
		return 0
	}
	overhead := pl.ChunkItemBytes - min(pl.StoredSize, pl.ChunkSize)
	last := pl.StoredSize - pl.ChunkSize*(pl.Chunks-1)
	return float64((pl.Chunks-1)*units(pl.ChunkSize+overhead) + units(last+overhead))
}
