package objects

import (
	"crypto/sha256"
	"fmt"
	"slices"
)

// Manifest describes a chunked payload: the stored bytes (the document,
// gzip-encoded if the record's codec says so) cut into Count chunks of
// ChunkSize bytes, the last one shorter. The chunk items' keys are computed
// from it (ChunkKeys), never listed, so a reader fetches all chunks in one
// parallel round, or only the chunks a range needs (ChunkSpan).
type Manifest struct {
	WriteID   string
	Count     int
	ChunkSize int
	Size      int64 // of the stored bytes
	SHA256    Sum   // of the stored bytes
	// Sums are the SHA-256 of each chunk, in order, so that a chunk read
	// alone is verified (CheckChunk). Split records them for manifests of
	// up to MaxChunkSums chunks; a manifest without them (written before
	// they were kept, or too long) is verified whole only.
	Sums []Sum
}

// Equal reports whether m and o describe the same chunks (a nil and an
// empty Sums are the same).
func (m Manifest) Equal(o Manifest) bool {
	return m.WriteID == o.WriteID && m.Count == o.Count && m.ChunkSize == o.ChunkSize &&
		m.Size == o.Size && m.SHA256 == o.SHA256 && slices.Equal(m.Sums, o.Sums)
}

// MaxChunkSums bounds the per-chunk digests a manifest keeps: 32 bytes
// each, in both version items of a write (v0 and vN), so at most 32 KiB of
// each item. The default policy makes at most 64 chunks (16 MiB in chunks
// of 256 KiB).
const MaxChunkSums = 1024

// ChunkSumsSize is the bytes the per-chunk digests of a manifest of count
// chunks take in its item (0 when Split does not keep them).
func ChunkSumsSize(count int) int {
	if count > MaxChunkSums {
		return 0
	}
	return count * len(Sum{})
}

// HasSums reports whether each chunk can be verified alone.
func (m Manifest) HasSums() bool { return m.Count > 0 && len(m.Sums) == m.Count }

// ChunkLen is the length of chunk i (the last one may be shorter).
func (m Manifest) ChunkLen(i int) int64 {
	if i == m.Count-1 {
		return m.Size - int64(m.ChunkSize)*int64(m.Count-1)
	}
	return int64(m.ChunkSize)
}

// ChunkSpan returns the chunks [from, to) that hold the stored bytes r, a
// range within m.Size; an empty range needs none (from == to).
func (m Manifest) ChunkSpan(r Range) (from, to int) {
	if r.Len() <= 0 {
		return 0, 0
	}
	cs := int64(m.ChunkSize)
	return int(r.Start / cs), int((r.End + cs - 1) / cs)
}

// CheckChunk verifies chunk i read alone: its length, and its SHA-256
// against Sums (HasSums must be true). A mismatch is a *ChecksumError.
func (m Manifest) CheckChunk(i int, c []byte) error {
	what := fmt.Sprintf("chunks of write %s: chunk %d", m.WriteID, i)
	if i < 0 || i >= m.Count || !m.HasSums() {
		return fmt.Errorf("objects: %s: the manifest has no digest for it", what)
	}
	if want := m.ChunkLen(i); int64(len(c)) != want {
		return &ChecksumError{What: what, WantSize: want, GotSize: int64(len(c))}
	}
	if got := SumOf(c); got != m.Sums[i] {
		return &ChecksumError{What: what, WantSize: int64(len(c)), GotSize: int64(len(c)), Want: m.Sums[i], Got: got}
	}
	return nil
}

// ChunkSortKey is the sort key of every chunk item.
const ChunkSortKey = "c"

// ItemKey is a table item's primary key.
type ItemKey struct{ PK, SK string }

// ChunkKey returns the key of chunk i of the payload m describes, stored for
// object key: pk <key>#<writeID>#<i, five digits>, sk "c".
func (m Manifest) ChunkKey(key string, i int) ItemKey {
	return ItemKey{PK: fmt.Sprintf("%s#%s#%05d", key, m.WriteID, i), SK: ChunkSortKey}
}

