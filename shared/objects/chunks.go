package objects

import (
	"crypto/sha256"
	"fmt"
)

// Manifest describes a chunked payload: the stored bytes (the document,
// gzip-encoded if the record's codec says so) cut into Count chunks of
// ChunkSize bytes, the last one shorter. The chunk items' keys are computed
// from it (ChunkKeys), never listed, so a reader fetches all chunks in one
// parallel round.
type Manifest struct {
	WriteID   string
	Count     int
	ChunkSize int
	Size      int64 // of the stored bytes
	SHA256    Sum   // of the stored bytes
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
	}
	return nil
}

func chunkCount(size int64, chunkSize int) int {
	return int((size + int64(chunkSize) - 1) / int64(chunkSize))
}

// Split cuts stored bytes into chunks of chunkSize (the last one shorter;
// none for empty data) and returns their manifest. The chunks share data's
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
		want := int64(m.ChunkSize)
		if i == m.Count-1 {
			want = m.Size - int64(m.ChunkSize)*int64(m.Count-1)
		}
		if int64(len(c)) != want {
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
