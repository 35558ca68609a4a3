package objects

import (
	"strconv"
	"strings"
	"time"
)

// OrphansUnder is Orphans for the blobs under any prefix: those that no
// reference names and that were last written more than grace before
// markedAt. Orphans is OrphansUnder(BlobPrefix, …) with the grace of a
// Put (a blob and its commit within one invocation). Other writers of the
// bucket need a grace that covers the longest time between their blob's
// Last-Modified and its reference's commit, or something else that names
// the blob meanwhile (for a presigned multipart upload, Last-Modified is
// the time the upload started, and its intent item names the blob until
// no commit can come).
func OrphansUnder(prefix string, listed []BlobInfo, referenced func(blobKey string) bool, markedAt time.Time, grace time.Duration) []BlobInfo {
	var out []BlobInfo
	for _, b := range listed {
		if Orphan(b, prefix, referenced, markedAt, grace) {
			out = append(out, b)
		}
	}
	return out
}

// Orphan is OrphansUnder's rule for one blob (or one version of it, as a
// listing of a versioned bucket shows it).
func Orphan(b BlobInfo, prefix string, referenced func(blobKey string) bool, markedAt time.Time, grace time.Duration) bool {
	return strings.HasPrefix(b.Key, prefix) && b.LastModified.Before(markedAt.Add(-grace)) && !referenced(b.Key)
}

// ChunkOf is what a chunk item's partition key says: whose chunk it is.
type ChunkOf struct {
	Key     string // the object key
	WriteID string // the Put that wrote it
	Index   int
}

// ParseChunkKey reads a chunk item's partition key, <key>#<writeID>#<i>
// (see Manifest.ChunkKey). ok is false for anything else. The key may hold
// '#' itself; the write id and the index never do, so the key is what
// precedes the last two '#'.
func ParseChunkKey(pk string) (c ChunkOf, ok bool) {
	rest, index, found := cutLast(pk, "#")
	if !found || len(index) != 5 {
		return ChunkOf{}, false
	}
	key, writeID, found := cutLast(rest, "#")
	if !found || key == "" || validWriteID(writeID) != nil {
		return ChunkOf{}, false
	}
	for _, c := range index {
		if c < '0' || c > '9' {
			return ChunkOf{}, false
		}
	}
	i, _ := strconv.Atoi(index) // five digits
	return ChunkOf{Key: key, WriteID: writeID, Index: i}, true
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// References reports whether the manifest names chunk c of key.
func (m Manifest) References(key string, c ChunkOf) bool {
	return c.Key == key && c.WriteID == m.WriteID && c.Index < m.Count
}
