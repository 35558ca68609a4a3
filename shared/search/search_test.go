package search

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// memIndex is an in-memory index with OpenSearch's external versions: a
// write at a version not above the recorded one (tombstones included) is a
// 409. refuse makes it refuse documents for their content; fail makes the
// next bulk requests fail whole; busy answers 429 to the next items.
type memIndex struct {
	mu       sync.Mutex
	versions map[string]int64
	docs     map[string]Document
	requests int
	fail     int
	busy     int
	refuse   func(Document) bool
}

func newMemIndex() *memIndex {
	return &memIndex{versions: map[string]int64{}, docs: map[string]Document{}}
}

func (m *memIndex) Bulk(_ context.Context, _ string, ops []Op) ([]Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	if m.fail > 0 {
		m.fail--
		return nil, fmt.Errorf("%w: connection refused", ErrUnavailable)
	}
	out := make([]Outcome, len(ops))
	for i, op := range ops {
		switch v, ok := m.versions[op.ID]; {
		case m.busy > 0:
			m.busy--
			out[i] = Outcome{Status: 429, Type: "es_rejected_execution_exception"}
		case ok && op.Version <= v:
			out[i] = Outcome{Status: 409, Type: "version_conflict_engine_exception"}
		case !op.Delete && m.refuse != nil && m.refuse(op.Doc):
			out[i] = Outcome{Status: 400, Type: "mapper_parsing_exception", Reason: "field [text] too long"}
		case op.Delete:
			m.versions[op.ID] = op.Version
			status := 200
			if _, had := m.docs[op.ID]; !had {
				status = 404
			}
			delete(m.docs, op.ID)
			out[i] = Outcome{Status: status}
		default:
			m.versions[op.ID] = op.Version
			m.docs[op.ID] = op.Doc
			out[i] = Outcome{Status: 201}
		}
	}
	return out, nil
}

type memPayloads map[string][]byte // key#version → body

func (p memPayloads) Fetch(_ context.Context, r objects.Record, v int64) (objects.Object, error) {
	body, ok := p[fmt.Sprintf("%s#%d", r.Key, v)]
	if !ok {
		return objects.Object{}, fmt.Errorf("%w: %s", objects.ErrNotFound, r.Key)
	}
	return objects.Object{Record: r.Meta(), Body: body}, nil
}

func put(key string, v int64, ct string, size int64) Change {
	return Change{Record: objects.Record{Key: key, Version: v, ContentType: ct, Size: size, Kind: objects.Inline,
		CreatedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(v) * time.Hour)}}
}

func del(key string, v int64) Change {
	return Change{Record: objects.Record{Key: key, Version: v, Deleted: true}}
}

func TestExternalVersionRisesThroughDeleteAndRecreate(t *testing.T) {
	// put v1, put v2, delete (tombstone keeps 2), re-create v3, delete.
	history := []Change{put("k", 1, "", 0), put("k", 2, "", 0), del("k", 2), put("k", 3, "", 0), del("k", 3)}
	prev := int64(0)
	for _, c := range history {
		got := ExternalVersion(c.Record.Version, c.Record.Deleted)
		if got <= prev {
			t.Fatalf("external version of %+v = %d, not above %d", c.Record, got, prev)
		}
		prev = got
	}
	if v := ExternalVersion(objects.MaxVersion, true); v <= 0 {
		t.Errorf("ExternalVersion(MaxVersion) overflows: %d", v)
	}
}

func TestCoalesceKeepsTheNewestPerKey(t *testing.T) {
	in := []Change{put("a", 1, "", 0), put("b", 4, "", 0), put("a", 3, "", 0), put("a", 2, "", 0), del("b", 4)}
	got := Coalesce(in)
	want := []string{"a v3", "b v4 deleted"}
	if len(got) != len(want) {
		t.Fatalf("Coalesce = %d changes, want %d", len(got), len(want))
	}
	for i, c := range got {
		s := fmt.Sprintf("%s v%d", c.Record.Key, c.Record.Version)
		if c.Record.Deleted {
			s += " deleted"
		}
		if s != want[i] {
			t.Errorf("Coalesce[%d] = %s, want %s", i, s, want[i])
		}
	}
}

