package objects

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Listing reads the latest version of every live object by key prefix, as
// S3's ListObjectsV2 does, from a sparse index that holds only v0 items of
// live objects. The index is write-sharded: its partition key is
// IndexShard(key, N), a calculated suffix, so the index's writes spread over
// N partitions instead of one (a GSI partition takes 1,000 write units per
// second, and a throttled index throttles the table's own writes). Its sort
// key is the object key, so each shard holds its keys in byte order, and a
// listing queries the N shards and merges them.

// Listing limits.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 1000
	// DefaultIndexShards is N when the template's parameter is not given.
	DefaultIndexShards = 8
	// MaxIndexShards bounds N: every page queries each shard.
	MaxIndexShards = 64
)

// Reasons a listing is refused.
const (
	ReasonBadPrefix    Reason = "bad-prefix"
	ReasonBadDelimiter Reason = "bad-delimiter"
	ReasonBadLimit     Reason = "bad-limit"
	ReasonBadCursor    Reason = "bad-cursor"
)

// IndexShard is the index partition of a key: FNV-1a of the key, mod n.
func IndexShard(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// Entry is one object in a listing: what the index projects.
type Entry struct {
	Key         string
	Size        int64
	Version     int64
	Modified    time.Time
	ContentType string
	SHA256      Sum
}

// Bound is where a range of keys starts: at Key, or just after it.
type Bound struct {
	Key       string
	Inclusive bool
}

// Index reads the sparse index of latest versions.
type Index interface {
	// Range returns, in key order, up to limit entries of one shard whose
	// keys are past from and, when to is not empty, before to. more says
	// whether the shard may hold further entries in the range.
	Range(ctx context.Context, shard int, from Bound, to string, limit int) (entries []Entry, more bool, err error)
}

// ListOptions is one page's request.
type ListOptions struct {
	Prefix string
	// Delimiter, when set (one character), rolls the keys that hold it
	// after the prefix up into common prefixes, listed once each.
	Delimiter string
	Limit     int    // entries and common prefixes per page: 1 to MaxListLimit (0: DefaultListLimit)
	Cursor    string // the previous page's Cursor; "" for the first page
}

// Page is one page of a listing: entries and common prefixes, each in key
// order, at most Limit of them together.
type Page struct {
	Entries  []Entry
	Prefixes []string
	// Cursor continues the listing; "" on its last page.
	Cursor string
	// Queries is how many index queries the page took.
	Queries int
}

// Lister lists objects from the index.
type Lister struct {
	Index  Index
	Shards int // N, the index's shards
}

// ValidatePrefix checks a listing prefix: empty, or the start of a key
// (at most MaxKeyBytes of UTF-8 without NUL, as ValidateKey says).
func ValidatePrefix(p string) error {
	if len(p) > MaxKeyBytes {
		return invalid(ReasonBadPrefix, "the prefix is %d bytes, the limit is %d", len(p), MaxKeyBytes)
	}
	return keyBytes(ReasonBadPrefix, ReasonBadPrefix, "prefix", p)
}

func (o ListOptions) validate() (ListOptions, error) {
	if err := ValidatePrefix(o.Prefix); err != nil {
		return o, err
	}
	if o.Delimiter != "" {
		r, n := utf8.DecodeRuneInString(o.Delimiter)
		if n != len(o.Delimiter) || r == utf8.RuneError && n <= 1 || r == 0 {
			return o, invalid(ReasonBadDelimiter, "the delimiter must be one UTF-8 character other than NUL, such as '/'; got %q", truncate(o.Delimiter, 16))
		}
	}
	switch {
	case o.Limit == 0:
		o.Limit = DefaultListLimit
	case o.Limit < 1 || o.Limit > MaxListLimit:
		return o, invalid(ReasonBadLimit, "limit %d is out of range: 1 to %d", o.Limit, MaxListLimit)
	}
	return o, nil
}

// cursor is a listing's position: where the next page starts, for the
// prefix and delimiter it was made for.
type cursor struct {
	prefix, delimiter string
	from              Bound
}

// A cursor is base64url of: the version, '0' or '1' (from.Inclusive), the
// first 8 bytes of SHA-256(prefix, NUL, delimiter) (neither holds NUL),
// and from.Key. It names its listing by a digest, not by the prefix
// itself, so that with a prefix of 1,024 bytes, percent-encoded, it fits
// in API Gateway's 10,240 bytes of request line.
const (
	cursorVersion = '2'
	cursorTagSize = 8
	cursorHead    = 2 + cursorTagSize
)

// maxCursor is the longest cursor: a key of MaxKeyBytes after the head.
var maxCursor = base64.RawURLEncoding.EncodedLen(cursorHead + MaxKeyBytes)

// listingTag names a listing (its prefix and delimiter) in its cursors.
func listingTag(prefix, delimiter string) []byte {
	h := sha256.Sum256([]byte(prefix + "\x00" + delimiter))
	return h[:cursorTagSize]
}

// encode makes the opaque cursor.
func (c cursor) encode() string {
	incl := byte('0')
	if c.from.Inclusive {
		incl = '1'
	}
	raw := append([]byte{cursorVersion, incl}, listingTag(c.prefix, c.delimiter)...)
	return base64.RawURLEncoding.EncodeToString(append(raw, c.from.Key...))
}

// decodeCursor reads a cursor and checks it belongs to this listing: the
// same prefix and delimiter, a position within the prefix.
func decodeCursor(s string, o ListOptions) (cursor, error) {
	bad := func(why string) error {
		return invalid(ReasonBadCursor, "the cursor %s: pass the cursor of the page before, with the same prefix and delimiter", why)
	}
	if len(s) > maxCursor {
		return cursor{}, bad("is too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < cursorHead || raw[0] != cursorVersion || raw[1] != '0' && raw[1] != '1' || !utf8.Valid(raw[cursorHead:]) {
		return cursor{}, bad("is not one this API made")
	}
	if !bytes.Equal(raw[2:cursorHead], listingTag(o.Prefix, o.Delimiter)) {
		return cursor{}, bad("was made for another prefix or delimiter")
	}
	c := cursor{prefix: o.Prefix, delimiter: o.Delimiter, from: Bound{Key: string(raw[cursorHead:]), Inclusive: raw[1] == '1'}}
	if end := prefixEnd(c.prefix); c.from.Key < c.prefix || end != "" && c.from.Key > end {
		return cursor{}, bad("points outside the prefix")
	}
	return c, nil
}

// prefixEnd is the smallest string after every string that starts with p
// ("" when there is none): its last character, incremented. UTF-8 sorts as
// code points do, so the result is in DynamoDB's (byte) order too.
func prefixEnd(p string) string {
	for p != "" {
		r, n := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-n]
		switch {
		case r == unicode.MaxRune:
			continue // no character after it: increment the one before
		case r == 0xD7FF:
			return p + string(rune(0xE000)) // past the surrogates
		default:
			return p + string(r+1)
		}
	}
	return ""
}

// shardStream is one shard's part of a listing: the entries read and not
// yet merged, and where its next query starts.
type shardStream struct {
	shard int
	buf   []Entry
	from  Bound
	more  bool
	size  int // the next query's limit
}

// List reads one page.
func (l *Lister) List(ctx context.Context, o ListOptions) (Page, error) {
	o, err := o.validate()
	if err != nil {
		return Page{}, err
	}
	n := max(l.Shards, 1)
	start := Bound{Key: o.Prefix, Inclusive: true}
	if o.Cursor != "" {
		c, err := decodeCursor(o.Cursor, o)
		if err != nil {
			return Page{}, err
		}
		start = c.from
	}
	end := prefixEnd(o.Prefix)
	// Each shard holds about 1/n of the page: read a quarter more, so one
	// query per shard usually fills it. With a delimiter a query may land
	// in a folder it then skips: start small, and grow while no skip comes.
	full := min(MaxListLimit, o.Limit*5/4/n+2)
	first := full
	if o.Delimiter != "" {
		first = min(full, 4)
	}
	streams := make([]*shardStream, n)
	for i := range streams {
		streams[i] = &shardStream{shard: i, from: start, more: true, size: first}
	}
	var page Page
	var last Bound // the position after what the page returned
	for len(page.Entries)+len(page.Prefixes) < o.Limit {
		q, err := l.fill(ctx, streams, end)
		page.Queries += q
		if err != nil {
			return Page{}, err
		}
		head := lowest(streams)
		if head == nil {
			return page, nil // the listing is complete: no cursor
		}
		e := head.buf[0]
		if cp, ok := commonPrefix(e.Key, o.Prefix, o.Delimiter); ok {
			page.Prefixes = append(page.Prefixes, cp)
			last = Bound{Key: prefixEnd(cp), Inclusive: true}
			skip(streams, last, full)
			continue
		}
		page.Entries = append(page.Entries, e)
		head.buf = head.buf[1:]
		last = Bound{Key: e.Key}
	}
	// A full page: is there more?
	for _, s := range streams {
		if len(s.buf) > 0 || s.more {
			page.Cursor = cursor{prefix: o.Prefix, delimiter: o.Delimiter, from: last}.encode()
			break
		}
	}
	return page, nil
}

// fill queries, in parallel, every shard whose buffer is empty and that may
// hold more.
func (l *Lister) fill(ctx context.Context, streams []*shardStream, end string) (int, error) {
	var need []*shardStream
	for _, s := range streams {
		if len(s.buf) == 0 && s.more {
			need = append(need, s)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(need))
	for i, s := range need {
		wg.Go(func() {
			got, more, err := l.Index.Range(ctx, s.shard, s.from, end, s.size)
			if err != nil {
				errs[i] = fmt.Errorf("objects: list index shard %d: %w", s.shard, err)
				return
			}
			s.buf, s.more = got, more && len(got) > 0
			if len(got) > 0 {
				s.from = Bound{Key: got[len(got)-1].Key}
			}
			s.size = min(s.size*2, MaxListLimit)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return len(need), err
		}
	}
	return len(need), nil
}

// lowest is the stream whose next entry has the smallest key (nil when
// every stream is drained).
func lowest(streams []*shardStream) *shardStream {
	var best *shardStream
	for _, s := range streams {
		if len(s.buf) > 0 && (best == nil || s.buf[0].Key < best.buf[0].Key) {
			best = s
		}
	}
	return best
}

// commonPrefix is the key's common prefix under the delimiter: the prefix
// and what follows it up to and including the delimiter's first occurrence.
func commonPrefix(key, prefix, delimiter string) (string, bool) {
	if delimiter == "" {
		return "", false
	}
	i := strings.Index(key[len(prefix):], delimiter)
	if i < 0 {
		return "", false
	}
	return key[:len(prefix)+i+len(delimiter)], true
}

// skip moves every stream past a common prefix: entries before next are
// dropped, and a stream that has none left seeks to next with its next
// query (back at a small limit: the next key often starts another folder).
func skip(streams []*shardStream, next Bound, full int) {
	for _, s := range streams {
		i := 0
		for i < len(s.buf) && s.buf[i].Key < next.Key {
			i++
		}
		s.buf = s.buf[i:]
		if len(s.buf) == 0 && s.more && s.from.Key < next.Key {
			s.from = next
			s.size = min(full, 4)
		}
	}
}
