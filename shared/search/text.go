package search

import (
	"bytes"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxText is the largest document whose text is indexed, in bytes.
// Larger text-like documents are indexed without their text (TextTooLarge):
// the index stays a fraction of the table, and a search result never
// carries megabytes.
const DefaultMaxText = 256 << 10

// TextLike reports whether a content type names text the index should
// read: text/*, JSON, XML, YAML and NDJSON, with or without parameters
// (charset). The words of every other type's key are still indexed.
func TextLike(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok {
		return false
	}
	switch {
	case typ == "text":
		return true
	case typ != "application":
		return false
	case strings.HasSuffix(sub, "+json"), strings.HasSuffix(sub, "+xml"):
		return true
	}
	switch sub {
	case "json", "xml", "yaml", "x-yaml", "x-ndjson", "ndjson", "csv", "markdown":
		return true
	}
	return false
}

// Text is the text of a text-like document of size bytes, as the index
// keeps it, and what it holds: the document when it is valid UTF-8 of at
// most max bytes; "" with the reason otherwise. A leading byte-order mark
// is dropped. The content is never parsed, so deeply nested JSON or XML
// costs what its bytes cost.
func Text(body []byte, max int) (string, TextState) {
	switch {
	case len(body) > max:
		return "", TextTooLarge
	case bytes.IndexByte(body, 0) >= 0:
		return "", TextBinary
	case !utf8.Valid(body):
		return "", TextUndecodable
	}
	return string(bytes.TrimPrefix(body, []byte("\ufeff"))), TextIndexed
}

// KeyWords is a key as words for the full-text field: its path segments,
// and the words inside each ("reports/2026-11/invoice_4711.pdf" is
// "reports 2026 11 invoice 4711 pdf"), so a search for a word finds the
// keys that hold it whatever separates it. The exact key is a field of its
// own (for exact and prefix filters).
func KeyWords(key string) string {
	var b strings.Builder
	word := false
	for _, r := range key {
		if isWordRune(r) {
			b.WriteRune(r)
			word = true
			continue
		}
		if word {
			b.WriteByte(' ')
			word = false
		}
	}
	return strings.TrimSpace(b.String())
}

func isWordRune(r rune) bool {
	// Letters and digits of every script; separators and symbols split.
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}