// ChunkKeys returns the keys of all the chunks, in order.
func (m Manifest) ChunkKeys(key string) []ItemKey {
	keys := make([]ItemKey, m.Count)
	for i := range keys {
		keys[i] = m.ChunkKey(key, i)
	}
	return keys
}

// MaxChunks bounds a manifest (five digits in the chunk key).
const MaxChunks = 99_999

// Validate checks that a manifest is consistent with itself.
func (m Manifest) Validate() error {
	switch {
	case m.WriteID == "":
		return fmt.Errorf("objects: manifest has no write id")
	case m.ChunkSize <= 0:
		return fmt.Errorf("objects: manifest chunk size %d", m.ChunkSize)
	case m.Count < 0 || m.Count > MaxChunks:
		return fmt.Errorf("objects: manifest has %d chunks, the limit is %d", m.Count, MaxChunks)
	case m.Count != chunkCount(m.Size, m.ChunkSize):
		return fmt.Errorf("objects: manifest of %d bytes in chunks of %d has %d chunks, want %d", m.Size, m.ChunkSize, m.Count, chunkCount(m.Size, m.ChunkSize))
	case len(m.Sums) != 0 && len(m.Sums) != m.Count:
		return fmt.Errorf("objects: manifest of %d chunks has %d chunk digests", m.Count, len(m.Sums))
	}
	return nil
}

func chunkCount(size int64, chunkSize int) int {
	return int((size + int64(chunkSize) - 1) / int64(chunkSize))
}

// Split cuts stored bytes into chunks of chunkSize (the last one shorter;
// none for empty data) and returns their manifest, with each chunk's
// SHA-256 when there are at most MaxChunkSums. The chunks share data's
// memory.
func Split(data []byte, chunkSize int, writeID string) (Manifest, [][]byte, error) {
	m := Manifest{WriteID: writeID, ChunkSize: chunkSize, Size: int64(len(data)), SHA256: SumOf(data)}
	if chunkSize <= 0 {
		return m, nil, fmt.Errorf("objects: split: chunk size %d", chunkSize)
	}
	m.Count = chunkCount(m.Size, chunkSize)
	if err := m.Validate(); err != nil {
		return m, nil, err
	}
	chunks := make([][]byte, 0, m.Count)
	for off := 0; off < len(data); off += chunkSize {
		chunks = append(chunks, data[off:min(off+chunkSize, len(data))])
	}
	if m.Count > 0 && m.Count <= MaxChunkSums {
		m.Sums = make([]Sum, m.Count)
		for i, c := range chunks {
			m.Sums[i] = SumOf(c)
		}
	}
	return m, chunks, nil
}

// Join puts chunks back together and verifies them against the manifest: a
// wrong number of chunks, a chunk of the wrong length, or a digest that
// differs is a *ChecksumError, and no data is returned with it.
func Join(m Manifest, chunks [][]byte) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("chunks of write %s", m.WriteID)
	if len(chunks) != m.Count {
		return nil, &ChecksumError{What: what, Detail: fmt.Sprintf("%d chunks, the manifest says %d", len(chunks), m.Count)}
	}
	for i, c := range chunks {
		if m.HasSums() {
			if err := m.CheckChunk(i, c); err != nil {
				return nil, err
			}
			continue
		}
		if want := m.ChunkLen(i); int64(len(c)) != want {
			return nil, &ChecksumError{What: fmt.Sprintf("%s: chunk %d", what, i), WantSize: want, GotSize: int64(len(c))}
		}
	}
	data := make([]byte, 0, m.Size)
	h := sha256.New()
	for _, c := range chunks {
		data = append(data, c...)
		h.Write(c)
	}
	var got Sum
	h.Sum(got[:0])
	if got != m.SHA256 {
		return nil, &ChecksumError{What: what, WantSize: m.Size, GotSize: m.Size, Want: m.SHA256, Got: got}
	}
	return data, nil
}
