package objectstest

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// KeysVar sizes the key round trips: unset, each runs the OddKeys
// (`make test`); "full", the count each test names, 1,000 and more, the
// rest random keys of 1 to 1,024 bytes (`make keys`).
const KeysVar = "DDBPIPE_KEYS"

// KeyCount is how many keys a round trip of full keys runs (KeysVar).
func KeyCount(full int) int {
	if os.Getenv(KeysVar) == "full" {
		return full
	}
	return min(full, len(OddKeys()))
}

// OddKeys are keys S3 takes that URLs, shells, paths and our own item keys
// make awkward: every one must round-trip like "report.pdf".
func OddKeys() []string {
	punct := `!"#$%&'()*+,-./:;<=>?@[\]^_` + "`{|}~"
	keys := []string{
		"x", " ", "my file.txt", " leading and trailing space ", "tab\there", "line\nbreak", "cr\rlf\n",
		"/", "//", "///", "/leading", "trailing/", "a//b", "a///b/", "//a//",
		".", "..", "...", "./a", "../a", "a/.", "a/..", "a/./b", "a/../b", "/../etc/passwd", "./", "../",
		"versions", "uploads", "a/versions", "a/uploads", "a/uploads/abc123", "a/uploads/abc123/complete",
		"a?versions", "a?uploads", "?", "a?b=c&d=e", "a#b", "#", "##", "a#", "%", "%2F", "a%2Fb", "%00", "a%20b", "+", "a+b", "a b+c",
		"a;b,c", "a\\b", "C:\\Windows\\path", "~user", "a=b", "a&b", "@", "a:b", "$HOME", "`cmd`", "'quoted'", `"quoted"`,
		"<tag>", "{json}", "[x]", "a|b", "a^b", "*", "a*b?c",
		"\x01", "\x1f", "\x7f", "a\x1bb", "\u0085", "\u00a0", "\u200b", "\u202eexe.txt", "\ufeffbom", "\ufffd", "\U0010ffff", "\uffff",
		"😀", "a😀b/😀", "日本/東京.txt", "cafe\u0301", "café", "zürich/ä.txt",
		// '#' separates the parts of the table's item keys: each of these
		// is its own object, never a chunk, upload or shared blob's item.
		"a", "a#1", "a#00001", "a#w1#00000", "a#b#c#00000", "upload#abc", "upload#abc#u", "blob#" + strings.Repeat("0", 64) + "-1",
		"r#x", "v0", "c", "h", "u",
		strings.Repeat("k", objects.MaxKeyBytes), strings.Repeat("/", objects.MaxKeyBytes), strings.Repeat(".", objects.MaxKeyBytes),
		strings.Repeat("é", objects.MaxKeyBytes/2), strings.Repeat("😀", objects.MaxKeyBytes/4), strings.Repeat("k", objects.MaxKeyBytes-1) + "/",
		strings.Repeat("%", objects.MaxKeyBytes), strings.Repeat("#", objects.MaxKeyBytes), strings.Repeat(" ", objects.MaxKeyBytes),
	}
	for _, c := range punct {
		keys = append(keys, string(c), "k"+string(c), string(c)+"k", "a"+string(c)+"b/"+string(c))
	}
	keys = append(keys, punct, "p/"+punct+"/q")
	return unique(keys)
}

// S3Keys returns n distinct keys drawn from S3's rule, OddKeys first: each
// 1 to 1,024 bytes of UTF-8 without NUL, the same for the same seed. The
// random ones mix ASCII (punctuation, '/', '.', controls) with two-, three-
// and four-byte characters, in lengths from 1 byte to the limit.
func S3Keys(n int, seed uint64) []string {
	keys := OddKeys()
	if len(keys) >= n {
		return keys[:n]
	}
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for len(keys) < n {
		k := randomKey(r)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// randomKey is one key of S3's rule.
func randomKey(r *rand.Rand) string {
	var limit int
	switch r.IntN(4) {
	case 0:
		limit = 1 + r.IntN(8)
	case 1:
		limit = 1 + r.IntN(64)
	case 2:
		limit = 1 + r.IntN(objects.MaxKeyBytes)
	default:
		limit = objects.MaxKeyBytes - r.IntN(8)
	}
	var b strings.Builder
	for {
		c := randomRune(r)
		if b.Len()+utf8.RuneLen(c) > limit {
			break
		}
		b.WriteRune(c)
	}
	if b.Len() == 0 {
		return string(rune('a' + r.IntN(26)))
	}
	return b.String()
}

func randomRune(r *rand.Rand) rune {
	switch n := r.IntN(100); {
	case n < 25:
		return rune("/././..//"[r.IntN(9)])
	case n < 55:
		return rune(0x20 + r.IntN(0x5f)) // printable ASCII, punctuation included
	case n < 60:
		return rune(1 + r.IntN(0x1f)) // controls but NUL
	case n < 62:
		return 0x7f
	case n < 80:
		return rune(0x80 + r.IntN(0x800-0x80)) // two bytes (C1 controls included)
	case n < 93:
		for {
			c := rune(0x800 + r.IntN(0x10000-0x800)) // three bytes, no surrogate
			if !(0xd800 <= c && c <= 0xdfff) {
				return c
			}
		}
	default:
		return rune(0x10000 + r.IntN(0x110000-0x10000)) // four bytes
	}
}

func unique(keys []string) []string {
	out := keys[:0]
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return slices.Clip(out)
}
