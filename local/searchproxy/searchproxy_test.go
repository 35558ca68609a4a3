package searchproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/servers"
)

// step is one bulk of a versioning case and what each of its items must get.
type step struct {
	lines []string
	want  []string // per item: "status result version" or "409 <reason>"
}

func TestBulkExternalVersions(t *testing.T) {
	p := startProxy(t, Options{})
	tests := []struct {
		name  string
		steps func(index string) []step
	}{
		{"a lower or equal version is refused, a higher one applies", func(ix string) []step {
			return []step{
				{[]string{indexLine(ix, "k", 5, "five")}, []string{"201 created 5"}},
				{[]string{indexLine(ix, "k", 3, "three")}, []string{"409 [k]: version conflict, current version [5] is higher or equal to the one provided [3]"}},
				{[]string{indexLine(ix, "k", 5, "five again")}, []string{"409 [k]: version conflict, current version [5] is higher or equal to the one provided [5]"}},
				{[]string{indexLine(ix, "k", 6, "six")}, []string{"200 updated 6"}},
			}
		}},
		{"a delete leaves a tombstone that refuses lower versions", func(ix string) []step {
			return []step{
				{[]string{indexLine(ix, "k", 5, "five")}, []string{"201 created 5"}},
				{[]string{deleteLine(ix, "k", 7)}, []string{"200 deleted 7"}},
				{[]string{indexLine(ix, "k", 6, "six")}, []string{"409 [k]: version conflict, current version [7] is higher or equal to the one provided [6]"}},
				{[]string{deleteLine(ix, "k", 7)}, []string{"409 [k]: version conflict, current version [7] is higher or equal to the one provided [7]"}},
				{[]string{indexLine(ix, "k", 8, "eight")}, []string{"201 created 8"}},
			}
		}},
		{"a delete of an unknown id is not_found and still a tombstone", func(ix string) []step {
			return []step{
				{[]string{deleteLine(ix, "k", 2)}, []string{"404 not_found 2"}},
				{[]string{indexLine(ix, "k", 1, "one")}, []string{"409 [k]: version conflict, current version [2] is higher or equal to the one provided [1]"}},
				{[]string{indexLine(ix, "k", 3, "three")}, []string{"201 created 3"}},
			}
		}},
		{"items of one bulk are judged in order", func(ix string) []step {
			return []step{
				{[]string{indexLine(ix, "k", 2, "two"), indexLine(ix, "k", 1, "one"), deleteLine(ix, "k", 3), indexLine(ix, "k", 4, "four")},
					[]string{"201 created 2", "409 [k]: version conflict, current version [2] is higher or equal to the one provided [1]", "200 deleted 3", "201 created 4"}},
			}
		}},
		{"create refuses an existing document, internal versions count", func(ix string) []step {
			create := fmt.Sprintf(`{"create":{"_index":%q,"_id":"k"}}`, ix)
			index := fmt.Sprintf(`{"index":{"_index":%q,"_id":"k"}}`, ix)
			return []step{
				{[]string{create, `{"words":"first"}`}, []string{"201 created 1"}},
				{[]string{create, `{"words":"second"}`}, []string{"409 [k]: version conflict, document already exists (current version [1])"}},
				{[]string{index, `{"words":"third"}`}, []string{"200 updated 2"}},
			}
		}},
		{"if_seq_no must match", func(ix string) []step {
			return []step{
				{[]string{fmt.Sprintf(`{"index":{"_index":%q,"_id":"k"}}`, ix), `{"words":"a"}`}, []string{"201 created 1"}},
				{[]string{fmt.Sprintf(`{"index":{"_index":%q,"_id":"k","if_seq_no":99,"if_primary_term":1}}`, ix), `{"words":"b"}`},
					[]string{"409 [k]: version conflict, required seqNo [99], primary term [1]. current document has seqNo [1] and primary term [1]"}},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.t = t
			index := p.newIndex("versions")
			for i, s := range tt.steps(index) {
				anyErr, items := p.bulk("", s.lines...)
				if len(items) != len(s.want) {
					t.Fatalf("step %d: %d items, want %d", i, len(items), len(s.want))
				}
				wantErr := false
				for j, it := range items {
					got := fmt.Sprintf("%d %s %d", it.Status, it.Result, it.Version)
					if it.Error != nil {
						got = fmt.Sprintf("%d %s", it.Status, it.Error.Reason)
						wantErr = true
						if it.Error.Type != "version_conflict_engine_exception" {
							t.Errorf("step %d item %d: error type %s", i, j, it.Error.Type)
						}
					}
					if got != s.want[j] {
						t.Errorf("step %d item %d: got %q, want %q", i, j, got, s.want[j])
					}
				}
				if anyErr != wantErr {
					t.Errorf("step %d: errors = %t, want %t", i, anyErr, wantErr)
				}
			}
		})
	}
}

func TestExternalVersionsOffPassesThrough(t *testing.T) {
	p := startProxy(t, Options{Off: ExternalVersions})
	index := p.newIndex("versions-off")
	p.bulk("", indexLine(index, "k", 5, "five"))
	anyErr, items := p.bulk("?refresh=wait_for", indexLine(index, "k", 3, "three"))
	if anyErr || items[0].Status >= 300 {
		t.Fatalf("with versions off, the engine took version 3 after 5 as it does: got %+v", items[0])
	}
	_, _, src := p.getDoc(index, "k")
	if src["words"] != "three" {
		t.Errorf("with versions off, the document moved back to 3: got %v", src)
	}
}

func TestBulkSameIDInOrder(t *testing.T) {
	tests := []struct {
		name     string
		off      Feature
		lines    func(ix string) []string
		wantDocs map[string]string // id → words; absent: deleted
	}{
		{"index then delete deletes", 0, func(ix string) []string {
			return []string{indexLine(ix, "a", 1, "one"), deleteLine(ix, "a", 2), indexLine(ix, "b", 1, "kept")}
		}, map[string]string{"b": "kept"}},
		{"delete then index keeps the last", 0, func(ix string) []string {
			return []string{indexLine(ix, "a", 1, "one"), deleteLine(ix, "a", 2), indexLine(ix, "a", 3, "three")}
		}, map[string]string{"a": "three"}},
		{"two indexes keep the second", 0, func(ix string) []string {
			return []string{indexLine(ix, "a", 1, "one"), indexLine(ix, "a", 2, "two")}
		}, map[string]string{"a": "two"}},
		{"with OrderedBulk off the engine leaves the deleted document", OrderedBulk | ExternalVersions, func(ix string) []string {
			return []string{indexLine(ix, "a", 1, "one"), deleteLine(ix, "a", 2)}
		}, map[string]string{"a": "one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, Options{Off: tt.off})
			index := p.newIndex("order")
			if anyErr, items := p.bulk("?refresh=wait_for", tt.lines(index)...); anyErr {
				t.Fatalf("errors in %+v", items)
			}
			// With OrderedBulk off, refresh=wait_for waits for the last item
			// alone: the engine may serve the others later.
			eventually(t, "the documents", func() (bool, string) {
				got := map[string]string{}
				for _, id := range p.searchIDs(index) {
					_, _, src := p.getDoc(index, id)
					got[id], _ = src["words"].(string)
				}
				return jsonString(got) == jsonString(tt.wantDocs), fmt.Sprintf("got %v, want %v", got, tt.wantDocs)
			})
		})
	}
}

func TestBulkItemErrors(t *testing.T) {
	lines := func(ix string) []string {
		return []string{
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"good1"}}`, ix), `{"size":1}`,
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"bad"}}`, ix), `{"size":"not a number"}`,
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"good2"}}`, ix), `{"size":3}`,
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"notjson"}}`, ix), `{"size":`,
		}
	}
	t.Run("each item gets its own result", func(t *testing.T) {
		p := startProxy(t, Options{})
		index := p.newIndex("items")
		anyErr, items := p.bulk("?refresh=wait_for", lines(index)...)
		var got []string
		for _, it := range items {
			s := fmt.Sprint(it.Status)
			if it.Error != nil {
				s += " " + it.Error.Type
			}
			got = append(got, s)
		}
		want := []string{"201", "400 mapper_parsing_exception", "201", "400 mapper_parsing_exception"}
		if !slices.Equal(got, want) || !anyErr {
			t.Errorf("items: got %v (errors %t), want %v (errors true)", got, anyErr, want)
		}
		ids := p.searchIDs(index)
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"good1", "good2"}) {
			t.Errorf("indexed: got %v, want [good1 good2]", ids)
		}
	})
	t.Run("off, the engine's answer stands", func(t *testing.T) {
		p := startProxy(t, Options{Off: ItemErrors | ExternalVersions})
		index := p.newIndex("items-off")
		_, items := p.bulk("?refresh=wait_for", lines(index)...)
		if items[1].Status >= 300 {
			t.Errorf("off: the engine reported the refused item %+v; expected its 'created'", items[1])
		}
	})
}

