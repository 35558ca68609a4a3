package objects_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// FuzzValidateKey: a key is accepted or refused with a reason, never a
// panic; an accepted key keeps every promise ValidateKey documents, and
// its blob key stays under the blob prefix, one per (key, write id).
func FuzzValidateKey(f *testing.F) {
	for _, seed := range []string{"a", "photos/cat.png", "a/../b", "/x", "x//y", "x/", "é/ü", "a\u202eb", "k#1", "x/versions",
		"x/uploads/abc123", "x/uploads/abc123/complete", strings.Repeat("a", 1025), "\xff", ".", "a/./b", "~!*'()-_."} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := objects.ValidateKey(key)
		if err != nil {
			var ie *objects.InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("refused %q without a reason: %v", key, err)
			}
			return
		}
		switch {
		case key == "" || len(key) > objects.MaxKeyBytes || !utf8.ValidString(key):
			t.Fatalf("accepted %q: empty, too long or not UTF-8", key)
		case strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.Contains(key, "//"):
			t.Fatalf("accepted %q: empty segment", key)
		case strings.ContainsAny(key, " #%?&=+:@,;$\"<>[]{}\\|^`\x00\n\r\t"):
			t.Fatalf("accepted %q: a character keys never hold", key)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("accepted %q: dot segment", key)
			}
		}
		if last := key[strings.LastIndex(key, "/")+1:]; last == "versions" || last == "uploads" {
			t.Fatalf("accepted %q: a reserved last segment", key)
		}
		a, b := objects.BlobKey(key, "w1"), objects.BlobKey(key, "w2")
		if a == b || a != objects.BlobKey(key, "w1") || !strings.HasPrefix(a, objects.BlobPrefix) || strings.Contains(a[len(objects.BlobPrefix):], "..") {
			t.Fatalf("blob keys of %q: %q and %q", key, a, b)
		}
	})
}
