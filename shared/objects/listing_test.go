package objects

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// memIndex is the sparse index in memory: each shard's entries in key
// order, read as DynamoDB's Query reads them (a range, a limit). It counts
// the queries and the entries read.
type memIndex struct {
	mu      sync.Mutex
	shards  map[int][]Entry
	queries int
	read    int
	fail    error
}

func newMemIndex(n int, keys ...string) *memIndex {
	m := &memIndex{shards: map[int][]Entry{}}
	for _, k := range keys {
		s := IndexShard(k, n)
		m.shards[s] = append(m.shards[s], Entry{Key: k, Size: int64(len(k)), Version: 1})
	}
	for _, es := range m.shards {
		sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
	}
	return m
}

func (m *memIndex) Range(_ context.Context, shard int, from Bound, to string, limit int) ([]Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries++
	if m.fail != nil {
		return nil, false, m.fail
	}
	var out []Entry
	for _, e := range m.shards[shard] {
		if e.Key < from.Key || e.Key == from.Key && !from.Inclusive || to != "" && e.Key >= to {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, e)
		m.read++
	}
	return out, false, nil
}

// listAll follows the cursors to the end and returns every key and common
// prefix, in the order the pages gave them, and the pages.
func listAll(t *testing.T, l *Lister, o ListOptions) (keys, prefixes []string, pages int) {
	t.Helper()
	for {
		p, err := l.List(context.Background(), o)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if n := len(p.Entries) + len(p.Prefixes); n > max(o.Limit, 0) && o.Limit > 0 || n > MaxListLimit {
			t.Fatalf("page %d holds %d, over the limit %d", pages, n, o.Limit)
		}
		for _, e := range p.Entries {
			keys = append(keys, e.Key)
		}
		prefixes = append(prefixes, p.Prefixes...)
		if p.Cursor == "" {
			return keys, prefixes, pages
		}
		if pages > 10000 {
			t.Fatal("the cursors never end")
		}
		o.Cursor = p.Cursor
	}
}

// corpus is a tree of keys: docs/<year>/<n>.txt, photos/…, and a few at
// the top, including keys with multi-byte characters.
func corpus() []string {
	var keys []string
	for y := 2020; y < 2027; y++ {
		for i := range 37 {
			keys = append(keys, fmt.Sprintf("docs/%d/%03d.txt", y, i))
		}
	}
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("photos/cat-%02d.png", i))
	}
	keys = append(keys, "readme.md", "docs.txt", "docs", "zürich/plan.pdf", "zürich/ä.txt", "日本/東京.txt")
	// Keys of S3's rule: slashes anywhere, dot segments, spaces, controls.
	return append(keys, "/", "//", "/docs/a", "//docs//b", "docs/", "docs//", "docs/./a", "docs/../a", "docs/ a b/c", "docs/\n/x",
		"docs/\x01", "docs/\x7f/y", "docs#", "docs#w1#00000", " ", "a b", ".", "..", "../..", "\U0010FFFF", "docs/\U0010FFFF/z")
}

// want is what S3 would answer: the keys under prefix in byte order, with a
// delimiter their common prefixes once each.
func want(keys []string, prefix, delimiter string) (entries, prefixes []string) {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for _, k := range sorted {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if cp, ok := commonPrefix(k, prefix, delimiter); ok {
			if len(prefixes) == 0 || prefixes[len(prefixes)-1] != cp {
				prefixes = append(prefixes, cp)
			}
			continue
		}
		entries = append(entries, k)
	}
	return entries, prefixes
}

func TestListMatchesS3Semantics(t *testing.T) {
	keys := corpus()
	for _, shards := range []int{1, 3, 8} {
		for _, tt := range []struct{ prefix, delimiter string }{
			{"", ""}, {"", "/"}, {"docs/", ""}, {"docs/", "/"}, {"docs", "/"}, {"docs/2023/", "/"},
			{"docs/2023/01", ""}, {"photos/cat-4", ""}, {"zürich/", ""}, {"日本/", "/"}, {"nothing/", ""}, {"d", "."},
			{"/", "/"}, {"/", ""}, {"docs/", "\n"}, {"", " "}, {"docs/.", "/"}, {"docs/", "#"}, {".", "/"}, {"docs/\U0010FFFF", "/"},
		} {
			for _, limit := range []int{0, 1, 7, 100} {
				name := fmt.Sprintf("%d shards, prefix %q, delimiter %q, limit %d", shards, tt.prefix, tt.delimiter, limit)
				t.Run(name, func(t *testing.T) {
					l := &Lister{Index: newMemIndex(shards, keys...), Shards: shards}
					got, gotPrefixes, _ := listAll(t, l, ListOptions{Prefix: tt.prefix, Delimiter: tt.delimiter, Limit: limit})
					wantKeys, wantPrefixes := want(keys, tt.prefix, tt.delimiter)
					if !slices.Equal(got, wantKeys) || !slices.Equal(gotPrefixes, wantPrefixes) {
						t.Errorf("got %d keys %v and prefixes %v,\nwant %d keys %v and prefixes %v", len(got), got, gotPrefixes, len(wantKeys), wantKeys, wantPrefixes)
					}
				})
			}
		}
	}
}