func TestTextLike(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/plain": true, "text/markdown; charset=utf-8": true, "text/csv": true,
		"application/json": true, "application/ld+json": true, "application/xml": true,
		"application/atom+xml": true, "application/x-ndjson": true, "application/yaml": true,
		"application/pdf": false, "image/png": false, "application/octet-stream": false,
		"": false, "text": false, "garbage;;": false,
	} {
		if got := TextLike(ct); got != want {
			t.Errorf("TextLike(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name  string
		body  []byte
		max   int
		text  string
		state TextState
	}{
		{"plain", []byte("invoice 4711"), 100, "invoice 4711", TextIndexed},
		{"bom dropped", []byte("\ufeffhello"), 100, "hello", TextIndexed},
		{"too large", []byte(strings.Repeat("a", 101)), 100, "", TextTooLarge},
		{"binary labelled text", []byte("PK\x03\x04\x00\x00zip"), 100, "", TextBinary},
		{"invalid utf-8", []byte("caf\xe9 au lait"), 100, "", TextUndecodable},
		{"deeply nested json", []byte(strings.Repeat("[", 50) + "1" + strings.Repeat("]", 50)), 200, strings.Repeat("[", 50) + "1" + strings.Repeat("]", 50), TextIndexed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, state := Text(tt.body, tt.max)
			if text != tt.text || state != tt.state {
				t.Errorf("Text = %q %s, want %q %s", clip(text, 40), state, clip(tt.text, 40), tt.state)
			}
		})
	}
}

func TestKeyWords(t *testing.T) {
	for key, want := range map[string]string{
		"reports/2026-11/invoice_4711.pdf": "reports 2026 11 invoice 4711 pdf",
		"  ":                               "",
		"Größe/naïve café.txt":             "Größe naïve café txt",
		"a+b=c&d?e#f%20g":                  "a b c d e f 20g",
		"日本語/ファイル.md":                      "日本語 ファイル md",
	} {
		if got := KeyWords(key); got != want {
			t.Errorf("KeyWords(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestPlanRefusesHostileQueries(t *testing.T) {
	tests := []struct {
		name   string
		q      Query
		reason Reason
	}{
		{"lucene syntax is words", Query{Words: `title:(foo AND bar) OR *`}, ""},
		{"only a wildcard", Query{Words: "*"}, ReasonBadQuery},
		{"dsl json", Query{Words: `{"script":{"source":"x"}}`}, ""},
		{"10,000 characters", Query{Words: strings.Repeat("a ", 5000)}, ReasonBadQuery},
		{"too many words", Query{Words: strings.Repeat("w ", MaxWords+1)}, ReasonBadQuery},
		{"not utf-8", Query{Words: "caf\xe9"}, ReasonBadQuery},
		{"negative limit", Query{Limit: -1}, ReasonBadLimit},
		{"huge limit", Query{Limit: 1 << 30}, ReasonBadLimit},
		{"negative size", Query{MinSize: -5}, ReasonBadSize},
		{"max below min", Query{MinSize: 10, MaxSize: 5}, ReasonBadSize},
		{"until before since", Query{Since: time.Unix(100, 0), Until: time.Unix(50, 0)}, ReasonBadTime},
		{"bad type", Query{ContentType: "pdf"}, ReasonBadType},
		{"type with params", Query{ContentType: "text/plain; charset=utf-8"}, ReasonBadType},
		{"family", Query{ContentType: "text/*"}, ""},
		{"forged cursor", Query{Cursor: "bm90LWEtY3Vyc29y"}, ReasonBadCursor},
		{"garbage cursor", Query{Cursor: "%%%"}, ReasonBadCursor},
		{"long cursor", Query{Cursor: strings.Repeat("A", 500)}, ReasonBadCursor},
		{"prefix too long", Query{Prefix: strings.Repeat("p", 1025)}, ReasonBadPrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.q.Plan()
			var ie *InvalidError
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("Plan: %v, want it accepted", err)
			case tt.reason != "" && (!errors.As(err, &ie) || ie.Reason != tt.reason):
				t.Fatalf("Plan: %v, want reason %s", err, tt.reason)
			}
		})
	}
}

func TestCursorServesOnlyItsQuery(t *testing.T) {
	q := Query{Words: "invoice", Limit: 10}
	p, err := q.Plan()
	if err != nil {
		t.Fatal(err)
	}
	q.Cursor = q.Next(p)
	p2, err := q.Plan()
	if err != nil || p2.Offset != 10 {
		t.Fatalf("next page: offset %d, %v; want 10", p2.Offset, err)
	}
	other := Query{Words: "receipt", Limit: 10, Cursor: q.Cursor}
	if _, err := other.Plan(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another query's cursor: %v, want refused", err)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 40) + "the INVOICE 4711 is due " + strings.Repeat("dolor sit ", 40)
	got := Snippet(long, []string{"invoice"})
	if !strings.Contains(got, "INVOICE 4711") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") {
		t.Errorf("Snippet = %q, want the passage around INVOICE, cut at both ends", got)
	}
	if got := Snippet("short text", []string{"absent"}); got != "short text" {
		t.Errorf("Snippet of short text = %q", got)
	}
	if got := Snippet("", nil); got != "" {
		t.Errorf("Snippet of nothing = %q", got)
	}
}

func newIndexer(ix *memIndex, p memPayloads) *Indexer {
	return &Indexer{Index: ix, Payloads: p, Target: "objects", MaxText: 64,
		Backoff: retry.Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond}}
}

