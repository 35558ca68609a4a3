package objects

import (
	"strings"
	"time"
)

// BlobInfo is a blob as a bucket listing shows it.
type BlobInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// Orphans returns the listed blobs the sweeper may delete: those under
// BlobPrefix that no reference names and that were last written more than
// grace before markedAt, the time the references were read.
//
// Why this is safe: a Put writes its blob and then commits the reference
// within one invocation, so within the function's timeout. A blob written
// more than grace (longer than any timeout) before the references were read
// either had its reference committed before that read began, and the read
// sees it (a reference is removed only with its version, and then its blob
// is garbage anyway), or never will have one. Blobs written later, or
// outside BlobPrefix (presigned uploads waiting to be finalized), are left.
func Orphans(listed []BlobInfo, referenced func(blobKey string) bool, markedAt time.Time, grace time.Duration) []BlobInfo {
	cutoff := markedAt.Add(-grace)
	var out []BlobInfo
	for _, b := range listed {
		if strings.HasPrefix(b.Key, BlobPrefix) && b.LastModified.Before(cutoff) && !referenced(b.Key) {
			out = append(out, b)
		}
	}
	return out
}
