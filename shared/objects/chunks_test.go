package objects

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSplitJoin(t *testing.T) {
	const cs = 1000
	tests := []struct {
		name       string
		size       int
		wantChunks int
	}{
		{"empty", 0, 0},
		{"one byte", 1, 1},
		{"just under a chunk", cs - 1, 1},
		{"exactly a chunk", cs, 1},
		{"just over a chunk", cs + 1, 2},
		{"three and a half", 3*cs + cs/2, 4},
		{"exactly five", 5 * cs, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := randomBytes(tt.size, uint64(tt.size))
			m, chunks, err := Split(data, cs, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if m.Count != tt.wantChunks || len(chunks) != tt.wantChunks {
				t.Fatalf("got %d chunks (manifest %d), want %d", len(chunks), m.Count, tt.wantChunks)
			}
			if m.Size != int64(tt.size) || m.SHA256 != SumOf(data) || m.ChunkSize != cs || m.WriteID != "w1" {
				t.Errorf("manifest %+v does not describe the data", m)
			}
			got, err := Join(m, chunks)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Error("Join(Split(data)) differs from data")
			}
		})
	}
}

func TestJoinRejectsTampering(t *testing.T) {
	data := randomBytes(3500, 7)
	m, good, err := Split(data, 1000, "w1")
	if err != nil {
		t.Fatal(err)
	}
	copyChunks := func() [][]byte {
		out := make([][]byte, len(good))
		for i, c := range good {
			out[i] = bytes.Clone(c)
		}
		return out
	}
	tests := []struct {
		name   string
		mutate func([][]byte) [][]byte
	}{
		{"flipped bit", func(c [][]byte) [][]byte { c[2][10] ^= 1; return c }},
		{"missing chunk", func(c [][]byte) [][]byte { return c[:3] }},
		{"extra chunk", func(c [][]byte) [][]byte { return append(c, []byte("x")) }},
		{"swapped chunks", func(c [][]byte) [][]byte { c[0], c[1] = c[1], c[0]; return c }},
		{"short chunk", func(c [][]byte) [][]byte { c[1] = c[1][:999]; return c }},
		{"long last chunk", func(c [][]byte) [][]byte { c[3] = append(c[3], 0); return c }},
		{"nil chunk", func(c [][]byte) [][]byte { c[0] = nil; return c }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Join(m, tt.mutate(copyChunks()))
			if !errors.Is(err, ErrChecksum) {
				t.Fatalf("got %v, want ErrChecksum", err)
			}
			var ce *ChecksumError
			if !errors.As(err, &ce) {
				t.Errorf("%v is not a *ChecksumError", err)
			}
			if got != nil {
				t.Error("Join returned data with a checksum error")
			}
		})
	}
	bad := m
	bad.SHA256[0] ^= 1
	if _, err := Join(bad, copyChunks()); !errors.Is(err, ErrChecksum) {
		t.Errorf("wrong manifest digest: got %v, want ErrChecksum", err)
	}
}

func TestManifestValidate(t *testing.T) {
	ok := Manifest{WriteID: "w", Count: 3, ChunkSize: 10, Size: 25}
	tests := []struct {
		name string
		m    Manifest
		ok   bool
	}{
		{"valid", ok, true},
		{"empty payload", Manifest{WriteID: "w", ChunkSize: 10}, true},
		{"no write id", Manifest{Count: 3, ChunkSize: 10, Size: 25}, false},
		{"zero chunk size", Manifest{WriteID: "w", Count: 3, Size: 25}, false},
		{"count too low", Manifest{WriteID: "w", Count: 2, ChunkSize: 10, Size: 25}, false},
		{"count too high", Manifest{WriteID: "w", Count: 4, ChunkSize: 10, Size: 25}, false},
		{"too many chunks", Manifest{WriteID: "w", Count: MaxChunks + 1, ChunkSize: 1, Size: MaxChunks + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %t", err, tt.ok)
			}
		})
	}
}

// Chunk keys are computed from the manifest: distinct, in order, in their
// own partitions, and never an object's key (object keys hold no '#').
func TestChunkKeys(t *testing.T) {
	m := Manifest{WriteID: "abc123", Count: 12, ChunkSize: 10, Size: 115}
	keys := m.ChunkKeys("docs/report.pdf")
	if len(keys) != 12 {
		t.Fatalf("got %d keys, want 12", len(keys))
	}
	if got, want := keys[3], (ItemKey{PK: "docs/report.pdf#abc123#00003", SK: "c"}); got != want {
		t.Errorf("key 3 = %+v, want %+v", got, want)
	}
	seen := map[ItemKey]bool{}
	for i, k := range keys {
		if seen[k] {
			t.Errorf("key %d %+v repeats", i, k)
		}
		seen[k] = true
		if k != m.ChunkKey("docs/report.pdf", i) {
			t.Errorf("ChunkKeys()[%d] != ChunkKey(%d)", i, i)
		}
		if k.SK == LatestSortKey || strings.HasPrefix(k.SK, VersionPrefix) {
			t.Errorf("chunk sort key %q is a version's: the chunk could be taken for object %q", k.SK, k.PK)
		}
		if strings.HasPrefix(k.SK, VersionPrefix) {
			t.Errorf("chunk sort key %q would be listed as a version", k.SK)
		}
	}
	other := Manifest{WriteID: "abc124", Count: 12, ChunkSize: 10, Size: 115}
	if other.ChunkKey("docs/report.pdf", 0) == keys[0] {
		t.Error("two writes share a chunk key")
	}
}

func ExampleManifest_ChunkKeys() {
	data := bytes.Repeat([]byte("ddbpipe "), 100) // 800 bytes
	m, chunks, _ := Split(data, 300, "9f2c")
	for i, k := range m.ChunkKeys("docs/a.txt") {
		fmt.Println(k.PK, k.SK, len(chunks[i]))
	}
	// Output:
	// docs/a.txt#9f2c#00000 c 300
	// docs/a.txt#9f2c#00001 c 300
	// docs/a.txt#9f2c#00002 c 200
}
