package objects_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// FuzzValidateKey: a key is accepted or refused with a reason, never a
// panic; a key is accepted exactly when S3's rule (1 to 1,024 bytes of
// UTF-8) and ours (no NUL) take it, and its blob key stays under the blob
// prefix, one per (key, write id).
func FuzzValidateKey(f *testing.F) {
	for _, seed := range []string{"a", "photos/cat.png", "a/../b", "/x", "x//y", "x/", "é/ü", "a\u202eb", "k#1", "x/versions",
		"x/uploads/abc123", "x/uploads/abc123/complete", strings.Repeat("a", 1025), "\xff", ".", "a/./b", "~!*'()-_.", "a\x00", "\xed\xa0\x80"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := objects.ValidateKey(key)
		s3 := key != "" && len(key) <= objects.MaxKeyBytes && utf8.ValidString(key) && !strings.ContainsRune(key, 0)
		if err != nil {
			var ie *objects.InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("refused %q without a reason: %v", key, err)
			}
			if s3 {
				t.Fatalf("refused %q, a key of S3's rule: %v", key, err)
			}
			return
		}
		if !s3 {
			t.Fatalf("accepted %q: empty, too long, not UTF-8 or holding NUL", key)
		}
		a, b := objects.BlobKey(key, "w1"), objects.BlobKey(key, "w2")
		if a == b || a != objects.BlobKey(key, "w1") || !strings.HasPrefix(a, objects.BlobPrefix) || strings.Contains(a[len(objects.BlobPrefix):], "..") {
			t.Fatalf("blob keys of %q: %q and %q", key, a, b)
		}
	})
}

// FuzzRange: any Range header is honoured, ignored or refused with a
// reason, never a panic; a range it resolves to lies within the document,
// is not empty, and its chunks (ChunkSpan) hold it.
func FuzzRange(f *testing.F) {
	for _, seed := range []string{"bytes=0-0", "bytes=5-", "bytes=-3", "bytes=0-1,2-3", "bytes=9-2", "items=1-2", "bytes=", "bytes=-0",
		"bytes=99999999999999999999-", "bytes=0-99999999999999999999", "bytes=,,1-2", "=", "bytes 1-2", "bytes=-"} {
		f.Add(seed, int64(100), 7)
	}
	f.Fuzz(func(t *testing.T, h string, size int64, chunkSize int) {
		if size < 0 || size > 1<<40 || chunkSize <= 0 {
			return
		}
		spec, ok, err := objects.ParseRange(h)
		if err != nil {
			if objects.ReasonOf(err) == "" {
				t.Fatalf("refused %q without a reason: %v", h, err)
			}
			return
		}
		if !ok {
			return
		}
		r, partial, err := spec.Resolve(size)
		if err != nil {
			if objects.ReasonOf(err) != objects.ReasonRangeNotSatisfiable {
				t.Fatalf("Resolve(%d) of %q: %v", size, h, err)
			}
			return
		}
		if !partial {
			if size != 0 {
				t.Fatalf("Resolve(%d) of %q: the whole document for a non-empty one", size, h)
			}
			return
		}
		if r.Start < 0 || r.End > size || r.Len() <= 0 {
			t.Fatalf("Resolve(%d) of %q = %+v: not a non-empty range of the document", size, h, r)
		}
		m := objects.Manifest{WriteID: "w", ChunkSize: chunkSize, Size: size, Count: int((size + int64(chunkSize) - 1) / int64(chunkSize))}
		from, to := m.ChunkSpan(r)
		if from < 0 || to > m.Count || int64(from)*int64(chunkSize) > r.Start || int64(to)*int64(chunkSize) < r.End || to-from < 1 {
			t.Fatalf("ChunkSpan(%+v) of %d bytes in chunks of %d = [%d, %d): does not hold the range", r, size, chunkSize, from, to)
		}
	})
}
