package search

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of a search request.
const (
	DefaultLimit  = 20
	MaxLimit      = 100
	MaxQueryBytes = 1024  // of the words, as sent
	MaxWords      = 32    // words in a query
	MaxDepth      = 10000 // hits a query can page through (OpenSearch's max_result_window)
	maxPrefix     = 1024  // bytes: an object key's limit
)

// Query is a search request. Every field is optional; an empty query finds
// every document, newest first.
type Query struct {
	// Words are matched against the key's words and the text, all of them
	// (AND). Only letters and digits count: punctuation, operators and
	// wildcards separate words and are never passed on as syntax.
	Words string
	// ContentType is an exact type ("application/pdf") or a family
	// ("text/*"), without parameters.
	ContentType string
	MinSize     int64 // bytes, inclusive; 0: none
	MaxSize     int64 // bytes, inclusive; 0: none
	Since       time.Time
	Until       time.Time
	Prefix      string // of the key, exact
	Limit       int    // hits per page: 1 to MaxLimit (0: DefaultLimit)
	Cursor      string // from the previous page's Next
	// Fresh checks every hit against the table and drops the ones whose
	// key was deleted or written again since it was indexed.
	Fresh bool
}

// Plan is a validated Query, as an index adapter runs it.
type Plan struct {
	Terms       []string // the words, as words
	ContentType string   // exact type, or "type/" for a family
	Family      bool
	MinSize     int64
	MaxSize     int64
	Since       time.Time
	Until       time.Time
	Prefix      string
	Offset      int
	Limit       int
}

// Plan validates q and returns what the index runs. Refusals are
// *InvalidError.
func (q Query) Plan() (Plan, error) {
	p := Plan{MinSize: q.MinSize, MaxSize: q.MaxSize, Since: q.Since.UTC(), Until: q.Until.UTC(), Limit: q.Limit}
	var err error
	if p.Terms, err = terms(q.Words); err != nil {
		return Plan{}, err
	}
	if p.ContentType, p.Family, err = contentType(q.ContentType); err != nil {
		return Plan{}, err
	}
	switch {
	case q.MinSize < 0 || q.MaxSize < 0:
		return Plan{}, invalid(ReasonBadSize, "sizes are bytes, 0 or more")
	case q.MaxSize > 0 && q.MaxSize < q.MinSize:
		return Plan{}, invalid(ReasonBadSize, "the largest size %d is below the smallest %d", q.MaxSize, q.MinSize)
	case !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since):
		return Plan{}, invalid(ReasonBadTime, "until %s is before since %s", p.Until.Format(time.RFC3339), p.Since.Format(time.RFC3339))
	case len(q.Prefix) > maxPrefix || !utf8.ValidString(q.Prefix):
		return Plan{}, invalid(ReasonBadPrefix, "a key prefix is at most %d bytes of UTF-8", maxPrefix)
	case q.Limit < 0 || q.Limit > MaxLimit:
		return Plan{}, invalid(ReasonBadLimit, "limit %d: want 1 to %d", q.Limit, MaxLimit)
	}
	p.Prefix = q.Prefix
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	}
	if p.Offset, err = q.offset(); err != nil {
		return Plan{}, err
	}
	if p.Offset+p.Limit > MaxDepth {
		return Plan{}, invalid(ReasonBadCursor, "a search pages through its first %d hits only; narrow the query", MaxDepth)
	}
	return p, nil
}

// terms splits words into letters-and-digits words, lowercased.
func terms(words string) ([]string, error) {
	if len(words) > MaxQueryBytes {
		return nil, invalid(ReasonBadQuery, "the query is %d bytes; at most %d", len(words), MaxQueryBytes)
	}
	if !utf8.ValidString(words) {
		return nil, invalid(ReasonBadQuery, "the query is not UTF-8")
	}
	out := strings.Fields(strings.ToLower(KeyWords(words)))
	if len(out) > MaxWords {
		return nil, invalid(ReasonBadQuery, "the query has %d words; at most %d", len(out), MaxWords)
	}
	if strings.TrimSpace(words) != "" && len(out) == 0 {
		return nil, invalid(ReasonBadQuery, "the query %q has no letters or digits to search for", clip(words, 64))
	}
	return out, nil
}

// contentType reads an exact media type or a family ("text/*").
func contentType(ct string) (string, bool, error) {
	ct = strings.ToLower(strings.TrimSpace(ct))
	if ct == "" {
		return "", false, nil
	}
	if typ, ok := strings.CutSuffix(ct, "/*"); ok {
		if _, _, err := mime.ParseMediaType(typ + "/x"); err != nil || strings.ContainsAny(typ, "/;") {
			return "", false, invalid(ReasonBadType, "content type %q: want type/subtype or type/*", clip(ct, 64))
		}
		return typ + "/", true, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || len(params) > 0 || !strings.Contains(mt, "/") {
		return "", false, invalid(ReasonBadType, "content type %q: want type/subtype or type/*, without parameters", clip(ct, 64))
	}
	return mt, false, nil
}

// cursorVersion names the cursor's layout.
const cursorVersion = "c1"

// Next is the cursor of the page after one at offset with limit hits.
func (q Query) Next(p Plan) string {
	raw := fmt.Sprintf("%s.%d.%s", cursorVersion, p.Offset+p.Limit, q.fingerprint())
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// offset reads the cursor: the first hit of the page it names. A cursor
// of another query, or one that was not made by Next, is refused.
func (q Query) offset() (int, error) {
	if q.Cursor == "" {
		return 0, nil
	}
	bad := invalid(ReasonBadCursor, "the cursor is not one this query's previous page gave")
	if len(q.Cursor) > 128 {
		return 0, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil {
		return 0, bad
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != cursorVersion || parts[2] != q.fingerprint() {
		return 0, bad
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n <= 0 || n >= MaxDepth {
		return 0, bad
	}
	return n, nil
}

// fingerprint identifies what a query asks (not its page): a cursor is
// only good for the query that made it.
func (q Query) fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q|%q|%d|%d|%s|%s|%q|%d", q.Words, q.ContentType, q.MinSize, q.MaxSize,
		q.Since.UTC().Format(time.RFC3339Nano), q.Until.UTC().Format(time.RFC3339Nano), q.Prefix, q.Limit)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