// A listing reads about what it returns: one query per shard fills a page,
// and with a delimiter each folder costs a few queries per shard, however
// many keys it holds.
func TestListReadsWhatItReturns(t *testing.T) {
	const shards = 8
	var keys []string
	for f := range 10 {
		for i := range 2000 {
			keys = append(keys, fmt.Sprintf("f%d/%05d", f, i))
		}
	}
	idx := newMemIndex(shards, keys...)
	l := &Lister{Index: idx, Shards: shards}
	p, err := l.List(context.Background(), ListOptions{Prefix: "f3/", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 1000 || p.Cursor == "" {
		t.Fatalf("%d entries, cursor %q", len(p.Entries), p.Cursor)
	}
	if idx.read > 1300 || idx.queries > 2*shards {
		t.Errorf("a page of 1000 read %d entries in %d queries, want ≤ 1300 in ≤ %d", idx.read, idx.queries, 2*shards)
	}
	idx.queries, idx.read = 0, 0
	_, prefixes, _ := listAll(t, l, ListOptions{Delimiter: "/"})
	if len(prefixes) != 10 {
		t.Fatalf("prefixes %v", prefixes)
	}
	if perFolder := float64(idx.queries) / shards / 10; perFolder > 3 {
		t.Errorf("%d queries for 10 folders over %d shards: %.1f per shard per folder, want ≤ 3", idx.queries, shards, perFolder)
	}
	if idx.read > 10*shards*8 {
		t.Errorf("the delimiter listing read %d of the %d keys", idx.read, len(keys))
	}
}

// Keys spread over the shards: no shard holds more than 1.5/N of them.
func TestIndexShardSpread(t *testing.T) {
	const n = 8
	count := map[int]int{}
	for i := range 20000 {
		count[IndexShard(fmt.Sprintf("uploads/2026/11/%06d.bin", i), n)]++
	}
	for s := range n {
		if share := float64(count[s]) / 20000; share > 1.5/n || share < 0.5/n {
			t.Errorf("shard %d holds %.3f of the keys", s, share)
		}
	}
	if IndexShard("k", 1) != 0 || IndexShard("k", 0) != 0 {
		t.Error("one shard is shard 0")
	}
}

func TestListRefusesBadInput(t *testing.T) {
	l := &Lister{Index: newMemIndex(4, corpus()...), Shards: 4}
	first, err := l.List(context.Background(), ListOptions{Prefix: "docs/", Limit: 5})
	if err != nil || first.Cursor == "" {
		t.Fatal(err)
	}
	forge := func(prefix, key string, inclusive bool) string {
		return cursor{prefix: prefix, from: Bound{Key: key, Inclusive: inclusive}}.encode()
	}
	raw := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	tag := listingTag("docs/", "")
	for _, tt := range []struct {
		name string
		o    ListOptions
		want Reason
	}{
		{"prefix not UTF-8", ListOptions{Prefix: "docs/\xff"}, ReasonBadPrefix},
		{"prefix with a NUL", ListOptions{Prefix: "docs\x00"}, ReasonBadPrefix},
		{"prefix too long", ListOptions{Prefix: strings.Repeat("a", MaxKeyBytes+1)}, ReasonBadPrefix},
		{"two-character delimiter", ListOptions{Delimiter: "//"}, ReasonBadDelimiter},
		{"NUL delimiter", ListOptions{Delimiter: "\x00"}, ReasonBadDelimiter},
		{"invalid UTF-8 delimiter", ListOptions{Delimiter: "\xff"}, ReasonBadDelimiter},
		{"limit -1", ListOptions{Limit: -1}, ReasonBadLimit},
		{"limit 1001", ListOptions{Limit: 1001}, ReasonBadLimit},
		{"cursor not base64", ListOptions{Prefix: "docs/", Cursor: "!!!"}, ReasonBadCursor},
		{"cursor of another prefix", ListOptions{Prefix: "photos/", Cursor: first.Cursor}, ReasonBadCursor},
		{"cursor of another delimiter", ListOptions{Prefix: "docs/", Delimiter: "/", Cursor: first.Cursor}, ReasonBadCursor},
		{"cursor of another version", ListOptions{Prefix: "docs/", Cursor: raw(append([]byte{'1', '0'}, append(tag, "docs/a"...)...))}, ReasonBadCursor},
		{"cursor before its prefix", ListOptions{Prefix: "docs/", Cursor: forge("docs/", "a", false)}, ReasonBadCursor},
		{"cursor after its prefix", ListOptions{Prefix: "docs/", Cursor: forge("docs/", "photos/", false)}, ReasonBadCursor},
		{"cursor with missing fields", ListOptions{Prefix: "docs/", Cursor: raw([]byte{cursorVersion, '0', 1, 2})}, ReasonBadCursor},
		{"cursor of the old format", ListOptions{Prefix: "docs/", Cursor: base64.RawURLEncoding.EncodeToString([]byte("1\ndocs/\n\n0\ndocs/a"))}, ReasonBadCursor},
		{"cursor with a key not UTF-8", ListOptions{Prefix: "docs/", Cursor: raw(append([]byte{cursorVersion, '0'}, append(tag, "docs/\xff"...)...))}, ReasonBadCursor},
		{"cursor too long", ListOptions{Prefix: "docs/", Cursor: strings.Repeat("A", maxCursor+1)}, ReasonBadCursor},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.List(context.Background(), tt.o)
			if got := ReasonOf(err); got != tt.want {
				t.Errorf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
	// A cursor forged within its prefix is only a position: the listing
	// goes on from there.
	p, err := l.List(context.Background(), ListOptions{Prefix: "docs/", Cursor: forge("docs/", "docs/2026/", true)})
	if err != nil || len(p.Entries) == 0 || p.Entries[0].Key != "docs/2026/000.txt" {
		t.Errorf("forged position: %v %+v", err, p.Entries[:min(1, len(p.Entries))])
	}
}

func TestListIndexFailure(t *testing.T) {
	idx := newMemIndex(4, corpus()...)
	idx.fail = errors.New("throttled")
	_, err := (&Lister{Index: idx, Shards: 4}).List(context.Background(), ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Errorf("got %v, want the index's error", err)
	}
}

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"docs/":                 "docs0",
		"a":                     "b",
		"zü":                    "zý",
		"a\U0010FFFF":           "b",
		"\U0010FFFF":            "",
		"x\uD7FF":               "x\uE000",
		"photos/cat-4":          "photos/cat-5",
		"日本/":                   "日本0",
		"a\U0010FFFF\U0010FFFF": "b",
	} {
		if got := prefixEnd(in); got != want {
			t.Errorf("prefixEnd(%q) = %q, want %q", in, got, want)
		}
		if in != "" && want != "" && !(want > in) {
			t.Errorf("prefixEnd(%q) = %q does not sort after it", in, want)
		}
	}
}

// The longest cursor, for a 1,024-byte key under a 1,024-byte prefix of
// control characters, fits in API Gateway's request line with the prefix
// percent-encoded (10,240 bytes for the line and the headers).
func TestCursorFitsARequestLine(t *testing.T) {
	prefix := strings.Repeat("\x01", MaxKeyBytes)
	c := cursor{prefix: prefix, delimiter: "\U0010FFFF", from: Bound{Key: prefix}}.encode()
	if len(c) > maxCursor {
		t.Fatalf("cursor of %d bytes, over its own limit %d", len(c), maxCursor)
	}
	if line := len("GET /objects?cursor=&delimiter=%F4%8F%BF%BF&limit=1000&prefix= HTTP/1.1") + len(c) + 3*len(prefix); line > 5000 {
		t.Errorf("the request line is %d bytes", line)
	}
	got, err := decodeCursor(c, ListOptions{Prefix: prefix, Delimiter: "\U0010FFFF"})
	if err != nil || got.from.Key != prefix {
		t.Errorf("decode: %v", err)
	}
}
