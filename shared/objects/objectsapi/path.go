package objectsapi

import (
	"net/url"
	"strings"
)

// Query parameters that name a key's sub-resources, as S3's do.
const (
	QueryVersions = "versions" // GET /objects/{key}?versions
	QueryUploads  = "uploads"  // POST /objects/{key}?uploads
	QueryUploadID = "uploadId" // GET (status) and POST (complete) /objects/{key}?uploadId=ID
)

// KeyPath is the path of key's resource, "/objects/" and EscapeKey(key).
func KeyPath(key string) string { return "/objects/" + EscapeKey(key) }

// UploadPath is the path and query of an upload of key: its status (GET)
// and its completion (POST).
func UploadPath(key, id string) string {
	return KeyPath(key) + "?" + url.Values{QueryUploadID: {id}}.Encode()
}

// EscapeKey writes a key for a URL path so that every byte of it reaches
// the API as it is, through clients, proxies and SigV4's canonical path
// (which, for API Gateway, removes "." and ".." segments and empty ones):
//
//   - each byte but the unreserved characters of RFC 3986 (A-Z a-z 0-9
//   - . _ ~) is percent-encoded, '+' and space included (%2B, %20);
//   - a '/' stays a '/' between two segments that are neither empty nor
//     "." nor "..", the common case ("docs/2026/a.txt" is written as it
//     is); any other '/' is %2F, and the dots of a "." or ".." segment are
//     %2E, so the path never holds an empty or dot segment.
//
// API Gateway decodes the path parameter, %2F included, so the key the
// API reads is the key sent. url.PathEscape per segment would not do: it
// leaves "." and ".." segments and empty segments for something on the
// way to rewrite.
func EscapeKey(key string) string {
	segs := strings.Split(key, "/")
	var b strings.Builder
	b.Grow(len(key) * 3)
	for i, s := range segs {
		if i > 0 {
			if plainSegment(segs[i-1]) && plainSegment(s) {
				b.WriteByte('/')
			} else {
				b.WriteString("%2F")
			}
		}
		if !plainSegment(s) {
			b.WriteString(strings.Repeat("%2E", len(s))) // "", "." or ".."
			continue
		}
		for j := 0; j < len(s); j++ {
			c := s[j]
			if unreserved(c) {
				b.WriteByte(c)
				continue
			}
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// plainSegment: a segment that a path may carry between literal slashes.
func plainSegment(s string) bool { return s != "" && s != "." && s != ".." }

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