func TestIndexerNeverMovesADocumentBack(t *testing.T) {
	ix := newMemIndex()
	p := memPayloads{"a#1": []byte("first"), "a#2": []byte("second"), "a#3": []byte("third")}
	in := newIndexer(ix, p)
	ctx := context.Background()
	steps := [][]Change{
		{put("a", 1, "text/plain", 5), put("a", 2, "text/plain", 6)}, // coalesced: v2
		{put("a", 1, "text/plain", 5)},                               // a replay of v1
		{del("a", 2)},                                                // deleted
		{put("a", 2, "text/plain", 6)},                               // a replay after the delete
		{put("a", 3, "text/plain", 5)},                               // re-created
		{del("a", 2), put("a", 1, "text/plain", 5)},                  // old records reordered
	}
	want := []string{"second", "second", "", "", "third", "third"}
	for i, batch := range steps {
		res := in.Apply(ctx, batch)
		if res.Err != nil {
			t.Fatalf("step %d: %v", i, res.Err)
		}
		d, ok := ix.docs[DocID("a")]
		if got := d.Text; !ok && want[i] != "" || ok && got != want[i] {
			t.Fatalf("step %d: document %q (present %v), want %q", i, got, ok, want[i])
		}
		if res.Requests != 1 {
			t.Errorf("step %d: %d bulk requests, want 1", i, res.Requests)
		}
	}
}

func TestIndexerIsolatesARefusedDocument(t *testing.T) {
	ix := newMemIndex()
	ix.refuse = func(d Document) bool { return strings.Contains(d.Text, "poison") }
	p := memPayloads{"bad#1": []byte("poison pill"), "good#1": []byte("fine words")}
	res := newIndexer(ix, p).Apply(context.Background(), []Change{put("bad", 1, "text/plain", 11), put("good", 1, "text/plain", 10)})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	bad, good := ix.docs[DocID("bad")], ix.docs[DocID("good")]
	if bad.TextState != TextRefused || bad.Text != "" || good.Text != "fine words" {
		t.Errorf("bad %+v, good %+v: want bad indexed without text, good whole", bad, good)
	}
	if res.TextLess != 1 || res.Documents != 2 || res.Requests != 2 {
		t.Errorf("result %+v: want 1 text-less, 2 documents, 2 requests", res)
	}
}

func TestIndexerRetriesLoadAndOutages(t *testing.T) {
	ix := newMemIndex()
	ix.fail, ix.busy = 2, 1
	res := newIndexer(ix, memPayloads{}).Apply(context.Background(), []Change{put("x.png", 1, "image/png", 9), put("y.png", 1, "image/png", 9)})
	if res.Err != nil || res.Documents != 2 {
		t.Fatalf("result %+v, want both written", res)
	}
	if res.Requests != 4 { // two refused whole, one with a 429 item, one for that item
		t.Errorf("%d requests, want 4", res.Requests)
	}

	down := newMemIndex()
	down.fail = 1 << 30
	in := newIndexer(down, memPayloads{})
	in.Attempts = 3
	res = in.Apply(context.Background(), []Change{put("z", 1, "", 0)})
	if !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("engine down: %v, want ErrUnavailable for the batch to be retried", res.Err)
	}
}

func TestIndexerTextStates(t *testing.T) {
	ix := newMemIndex()
	p := memPayloads{"bin#1": []byte("a\x00b"), "latin1#1": []byte("caf\xe9")}
	changes := []Change{
		put("big.txt", 1, "text/plain", 1000), put("bin", 1, "text/plain", 3),
		put("latin1", 1, "text/plain", 4), put("gone", 1, "text/plain", 4), put("pic", 1, "image/png", 4),
	}
	if res := newIndexer(ix, p).Apply(context.Background(), changes); res.Err != nil {
		t.Fatal(res.Err)
	}
	for key, want := range map[string]TextState{"big.txt": TextTooLarge, "bin": TextBinary, "latin1": TextUndecodable, "gone": TextUnreadable, "pic": TextNone} {
		if got := ix.docs[DocID(key)].TextState; got != want {
			t.Errorf("%s: text state %s, want %s", key, got, want)
		}
	}
}

type fixedFinder Found

func (f fixedFinder) Find(context.Context, Plan) (Found, error) { return Found(f), nil }

