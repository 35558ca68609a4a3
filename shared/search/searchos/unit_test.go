package searchos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/ddbpipe/ddbpipe/shared/search"
)

func TestBulkBodyWritesEveryIndexAtTheExternalVersion(t *testing.T) {
	key := "reports/2026 11/naïve#1 %20?.txt"
	ops := []search.Op{
		search.OpOf(search.Document{Key: key, Version: 3, Text: "<b>& \"hi\"</b>", TextState: search.TextIndexed, Modified: time.Unix(0, 0)}),
		search.OpOf(search.Document{Key: "gone", Version: 2, Deleted: true}),
	}
	body, err := bulkBody(ops, []string{"old", "new"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	want := []string{
		`{"index":{"_index":"old","_id":"` + search.DocID(key) + `","version":6,"version_type":"external"}}`,
		"", // the source
		`{"index":{"_index":"new","_id":"` + search.DocID(key) + `","version":6,"version_type":"external"}}`,
		"",
		`{"delete":{"_index":"old","_id":"` + search.DocID("gone") + `","version":5,"version_type":"external"}}`,
		`{"delete":{"_index":"new","_id":"` + search.DocID("gone") + `","version":5,"version_type":"external"}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), body)
	}
	for i, w := range want {
		if w == "" {
			var s source
			if err := json.Unmarshal([]byte(lines[i]), &s); err != nil || s.Key != key || s.Text != "<b>& \"hi\"</b>" || s.ID != search.DocID(key) {
				t.Errorf("line %d: source %s (%v), want the document", i, lines[i], err)
			}
			continue
		}
		if lines[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], w)
		}
	}
}

func TestAnOpIsAsSettledAsItsLeastSettledIndex(t *testing.T) {
	put := search.Op{}
	tests := []struct {
		a, b, want int
	}{
		{201, 409, 201}, // written in one, newer in the other: done
		{409, 409, 409},
		{201, 429, 429}, // one index still needs it
		{400, 201, 400},
		{503, 400, 503},
	}
	for _, tt := range tests {
		a, b := search.Outcome{Status: tt.a}, search.Outcome{Status: tt.b}
		got := a
		if rank(b, put) > rank(a, put) {
			got = b
		}
		if got.Status != tt.want {
			t.Errorf("%d + %d = %d, want %d", tt.a, tt.b, got.Status, tt.want)
		}
	}
}

func TestFindBodyCarriesNoSyntax(t *testing.T) {
	p, err := search.Query{Words: `title:(x AND "y") OR * script`, ContentType: "text/*", MinSize: 10, Since: time.Unix(100, 0), Prefix: "a/"}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(findBody(p))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, bad := range []string{"AND", `\"y\"`, "*", ":("} {
		if strings.Contains(got, bad) {
			t.Errorf("query body holds %q: %s", bad, got)
		}
	}
	for _, want := range []string{`{"multi_match":{"fields":["key_words","text"],"query":"title"}}`, `{"prefix":{"content_type":"text/"}}`, `{"range":{"size":{"gte":10}}}`, `{"prefix":{"key":"a/"}}`} {
		if !strings.Contains(got, want) {
			t.Errorf("query body lacks %s: %s", want, got)
		}
	}
}

func TestOutcomeOfABulkItem(t *testing.T) {
	var items []map[string]opensearchapi.BulkRespItem
	raw := `[{"index":{"status":409,"error":{"type":"version_conflict_engine_exception","reason":"[x]: version conflict"}}},{"delete":{"status":404,"result":"not_found"}}]`
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(items[0]); o.Status != 409 || o.Type != "version_conflict_engine_exception" {
		t.Errorf("outcome %+v", o)
	}
	if o := outcomeOf(items[1]); o.Class(search.Op{Delete: true}) != search.Done {
		t.Errorf("a delete of a missing document: %+v, want done", o)
	}
}