func TestMalformedBulk(t *testing.T) {
	p := startProxy(t, Options{MaxBodyBytes: 1 << 20})
	tests := []struct {
		name, body, wantType string
		wantStatus           int
	}{
		{"empty", "", "action_request_validation_exception", 400},
		{"no final newline", `{"delete":{"_index":"x","_id":"a"}}`, "illegal_argument_exception", 400},
		{"garbage", "garbage\n", "illegal_argument_exception", 400},
		{"truncated action", `{"index":{"_index":"x","_id":"a"}` + "\n{}\n", "illegal_argument_exception", 400},
		{"unknown action", `{"frobnicate":{"_index":"x","_id":"a"}}` + "\n{}\n", "illegal_argument_exception", 400},
		{"two actions", `{"index":{},"delete":{}}` + "\n", "illegal_argument_exception", 400},
		{"unknown parameter", `{"index":{"_index":"x","_id":"a","colour":"red"}}` + "\n{}\n", "illegal_argument_exception", 400},
		{"missing source", `{"index":{"_index":"x","_id":"a"}}` + "\n", "action_request_validation_exception", 400},
		{"no index", `{"delete":{"_id":"a"}}` + "\n", "action_request_validation_exception", 400},
		{"delete without id", `{"delete":{"_index":"x"}}` + "\n", "action_request_validation_exception", 400},
		{"internal version", `{"delete":{"_index":"x","_id":"a","version":3}}` + "\n", "action_request_validation_exception", 400},
		{"unknown version type", `{"delete":{"_index":"x","_id":"a","version":3,"version_type":"force"}}` + "\n", "illegal_argument_exception", 400},
		{"id too long", `{"delete":{"_index":"x","_id":"` + strings.Repeat("é", 257) + `"}}` + "\n", "action_request_validation_exception", 400},
		{"huge body", strings.Repeat(`{"delete":{"_index":"x","_id":"a"}}`+"\n", 40000), "content_too_long_exception", 413},
		{"array action", `[1,2]` + "\n", "illegal_argument_exception", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.t = t
			status, m := p.doJSON(http.MethodPost, "/_bulk", tt.body)
			errObj, _ := m["error"].(map[string]any)
			if status != tt.wantStatus || errObj["type"] != tt.wantType || m["status"] != float64(tt.wantStatus) {
				t.Errorf("got %d %v, want %d %s", status, m, tt.wantStatus, tt.wantType)
			}
			if rc, _ := errObj["root_cause"].([]any); len(rc) != 1 {
				t.Errorf("root_cause: %v", errObj["root_cause"])
			}
		})
	}
	t.Run("off, the engine answers 200 with no items", func(t *testing.T) {
		off := startProxy(t, Options{Off: StrictBulk})
		status, m := off.doJSON(http.MethodPost, "/_bulk", "garbage\n")
		if items, _ := m["items"].([]any); status != http.StatusOK || len(items) != 0 {
			t.Errorf("off: got %d %v, want the engine's 200 with no items", status, m)
		}
	})
}

