package objects

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want Reason // "" = valid
	}{
		{"plain", "report.pdf", ""},
		{"path", "docs/2026/q1/report.pdf", ""},
		{"Portuguese", "relatórios/ação.txt", ""},
		{"combining mark (NFD)", "cafe\u0301", ""},
		{"single character", "x", ""},
		{"exactly 1024 bytes", strings.Repeat("k", 1024), ""},
		{"1024 bytes of 2-byte letters", strings.Repeat("é", 512), ""},
		{"1024 bytes of 4-byte emoji", strings.Repeat("😀", 256), ""},
		{"space", "my file", ""},
		{"every ASCII punctuation mark", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", ""},
		{"leading slash", "/etc/passwd", ""},
		{"only slashes", "//", ""},
		{"double slash", "a//b", ""},
		{"trailing slash", "a/", ""},
		{"dot-dot segment", "a/../b", ""},
		{"dot-dot alone", "..", ""},
		{"dot segment", "a/./b", ""},
		{"ends in versions", "a/versions", ""},
		{"ends in uploads/<id>/complete", "a/uploads/abc/complete", ""},
		{"hash (the table's separator)", "a#w1#00000", ""},
		{"tab, newline, escape, DEL", "a\tb\nc\x1bd\x7f", ""},
		{"C1 control", "a\u0085b", ""},
		{"right-to-left override", "invoice\u202Efdp.exe", ""},
		{"encoded replacement character", "a\uFFFDb", ""},
		{"last code point", "\U0010FFFF", ""},
		{"empty", "", ReasonEmptyKey},
		{"1025 bytes", strings.Repeat("k", 1025), ReasonKeyTooLong},
		{"1025 bytes of slashes", strings.Repeat("/", 1025), ReasonKeyTooLong},
		{"invalid UTF-8", "a\xffb", ReasonKeyNotUTF8},
		{"truncated rune", "a\xc3", ReasonKeyNotUTF8},
		{"overlong encoding of '/'", "a\xc0\xafb", ReasonKeyNotUTF8},
		{"UTF-16 surrogate", "a\xed\xa0\x80b", ReasonKeyNotUTF8},
		{"NUL", "a\x00b", ReasonKeyBadChar},
		{"NUL alone", "\x00", ReasonKeyBadChar},
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

// A refusal names the byte and where it is, and never echoes it.
func TestValidateKeyNamesTheByte(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"a\x00b", "NUL (byte 0x00) at offset 1"},
		{"ab\xff", "byte 0xff at offset 2"},
		{"é\xc3", "byte 0xc3 at offset 2"},
	} {
		var ie *InvalidError
		if !errors.As(ValidateKey(tt.key), &ie) {
			t.Fatalf("%q: no InvalidError", tt.key)
		}
		if !strings.Contains(ie.Detail, tt.want) {
			t.Errorf("%q: detail %q does not say %q", tt.key, ie.Detail, tt.want)
		}
		if !utf8.ValidString(ie.Detail) || strings.ContainsRune(ie.Detail, 0) {
			t.Errorf("%q: detail %q echoes the key", tt.key, ie.Detail)
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
