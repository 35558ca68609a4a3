package objects

import (
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"strings"
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

// ValidateKey checks an object key. A key is what S3 takes: 1 to 1,024
// bytes of UTF-8, any of them, with one exception: NUL (U+0000), which C
// strings, many shells and file systems end a string at, so it cannot
// round-trip through every client. Spaces, every punctuation mark, leading,
// trailing and repeated '/', "." and ".." segments, and keys ending in
// "versions" or "uploads" are keys like any other: a key is an opaque
// string, '/' means something only to a listing's delimiter, and the API
// carries sub-resources in the query (objectsapi).
//
// The other control characters (tab, newline, DEL, U+0080 to U+009F, …) are
// keys' bytes too: JSON escapes them (\u0001), a URL percent-encodes them,
// and DynamoDB and the listing order take them as any other byte. Clients
// that show keys to people should quote them (strconv.Quote, %q).
//
// Keys are compared byte for byte, without Unicode normalization: "é" sent
// precomposed (NFC) and decomposed are two keys. Clients should send NFC.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return invalid(ReasonEmptyKey, "the key is empty")
	case len(key) > MaxKeyBytes:
		return invalid(ReasonKeyTooLong, "the key is %d bytes, the limit is %d", len(key), MaxKeyBytes)
	}
	return keyBytes(ReasonKeyNotUTF8, ReasonKeyBadChar, "key", key)
}

// keyBytes refuses s, a key or a prefix of one (what), if it is not UTF-8
// (notUTF8) or holds NUL (nul), naming the first offending byte and where
// it is.
func keyBytes(notUTF8, nul Reason, what, s string) error {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return invalid(notUTF8, "the %s is not valid UTF-8: byte 0x%02x at offset %d does not start a character there", what, s[i], i)
		case r == 0:
			return invalid(nul, "the %s holds NUL (byte 0x00) at offset %d; a key may hold any UTF-8 character but NUL", what, i)
		}
		i += n
	}
	return nil
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