// s3Keys are ids with every kind of character an S3 key may hold.
var s3Keys = []string{
	"plain", "with/slash", "/leading", "trailing/", "a//b", "sp ace", "#hash", "per%cent", "%2F", "q?x=1&y=2",
	"ünïcødé", "日本語", "emoji 😀", `back\slash`, `quote"d`, "'single'", "+plus", "tab\there", "..", ".", "~tilde",
	"semi;colon", "a:b@c", "[brackets]{braces}", "<angle>", "star*", strings.Repeat("x", 512),
}

func TestIDsWithEveryS3Character(t *testing.T) {
	p := startProxy(t, Options{})
	index := p.newIndex("ids")
	var lines []string
	for i, id := range s3Keys {
		lines = append(lines, indexLine(index, id, int64(10+i), "word"))
	}
	if anyErr, items := p.bulk("?refresh=wait_for", lines...); anyErr {
		t.Fatalf("bulk: %+v", items)
	}
	got := p.searchIDs(index)
	slices.Sort(got)
	want := slices.Clone(s3Keys)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("search found %q, want %q", got, want)
	}
	for i, id := range s3Keys {
		found, version, src := p.getDoc(index, id)
		if !found || version != int64(10+i) || src["key"] != id {
			t.Errorf("get %q: found %t version %d source %v", id, found, version, src)
		}
		path := "/" + index + "/_doc/" + url.PathEscape(id) + "?version_type=external&version=" + fmt.Sprint(100+i)
		if status, body := p.do(http.MethodDelete, path, ""); status != http.StatusOK || !strings.Contains(body, `"result":"deleted"`) {
			t.Errorf("delete %q: %d %s", id, status, body)
		}
		if found, _, _ := p.getDoc(index, id); found {
			t.Errorf("get %q after its delete: found", id)
		}
	}
	eventually(t, "every document deleted", func() (bool, string) {
		ids := p.searchIDs(index)
		return len(ids) == 0, fmt.Sprint(ids)
	})
}