type fixedLatest map[string]Current

func (f fixedLatest) Latest(_ context.Context, keys []string) (map[string]Current, error) {
	out := map[string]Current{}
	for _, k := range keys {
		if c, ok := f[k]; ok {
			out[k] = c
		}
	}
	return out, nil
}

func TestFreshDropsWhatTheTableMovedPast(t *testing.T) {
	hits := []Hit{{Key: "same", Version: 2}, {Key: "newer", Version: 1}, {Key: "deleted", Version: 3}, {Key: "gone", Version: 1}}
	s := &Searcher{Finder: fixedFinder{Hits: hits, Total: 4}, Latest: fixedLatest{
		"same": {Version: 2}, "newer": {Version: 2}, "deleted": {Version: 3, Deleted: true},
	}}
	page, err := s.Search(context.Background(), Query{Words: "x", Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hits) != 1 || page.Hits[0].Key != "same" || page.Dropped != 3 || !page.Fresh {
		t.Errorf("page %+v: want only \"same\", 3 dropped", page)
	}
	page, _ = s.Search(context.Background(), Query{Words: "x"})
	if len(page.Hits) != 4 || page.Fresh {
		t.Errorf("without fresh: %d hits, fresh %v; want all 4 unchecked", len(page.Hits), page.Fresh)
	}
}

type entries []Entry

func (e entries) ScanLatest(_ context.Context, fn func([]Entry) error) error { return fn(e) }
func (e entries) ScanIndex(_ context.Context, fn func([]Entry) error) error  { return fn(e) }

func TestVerifyNamesEveryDrift(t *testing.T) {
	table := entries{{"same", 2}, {"missing", 1}, {"behind", 5}, {"ahead", 1}}
	index := entries{{"same", 2}, {"extra", 4}, {"behind", 4}, {"ahead", 2}}
	d, err := Verify(context.Background(), table, index)
	if err != nil {
		t.Fatal(err)
	}
	if d.None() || d.Count() != 4 || len(d.Missing) != 1 || len(d.Extra) != 1 || len(d.Behind) != 1 || len(d.Ahead) != 1 {
		t.Errorf("drift %+v: want one of each kind", d)
	}
	d, _ = Verify(context.Background(), entries{{"a", 1}}, entries{{"a", 1}})
	if !d.None() || d.TableKeys != 1 || d.IndexDocs != 1 {
		t.Errorf("equal: drift %+v", d)
	}
}

func TestIndexerSplitsLargeBatches(t *testing.T) {
	ix := newMemIndex()
	p := memPayloads{}
	var changes []Change
	for i := range 10 {
		key := fmt.Sprintf("big%d.txt", i)
		p[key+"#1"] = []byte(strings.Repeat("word ", 100<<10/5)) // 100 KiB of text
		changes = append(changes, put(key, 1, "text/plain", 100<<10))
	}
	in := newIndexer(ix, p)
	in.MaxText, in.MaxBulkBytes = 1<<20, 512<<10
	res := in.Apply(context.Background(), changes)
	if res.Err != nil || res.Documents != 10 {
		t.Fatalf("result %+v", res)
	}
	if res.Requests != 5 { // two 100 KiB texts (about 200 KiB each, escaped) per 512 KiB request
		t.Errorf("%d requests, want 5", res.Requests)
	}
}

// flaky fails its first reads, as a store does while it is throttled or
// restarting.
type flaky struct {
	memPayloads
	mu    sync.Mutex
	fails int
}

func (f *flaky) Fetch(ctx context.Context, r objects.Record, v int64) (objects.Object, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return objects.Object{}, errors.New("503 SlowDown")
	}
	return f.memPayloads.Fetch(ctx, r, v)
}

func TestIndexerReadsTextsAgainAfterPassingFailures(t *testing.T) {
	ix := newMemIndex()
	p := &flaky{memPayloads: memPayloads{"a.txt#1": []byte("alpha")}, fails: 3}
	in := newIndexer(ix, memPayloads{})
	in.Payloads = p
	res := in.Apply(context.Background(), []Change{put("a.txt", 1, "text/plain", 5)})
	if res.Err != nil || ix.docs[DocID("a.txt")].Text != "alpha" {
		t.Fatalf("result %+v, document %+v: want the text after three failed reads", res, ix.docs[DocID("a.txt")])
	}
	p.fails = 1 << 30
	in.Attempts = 3
	if res := in.Apply(context.Background(), []Change{put("a.txt", 1, "text/plain", 5)}); res.Err == nil {
		t.Fatal("a store that never answers: no error, want the batch failed for Lambda to retry")
	}
}
