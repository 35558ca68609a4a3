// Package bodies makes document bodies for the demo, the bench and the
// soak: incompressible bytes and repetitive JSON. It links no testing code,
// so the CLI can use it.
package bodies

import (
	"fmt"
	"math/rand/v2"
)

// Random returns n incompressible bytes, the same for the same seed.
func Random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Text returns n bytes of repetitive JSON, which compresses well.
func Text(n int) []byte {
	b := make([]byte, 0, n+64)
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, `{"id":%d,"name":"item %d","tags":["a","b"]},`, i, i%97)
	}
	return b[:n]
}