func TestSingleDocumentAPI(t *testing.T) {
	p := startProxy(t, Options{})
	index := p.newIndex("single")
	path := "/" + index + "/_doc/a%2Fb?version_type=external&version=4&refresh=wait_for"
	if status, m := p.doJSON(http.MethodPut, path, `{"words":"four"}`); status != http.StatusCreated || m["result"] != "created" || m["_version"] != float64(4) {
		t.Errorf("put: %d %v", status, m)
	}
	path = "/" + index + "/_doc/a%2Fb?version_type=external&version=2"
	status, m := p.doJSON(http.MethodPut, path, `{"words":"two"}`)
	if errObj, _ := m["error"].(map[string]any); status != http.StatusConflict || errObj["type"] != "version_conflict_engine_exception" {
		t.Errorf("put of a lower version: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodPut, "/"+index+"/_create/a%2Fb", `{"words":"again"}`); status != http.StatusConflict {
		t.Errorf("_create of an existing document: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodPut, "/"+index+"/_doc/x", `not json`); status != http.StatusBadRequest {
		t.Errorf("put of a body that is not JSON: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodGet, "/"+index+"/_count", ""); status != http.StatusOK || m["count"] != float64(1) {
		t.Errorf("count: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodGet, "/no-such-index-here/_doc/x", ""); status != http.StatusNotFound {
		t.Errorf("get from a missing index: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodGet, "/", ""); status != http.StatusOK || m["version"].(map[string]any)["distribution"] != "opensearch" {
		t.Errorf("root: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodPut, "/"+index, `{}`); status != http.StatusBadRequest || m["error"].(map[string]any)["type"] != "resource_already_exists_exception" {
		t.Errorf("create an existing index: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodPut, "/Bad_Name", `{}`); status != http.StatusBadRequest || m["error"].(map[string]any)["type"] != "invalid_index_name_exception" {
		t.Errorf("create an index named in capitals: %d %v", status, m)
	}
}

func TestSearchGivesSortValuesForSearchAfter(t *testing.T) {
	p := startProxy(t, Options{})
	index := p.newIndex("sort")
	var lines []string
	for i := range 5 {
		lines = append(lines, indexLine(index, fmt.Sprintf("k%d", i), int64(i+1), "w"))
	}
	p.bulk("?refresh=wait_for", lines...)
	var seen []string
	after := ""
	for page := 0; page < 10; page++ {
		body := `{"query":{"match_all":{}},"sort":[{"key":"asc"}],"size":2,"version":true` + after + `}`
		status, m := p.doJSON(http.MethodPost, "/"+index+"/_search", body)
		if status != http.StatusOK {
			t.Fatalf("search: %d %v", status, m)
		}
		hits := m["hits"].(map[string]any)["hits"].([]any)
		if len(hits) == 0 {
			break
		}
		for _, h := range hits {
			hm := h.(map[string]any)
			seen = append(seen, hm["_id"].(string))
			if hm["_version"] == nil {
				t.Errorf("hit %v has no _version", hm["_id"])
			}
		}
		after = `,"search_after":` + jsonString(hits[len(hits)-1].(map[string]any)["sort"])
	}
	if want := []string{"k0", "k1", "k2", "k3", "k4"}; !slices.Equal(seen, want) {
		t.Errorf("pages gave %v, want %v", seen, want)
	}
	// A sorted search of a missing index (or alias) is OpenSearch's 404.
	status, m := p.doJSON(http.MethodPost, "/no-such-index-here/_search", `{"query":{"match_all":{}},"sort":[{"key":"asc"}]}`)
	if errObj, _ := m["error"].(map[string]any); status != http.StatusNotFound || errObj["type"] != "index_not_found_exception" {
		t.Errorf("sorted search of a missing index: %d %v", status, m)
	}
}

func TestAliases(t *testing.T) {
	p := startProxy(t, Options{})
	first, second := p.newIndex("alias-a"), p.newIndex("alias-b")
	alias := first + "-live"
	post := func(body string) (int, map[string]any) { return p.doJSON(http.MethodPost, "/_aliases", body) }
	if status, m := post(fmt.Sprintf(`{"actions":[{"add":{"index":%q,"alias":%q}}]}`, first, alias)); status != http.StatusOK {
		t.Fatalf("add: %d %v", status, m)
	}
	_, items := p.bulk("?refresh=wait_for", indexLine(alias, "k", 1, "via alias"))
	if items[0].Index != first || items[0].Status != http.StatusCreated {
		t.Errorf("bulk by alias: %+v, want it in %s", items[0], first)
	}
	if ids := p.searchIDs(alias); !slices.Equal(ids, []string{"k"}) {
		t.Errorf("search by alias: %v", ids)
	}
	// The swap is atomic: the alias is never on both or neither.
	if status, m := post(fmt.Sprintf(`{"actions":[{"remove":{"index":%q,"alias":%q}},{"add":{"index":%q,"alias":%q}}]}`, first, alias, second, alias)); status != http.StatusOK {
		t.Fatalf("swap: %d %v", status, m)
	}
	if ids := p.searchIDs(alias); len(ids) != 0 {
		t.Errorf("search by alias after the swap: %v, want the empty second index", ids)
	}
	if status, m := p.doJSON(http.MethodGet, "/_alias/"+alias, ""); status != http.StatusOK || m[second] == nil {
		t.Errorf("get alias: %d %v", status, m)
	}
	// An alias may name two indexes: a search reads both, a write by it
	// has no write index (OpenSearch's answer without is_write_index).
	if status, m := post(fmt.Sprintf(`{"actions":[{"add":{"index":%q,"alias":%q}}]}`, first, alias)); status != http.StatusOK {
		t.Errorf("alias on two indexes: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodGet, "/_alias/"+alias, ""); status != http.StatusOK || m[first] == nil || m[second] == nil {
		t.Errorf("get an alias on two indexes: %d %v", status, m)
	}
	if ids := p.searchIDs(alias); !slices.Equal(ids, []string{"k"}) {
		t.Errorf("search by an alias on two indexes: %v", ids)
	}
	if _, items := p.bulk("", indexLine(alias, "k2", 1, "no write index")); items[0].Status != http.StatusBadRequest {
		t.Errorf("write by an alias on two indexes: %+v", items[0])
	}
	if status, m := post(fmt.Sprintf(`{"actions":[{"remove":{"index":%q,"alias":%q}}]}`, first, alias)); status != http.StatusOK {
		t.Errorf("remove: %d %v", status, m)
	}
	if status, m := post(fmt.Sprintf(`{"actions":[{"add":{"index":"no-such-index-x","alias":%q}}]}`, alias)); status != http.StatusNotFound {
		t.Errorf("alias on a missing index: %d %v", status, m)
	}
	if status, m := post(fmt.Sprintf(`{"actions":[{"add":{"index":%q,"alias":%q}}]}`, first, second)); status != http.StatusBadRequest {
		t.Errorf("alias named as an index: %d %v", status, m)
	}
	if status, m := p.doJSON(http.MethodGet, "/_alias/no-such-alias", ""); status != http.StatusNotFound {
		t.Errorf("get a missing alias: %d %v", status, m)
	}
	if status, _ := p.do(http.MethodHead, "/_alias/"+alias, ""); status != http.StatusOK {
		t.Errorf("head alias: %d", status)
	}
	if status, m := p.doJSON(http.MethodDelete, "/"+alias, ""); status != http.StatusBadRequest {
		t.Errorf("delete an index by its alias: %d %v", status, m)
	}
}

func TestStateSurvivesProxyAndEngineRestarts(t *testing.T) {
	ctx := t.Context()
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("needs the search engine (-short)")
	}
	engine, err := servers.StartSearch(ctx, servers.Options{Root: root, DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start an engine of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = engine.Stop() })
	state := filepath.Join(t.TempDir(), "state.jsonl")

	p := startProxy(t, Options{Engine: engine.Search, StateFile: state})
	index := p.newIndex("restart")
	alias := index + "-live"
	p.do(http.MethodPut, "/"+index+"/_alias/"+alias, "")
	p.bulk("", indexLine(alias, "k", 5, "five"), deleteLine(index, "gone", 9))

	if _, err := engine.Restart(ctx, servers.SearchServer, 0); err != nil {
		t.Fatalf("restart the engine: %v", err)
	}
	_, items := p.bulk("", indexLine(alias, "k", 4, "four"))
	if items[0].Status != http.StatusConflict {
		t.Errorf("after the engine's restart, version 4 after 5: %+v", items[0])
	}
	// The engine kept what it acknowledged just before it stopped.
	if found, version, src := p.getDoc(index, "k"); !found || version != 5 || src["words"] != "five" {
		t.Errorf("after the engine's restart: found %t version %d source %v", found, version, src)
	}
	if err := p.srv.Close(); err != nil {
		t.Fatal(err)
	}

	again := startProxy(t, Options{Engine: engine.Search, StateFile: state})
	_, items = again.bulk("", indexLine(alias, "k", 5, "five again"), indexLine(index, "gone", 8, "eight"), indexLine(alias, "k", 6, "six"))
	var got []int
	for _, it := range items {
		got = append(got, it.Status)
	}
	if !slices.Equal(got, []int{409, 409, 200}) || items[2].Index != index {
		t.Errorf("after the proxy's restart: statuses %v (want [409 409 200]), %+v", got, items)
	}
}

// TestConcurrentBulks sends versions of a few documents from several
// writers at once, in random order: each document must end as the accepted
// item of its highest version left it, and a higher version must still win.
func TestConcurrentBulks(t *testing.T) {
	p := startProxy(t, Options{})
	index := p.newIndex("concurrent")
	const writers, docs, versions = 6, 8, 12
	type op struct {
		version int64
		deleted bool
	}
	var mu sync.Mutex
	final := map[string]op{} // id → the accepted item of the highest version
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range versions {
				var lines []string
				var sent []op
				for range 5 {
					id := fmt.Sprintf("doc%d", rng.IntN(docs))
					v := int64(rng.IntN(versions) + 1)
					if rng.IntN(4) == 0 {
						lines = append(lines, deleteLine(index, id, v))
					} else {
						lines = append(lines, indexLine(index, id, v, fmt.Sprint("v", v)))
					}
					sent = append(sent, op{v, strings.HasPrefix(lines[len(lines)-1], `{"delete"`)})
				}
				status, body := p.do(http.MethodPost, "/_bulk", strings.Join(lines, "\n")+"\n")
				var resp struct {
					Items []map[string]bulkItem `json:"items"`
				}
				if err := json.Unmarshal([]byte(body), &resp); status != http.StatusOK || err != nil || len(resp.Items) != len(sent) {
					t.Errorf("bulk: %d %s", status, body)
					return
				}
				mu.Lock()
				for i, m := range resp.Items {
					for _, it := range m {
						if it.Error == nil && it.Status != 0 {
							if cur, ok := final[it.ID]; !ok || sent[i].version > cur.version {
								final[it.ID] = sent[i]
							}
						} else if it.Error.Type != "version_conflict_engine_exception" {
							t.Errorf("item %+v", it)
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	p.do(http.MethodPost, "/"+index+"/_refresh", "")
	for id, want := range final {
		found, version, src := p.getDoc(index, id)
		if found == want.deleted || found && (version != want.version || src["words"] != fmt.Sprint("v", want.version)) {
			t.Errorf("%s: found %t version %d source %v; want %+v", id, found, version, src, want)
		}
	}
	eventually(t, "the search finds the live documents", func() (bool, string) {
		var want []string
		for id, o := range final {
			if !o.deleted {
				want = append(want, id)
			}
		}
		got := p.searchIDs(index)
		slices.Sort(got)
		slices.Sort(want)
		return slices.Equal(got, want), fmt.Sprintf("got %v, want %v", got, want)
	})
}

func TestStrictMapping(t *testing.T) {
	create := `{"mappings":{"dynamic":"strict","properties":{"key":{"type":"keyword"},"meta":{"properties":{"owner":{"type":"keyword"}}}}}}`
	docs := func(ix string) []string {
		return []string{
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"ok"}}`, ix), `{"key":"a","meta":{"owner":"me"}}`,
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"extra"}}`, ix), `{"key":"b","colour":"red"}`,
			fmt.Sprintf(`{"index":{"_index":%q,"_id":"nested"}}`, ix), `{"key":"c","meta":{"group":"us"}}`,
		}
	}
	tests := []struct {
		name string
		off  Feature
		want []string
	}{
		{"on", 0, []string{"201", "400 strict_dynamic_mapping_exception mapping set to strict, dynamic introduction of [colour] within [_doc] is not allowed",
			"400 strict_dynamic_mapping_exception mapping set to strict, dynamic introduction of [group] within [meta] is not allowed"}},
		{"off, the engine maps the new fields", StrictMapping, []string{"201", "201", "201"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, Options{Off: tt.off})
			index := fmt.Sprintf("strict-%d-%d", time.Now().UnixNano()%1e9, indexes.Add(1))
			if status, body := p.do(http.MethodPut, "/"+index, create); status != http.StatusOK {
				t.Fatalf("create: %d %s", status, body)
			}
			p.dropAtCleanup(index)
			_, items := p.bulk("", docs(index)...)
			var got []string
			for _, it := range items {
				s := fmt.Sprint(it.Status)
				if it.Error != nil {
					s += " " + it.Error.Type + " " + it.Error.Reason
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// blindSearches passes requests to the engine, but while on answers its
// searches with no hit: an engine that has not made the writes
// searchable yet.
type blindSearches struct{ on atomic.Bool }

func (b *blindSearches) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.on.Load() && strings.HasSuffix(r.URL.Path, "/_search") {
		body := `{"hits":{"total":{"value":0,"relation":"eq"},"hits":[]}}`
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
	}
	return (&http.Transport{Proxy: nil}).RoundTrip(r)
}

// A refresh whose writes the engine does not serve within RefreshWait
// answers 503 (searchos refreshes again), never 200: a reindex switches
// to its new index after a refresh, and a 200 given too early once let
// four searches find nothing there.
func TestRefreshNotServedInTimeAnswers503(t *testing.T) {
	blind := &blindSearches{}
	p := startProxy(t, Options{RefreshWait: 300 * time.Millisecond, Client: &http.Client{Transport: blind}})
	index := p.newIndex("refresh-late")
	blind.on.Store(true)
	if errs, _ := p.bulk("", indexLine(index, "doc1", 1, "alpha")); errs {
		t.Fatal("bulk reported errors")
	}
	status, body := p.do(http.MethodPost, "/"+index+"/_refresh", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "not searchable after 300ms") {
		t.Fatalf("refresh with the write not served: %d %s, want 503 saying the write is not searchable", status, body)
	}
	blind.on.Store(false)
	if status, body := p.do(http.MethodPost, "/"+index+"/_refresh", ""); status != http.StatusOK {
		t.Fatalf("refresh with the write served: %d %s, want 200", status, body)
	}
}

// A refresh answers once the writes before it are searchable, whatever
// the proxy believes the engine's sync interval is: told 1 ms, a refresh
// that only waited out the interval would return before the engine's
// next flush.
func TestRefreshWaitsForTheWrites(t *testing.T) {
	p := startProxy(t, Options{RefreshInterval: time.Millisecond})
	index := p.newIndex("refresh")
	const n = 300
	var lines []string
	for i := range n {
		lines = append(lines, indexLine(index, fmt.Sprint("doc", i), 1, "alpha"))
	}
	if errs, _ := p.bulk("", lines...); errs {
		t.Fatal("bulk reported errors")
	}
	if status, body := p.do(http.MethodPost, "/"+index+"/_refresh", ""); status != http.StatusOK {
		t.Fatalf("refresh: %d %s", status, body)
	}
	if got := len(p.searchIDs(index)); got != n {
		t.Fatalf("after a refresh the search finds %d documents, want %d", got, n)
	}
	lines = lines[:0]
	for i := range n / 3 {
		lines = append(lines, deleteLine(index, fmt.Sprint("doc", i), 2))
	}
	if errs, _ := p.bulk("", lines...); errs {
		t.Fatal("bulk of deletes reported errors")
	}
	if status, body := p.do(http.MethodPost, "/_refresh", ""); status != http.StatusOK {
		t.Fatalf("refresh: %d %s", status, body)
	}
	if got := len(p.searchIDs(index)); got != n-n/3 {
		t.Fatalf("after deletes and a refresh the search finds %d documents, want %d", got, n-n/3)
	}
}
