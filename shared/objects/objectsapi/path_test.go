package objectsapi_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

func TestEscapeKey(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"docs/2026/a.txt", "docs/2026/a.txt"},
		{"a-b_c.d~e", "a-b_c.d~e"},
		{"my file+1.txt", "my%20file%2B1.txt"},
		{"a?versions", "a%3Fversions"},
		{"a#1", "a%231"},
		{"%2F", "%252F"},
		{"é", "%C3%A9"},
		{"a\nb", "a%0Ab"},
		{"/", "%2F"},
		{"//", "%2F%2F"},
		{"/etc/passwd", "%2Fetc/passwd"},
		{"a/", "a%2F"},
		{"a//b/c", "a%2F%2Fb/c"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"a/../b/c", "a%2F%2E%2E%2Fb/c"},
		{"a/./b", "a%2F%2E%2Fb"},
		{"./", "%2E%2F"},
		{"...", "..."},
		{"a/.b/c.", "a/.b/c."},
		{"a/versions", "a/versions"},
	} {
		if got := objectsapi.EscapeKey(tt.key); got != tt.want {
			t.Errorf("EscapeKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// Every key of S3's rule makes a path that a URL parser reads back as the
// key, with no empty or dot segment for anything on the way to rewrite,
// and nothing but unreserved characters, '%' and '/'.
func TestEscapeKeyRoundTrips(t *testing.T) {
	for _, key := range objectstest.S3Keys(5000, 1) {
		p := objectsapi.KeyPath(key)
		u, err := url.Parse("https://api.example" + p + "?versions")
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		if got, ok := strings.CutPrefix(u.Path, "/objects/"); !ok || got != key {
			t.Fatalf("%q: the path reads back as %q", key, u.Path)
		}
		if u.EscapedPath() != p {
			t.Fatalf("%q: sent as %q, not %q", key, u.EscapedPath(), p)
		}
		var decoded []string
		for seg := range strings.SplitSeq(strings.TrimPrefix(p, "/objects/"), "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("%q: path %q holds segment %q", key, p, seg)
			}
			d, err := url.PathUnescape(seg)
			if err != nil {
				t.Fatal(err)
			}
			decoded = append(decoded, d)
		}
		if got := strings.Join(decoded, "/"); got != key {
			t.Fatalf("%q: segment by segment, the path reads back as %q", key, got)
		}
		if i := strings.IndexFunc(p, func(r rune) bool { return !strings.ContainsRune("%/-._~", r) && !isAlnum(r) }); i >= 0 {
			t.Fatalf("%q: path %q holds %q", key, p, p[i])
		}
	}
}

func isAlnum(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}

func TestUploadPath(t *testing.T) {
	if got, want := objectsapi.UploadPath("a b/versions", "abc123"), "/objects/a%20b/versions?uploadId=abc123"; got != want {
		t.Errorf("UploadPath = %q, want %q", got, want)
	}
}
