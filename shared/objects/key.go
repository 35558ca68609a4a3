package objects

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Key and content-type limits.
const (
	// MaxKeyBytes is S3's key limit; DynamoDB allows 2,048 bytes of
	// partition key, which leaves room for a chunk's suffix.
	MaxKeyBytes = 1024
	// MaxContentTypeBytes bounds the stored media type (RFC 6838 allows
	// 127 characters for each of type and subtype).
	MaxContentTypeBytes = 255
	// DefaultContentType is what a document without one is stored as.
	DefaultContentType = "application/octet-stream"
)

// keyPunct are the punctuation characters a key may hold besides '/': the
// unreserved characters of RFC 3986 and S3's "safe" list, which need no
// escaping in a URL path segment, a shell word or an S3 key.
const keyPunct = "-_.~!*'()"

// ValidateKey checks an object key. A key is 1 to 1,024 bytes of UTF-8 made
// of letters and combining marks of any script, decimal digits, '/' as a
// separator, and the punctuation - _ . ~ ! * ' ( ). Segments between slashes
// are never empty (no leading '/', no "//", no trailing '/') and never "." or
// "..".
//
// Left out on purpose: space (invisible at the end, '+' or "%20" in URLs),
// '#' (the table's key separator, a URL fragment), '%', '?', '&', '=', '+',
// ':', '@', ',', ';', '$' and the quotes and brackets (each means something
// in URLs, shells or JSON), every control, format and private-use character
// (format characters include the bidirectional overrides used to disguise
// names), and dot segments (HTTP clients and proxies rewrite "a/../b" to "b").
//
// Some endings are reserved for the HTTP API's sub-resources, which share
// the greedy path /objects/{key+} with the key: a key's last segment is
// never "versions" or "uploads", and it never ends in "uploads/<id>" or
// "uploads/<id>/complete" where <id> has the form of an upload id
// (IsUploadID: lower-case letters and digits), so "photos/uploads/cat.png"
// is a key but "photos/uploads/cat" is not (ReasonKeyReserved).
//
// Keys are compared byte for byte, without Unicode normalization: "é" sent
// precomposed (NFC) and decomposed are two keys. Clients should send NFC.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return invalid(ReasonEmptyKey, "the key is empty")
	case len(key) > MaxKeyBytes:
		return invalid(ReasonKeyTooLong, "the key is %d bytes, the limit is %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return invalid(ReasonKeyNotUTF8, "the key is not valid UTF-8")
	case key[0] == '/':
		return invalid(ReasonKeyLeadingSlash, "the key starts with '/'")
	}
	if err := keyRunes(ReasonKeyBadChar, "key", key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return invalid(ReasonKeyEmptySegment, "the key has an empty segment (\"//\" or a trailing '/')")
		case ".", "..":
			return invalid(ReasonKeyDotSegment, "the key has a %q segment", seg)
		}
	}
	if suffix := reservedSuffix(key); suffix != "" {
		return invalid(ReasonKeyReserved, "the key ends in %q, which the API reserves for its sub-resources (versions, uploads)", suffix)
	}
	return nil
}

// keyRunes refuses (with reason) the first character of s, the key or a
// prefix of one (what), that no key may hold.
func keyRunes(reason Reason, what, s string) error {
	for i, r := range s {
		if !keyRune(r) {
			return invalid(reason, "the %s holds %U %s at byte %d; keys hold letters, digits, '/' and %s", what, r, quoteRune(r), i, keyPunct)
		}
	}
	return nil
}

// reservedSuffix returns the reserved ending of key, or "".
func reservedSuffix(key string) string {
	segs := strings.Split(key, "/")
	n := len(segs)
	at := func(i int) string { // i-th segment from the end, 1-based
		if i > n {
			return ""
		}
		return segs[n-i]
	}
	switch {
	case at(1) == "versions" || at(1) == "uploads":
		return at(1)
	case at(2) == "uploads" && IsUploadID(at(1)):
		return "uploads/" + at(1)
	case at(3) == "uploads" && at(1) == "complete" && IsUploadID(at(2)):
		return "uploads/" + at(2) + "/complete"
	}
	return ""
}

// IsUploadID reports whether s has the form of an upload id (a write id:
// 1 to 64 lower-case letters and digits). Only such a segment after
// "uploads" names an upload in a path.
func IsUploadID(s string) bool { return validWriteID(s) == nil }

func keyRune(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '/' || strings.ContainsRune(keyPunct, r)
	case r == utf8.RuneError:
		return false
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nd, r) || unicode.IsMark(r)
}

// quoteRune shows a rune in an error message only if it is printable.
func quoteRune(r rune) string {
	if unicode.IsPrint(r) {
		return fmt.Sprintf("%q", r)
	}
	return "(not printable)"
}

// NormalizeContentType checks a media type and returns it in canonical
// form (lowercase type and parameter names); "" becomes
// DefaultContentType.
func NormalizeContentType(ct string) (string, error) {
	if ct == "" {
		return DefaultContentType, nil
	}
	if len(ct) > MaxContentTypeBytes {
		return "", invalid(ReasonBadContentType, "the content type is %d bytes, the limit is %d", len(ct), MaxContentTypeBytes)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return "", invalid(ReasonBadContentType, "the content type %q is not a media type (type/subtype)", truncate(ct, 64))
	}
	out := mime.FormatMediaType(mt, params)
	if out == "" || len(out) > MaxContentTypeBytes {
		return "", invalid(ReasonBadContentType, "the content type %q cannot be stored", truncate(ct, 64))
	}
	return out, nil
}

// BlobKey is the bucket key of the blob a Put with writeID stores for key:
// blobs/<first 128 bits of sha256(key), hex>/<writeID>. See the package
// documentation for why it cannot collide.
func BlobKey(key, writeID string) string {
	h := sha256.Sum256([]byte(key))
	return BlobPrefix + hex.EncodeToString(h[:16]) + "/" + writeID
}

// BlobPrefix is the bucket prefix under which the store writes blobs (and
// the sweeper looks for orphans).
const BlobPrefix = "blobs/"

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
