package objects

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want Reason // "" = valid
	}{
		{"plain", "report.pdf", ""},
		{"path", "docs/2026/q1/report.pdf", ""},
		{"every allowed punctuation", "a-b_c.d~e!f*g'h(i)j", ""},
		{"Portuguese", "relatórios/ação.txt", ""},
		{"Russian", "документы/отчёт-1", ""},
		{"CJK", "文書/報告", ""},
		{"combining mark (NFD)", "cafe\u0301", ""},
		{"Arabic-Indic digits", "٣٤٥", ""},
		{"single character", "x", ""},
		{"dots inside a segment", "a..b/.hidden/c.", ""},
		{"exactly 1024 bytes", strings.Repeat("k", 1024), ""},
		{"1024 bytes of 2-byte letters", strings.Repeat("é", 512), ""},
		{"empty", "", ReasonEmptyKey},
		{"1025 bytes", strings.Repeat("k", 1025), ReasonKeyTooLong},
		{"invalid UTF-8", "a\xffb", ReasonKeyNotUTF8},
		{"truncated rune", "a\xc3", ReasonKeyNotUTF8},
		{"leading slash", "/etc/passwd", ReasonKeyLeadingSlash},
		{"double slash", "a//b", ReasonKeyEmptySegment},
		{"trailing slash", "a/", ReasonKeyEmptySegment},
		{"dot-dot segment", "a/../b", ReasonKeyDotSegment},
		{"dot-dot alone", "..", ReasonKeyDotSegment},
		{"dot segment", "a/./b", ReasonKeyDotSegment},
		{"trailing dot segment", "a/.", ReasonKeyDotSegment},
		{"space", "my file", ReasonKeyBadChar},
		{"hash (key separator)", "a#b", ReasonKeyBadChar},
		{"percent", "a%2Fb", ReasonKeyBadChar},
		{"question mark", "a?b", ReasonKeyBadChar},
		{"backslash", `a\b`, ReasonKeyBadChar},
		{"NUL", "a\x00b", ReasonKeyBadChar},
		{"newline", "a\nb", ReasonKeyBadChar},
		{"DEL", "a\x7fb", ReasonKeyBadChar},
		{"C1 control", "a\u0085b", ReasonKeyBadChar},
		{"right-to-left override", "invoice\u202Efdp.exe", ReasonKeyBadChar},
		{"zero-width space", "a\u200Bb", ReasonKeyBadChar},
		{"no-break space", "a\u00A0b", ReasonKeyBadChar},
		{"private use", "a\uE000b", ReasonKeyBadChar},
		{"encoded replacement character", "a\uFFFDb", ReasonKeyBadChar},
		{"emoji", "a😀b", ReasonKeyBadChar},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
			if tt.want != "" {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
				}
				if !strings.HasPrefix(err.Error(), "objects: invalid ("+string(tt.want)+"): ") {
					t.Errorf("message %q does not name the reason", err)
				}
			}
		})
	}
}

// A rejected key's detail never echoes unprintable characters to the client.
func TestValidateKeyDetailIsPrintable(t *testing.T) {
	for _, key := range []string{"a\x00b", "a\u202Eb", "a\x1bb"} {
		var ie *InvalidError
		if !errors.As(ValidateKey(key), &ie) {
			t.Fatalf("%q: no InvalidError", key)
		}
		for _, r := range ie.Detail {
			if r < 0x20 || r == 0x7f || r == 0x202E {
				t.Errorf("%q: detail %q holds %U", key, ie.Detail, r)
			}
		}
	}
}

func TestNormalizeContentType(t *testing.T) {
	tests := []struct {
		name, in, want string
		reason         Reason
	}{
		{"empty is the default", "", DefaultContentType, ""},
		{"plain", "text/plain", "text/plain", ""},
		{"case folded, parameters kept", "Text/HTML; Charset=UTF-8", "text/html; charset=UTF-8", ""},
		{"vendor type", "application/vnd.ddbpipe+json", "application/vnd.ddbpipe+json", ""},
		{"no subtype", "text", "", ReasonBadContentType},
		{"garbage", "not a type", "", ReasonBadContentType},
		{"bad parameter", "text/plain; =x", "", ReasonBadContentType},
		{"too long", "text/" + strings.Repeat("x", 300), "", ReasonBadContentType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeContentType(tt.in)
			if r := ReasonOf(err); r != tt.reason {
				t.Fatalf("reason %q (%v), want %q", r, err, tt.reason)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBlobKey(t *testing.T) {
	shape := regexp.MustCompile(`^blobs/[0-9a-f]{32}/[0-9a-z]+$`)
	long := strings.Repeat("é", 512)
	tests := []struct{ name, key, writeID string }{
		{"short", "a", "0123abcd"},
		{"path", "docs/report.pdf", "ffff"},
		{"longest key", long, RandomID()},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BlobKey(tt.key, tt.writeID)
			if !shape.MatchString(got) {
				t.Errorf("BlobKey = %q, want blobs/<32 hex>/<write id>", got)
			}
			if len(got) > 6+32+1+64 {
				t.Errorf("BlobKey is %d bytes", len(got))
			}
			if again := BlobKey(tt.key, tt.writeID); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
			if seen[got] {
				t.Errorf("%q collides", got)
			}
			seen[got] = true
		})
	}
	if BlobKey("a", "1") == BlobKey("a", "2") || BlobKey("a", "1") == BlobKey("b", "1") {
		t.Error("different keys or write ids give the same blob key")
	}
}
