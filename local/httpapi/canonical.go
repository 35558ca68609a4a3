package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// SigV4 canonicalization as API Gateway (execute-api) applies it to a
// request as it arrives, whatever client signed it:
//
//   - Path: the path as sent, percent-encoded once more, every byte but
//     A-Z a-z 0-9 - _ . ~ and / (so "%20" is "%2520" and a raw "(" is
//     "%28"): SigV4's "each path segment URI-encoded twice" for every
//     service but S3, which execute-api keeps (the canonical strings its
//     refusals quote: "/dev/%2540connections/…%253D" for a path sent as
//     "/dev/%40connections/…%3D", aws/aws-sdk-java#1987,
//     aws/aws-sdk-net#3132; "/_search/%253Fa%3Db%2520c" for
//     "/_search/%3Fa=b%20c", aws/aws-sdk-js#853). SigV4 also says to remove
//     "redundant and relative path components": botocore, the JS SDK v3
//     (@smithy/signature-v4) and aws4 drop "." and ".." segments and
//     repeated slashes before encoding, the Go SDK v2 signer does not. A
//     signature over either form is accepted here (see verifySigV4); a
//     refusal quotes the normalized one, as the specification writes it.
//   - Query: each parameter decoded as a form decodes it ("+" is a space)
//     and encoded again with the same unreserved set ("/" is "%2F", a space
//     "%20"), sorted by name then value; a name without "=" has the empty
//     value ("versions="), and empty pieces ("a=1&&b=2") are skipped.
//     API Gateway quotes "%24filter=id%20eq%20123" for a query sent as
//     "%24filter=id+eq+123" (zirkelc/aws-signature-v4#4); the query as
//     written is not what is signed (curl/curl#11794, aws-sdk-ruby#2035: a
//     "/" must be signed as "%2F").
//   - Headers: the signed headers, lower-cased and sorted, each value
//     trimmed, inner runs of spaces made one, repeated values joined with
//     ","; host is the Host header as received.
//   - Payload: the SHA-256 of the body as received.
//
// References: docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html
// and the reference_sigv-create-signed-request page it replaced.

// sigV4Request is what a signature covers, as received.
type sigV4Request struct {
	method      string
	rawPath     string // as sent, still percent-encoded
	rawQuery    string
	host        string
	header      http.Header
	length      int64 // the Content-Length received, -1 unknown
	payloadHash string
}

// requestTarget is r's path and query exactly as the client sent them. A
// request built in-process (no RequestURI) falls back to its URL.
func requestTarget(r *http.Request) (path, query string) {
	t := r.RequestURI
	switch {
	case strings.HasPrefix(t, "/"): // origin-form
	case strings.Contains(t, "://"): // absolute-form: drop scheme and authority
		_, rest, _ := strings.Cut(t, "://")
		i := strings.IndexAny(rest, "/?")
		if i < 0 {
			return "/", ""
		}
		t = rest[i:]
	default:
		return r.URL.EscapedPath(), r.URL.RawQuery
	}
	path, query, _ = strings.Cut(t, "?")
	if path == "" {
		path = "/"
	}
	return path, query
}

// canonicalURI is the canonical path; normalize removes "." and ".."
// segments and repeated slashes first.
func canonicalURI(rawPath string, normalize bool) string {
	p := rawPath
	if normalize {
		p = normalizePath(p)
	}
	if p == "" {
		p = "/"
	}
	return uriEncode(p, true)
}

// normalizePath removes dot segments and empty segments as botocore and
// @smithy/signature-v4 do, keeping a leading and a trailing slash.
func normalizePath(p string) string {
	var out []string
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	var b strings.Builder
	if strings.HasPrefix(p, "/") {
		b.WriteByte('/')
	}
	b.WriteString(strings.Join(out, "/"))
	if len(out) > 0 && strings.HasSuffix(p, "/") {
		b.WriteByte('/')
	}
	return b.String()
}

// canonicalQuery decodes each parameter of rawQuery and encodes it again,
// sorted by name then value.
func canonicalQuery(rawQuery string) string {
	type param struct{ k, v string }
	var ps []param
	for piece := range strings.SplitSeq(rawQuery, "&") {
		if piece == "" {
			continue
		}
		k, v, _ := strings.Cut(piece, "=")
		ps = append(ps, param{uriEncode(formDecode(k), false), uriEncode(formDecode(v), false)})
	}
	slices.SortFunc(ps, func(a, b param) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// formDecode decodes "+" to a space and %XX to its byte; a "%" that starts
// no valid escape stands for itself.
func formDecode(s string) string {
	if !strings.ContainsAny(s, "+%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			n, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(n))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// uriEncode is SigV4's UriEncode: every byte but A-Z a-z 0-9 - _ . ~ (and
// "/" when keepSlash) as %XX, upper-case.
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// canonicalRequest is the SigV4 canonical request over the signed headers
// (lower-case, sorted), with path as canonicalURI made it.
func (q *sigV4Request) canonicalRequest(path string, signed []string) string {
	var b strings.Builder
	b.WriteString(q.method + "\n" + path + "\n" + canonicalQuery(q.rawQuery) + "\n")
	for _, name := range signed {
		b.WriteString(name + ":" + q.headerValue(name) + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + q.payloadHash)
	return b.String()
}

// headerValue is a signed header's canonical value: trimmed, inner runs of
// spaces made one, repeated values joined with ",".
func (q *sigV4Request) headerValue(name string) string {
	var vs []string
	switch name {
	case "host":
		vs = []string{q.host}
	default:
		vs = slices.Clone(q.header.Values(name))
		if len(vs) == 0 && name == "content-length" && q.length >= 0 {
			vs = []string{strconv.FormatInt(q.length, 10)}
		}
	}
	for i, v := range vs {
		vs[i] = collapseSpaces(strings.TrimSpace(v))
	}
	return strings.Join(vs, ",")
}

// collapseSpaces makes each run of spaces one space.
func collapseSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && s[i-1] == ' ' {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// stringToSign is SigV4's string to sign for a canonical request.
func stringToSign(amzDate, scope, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
}

// signature is the hex HMAC-SHA256 of stringToSign under the key derived
// from secret for the scope's date, region and service.
func signature(secret, date, region, service, stringToSign string) string {
	key := []byte("AWS4" + secret)
	for _, part := range []string{date, region, service, "aws4_request", stringToSign} {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(part))
		key = m.Sum(nil)
	}
	return hex.EncodeToString(key)
}
