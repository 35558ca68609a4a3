package objectstest

import (
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/bodies"
)

// Sizes used by the proofs.
const (
	KB = 1 << 10
	MB = 1 << 20
)

// Random returns n incompressible bytes, the same for the same seed.
func Random(n int, seed uint64) []byte { return bodies.Random(n, seed) }

// Text returns n bytes of repetitive JSON, which compresses well.
func Text(n int) []byte { return bodies.Text(n) }

// RoundTripCase is one size class of the round-trip proof, with the
// placement the default policy must choose for it.
type RoundTripCase struct {
	Name       string
	Body       []byte
	Keep       bool // PutOptions.KeepInTable
	Want       objects.Kind
	WantBlobs  int
	WantChunks int
}

// RoundTripCases are the size classes every Store implementation is
// proven with: the domain's fakes and the real DynamoDB and S3 adapters.
func RoundTripCases() []RoundTripCase {
	return []RoundTripCase{
		{"0 B", nil, false, objects.Inline, 0, 0},
		{"1 KB text", Text(KB), false, objects.CompressedInline, 0, 0},
		{"1 KB random", Random(KB, 1), false, objects.Inline, 0, 0},
		{"9 KB random", Random(9*KB, 2), false, objects.Inline, 0, 0},
		{"100 KB compressible", Text(100 * KB), false, objects.CompressedInline, 0, 0},
		{"100 KB incompressible", Random(100*KB, 3), false, objects.InS3, 1, 0},
		{"399 KB", Random(399*KB, 4), false, objects.InS3, 1, 0},
		{"399 KB kept in the table", Random(399*KB, 4), true, objects.Chunked, 0, 2},
		{"5 MB", Random(5*MB, 5), false, objects.InS3, 1, 0},
		{"5 MB kept in the table", Random(5*MB, 5), true, objects.Chunked, 0, 20},
		{"5 MB text kept in the table (gzip: 2 chunks, not 20)", Text(5 * MB), true, objects.Chunked, 0, 2},
	}
}
