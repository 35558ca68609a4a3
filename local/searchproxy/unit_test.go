package searchproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseBulk(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // "action index id version" per item, or the error's type
	}{
		{"index and delete", `{"index":{"_index":"i","_id":"a","version":3,"version_type":"external"}}` + "\n{}\n" + `{"delete":{"_index":"i","_id":"b"}}` + "\n",
			"index i a 3|delete i b 0"},
		{"default index", `{"create":{"_id":"a"}}` + "\n{\"x\":1}\n", "create dflt a 0"},
		{"blank lines skipped", "\n" + `{"delete":{"_index":"i","_id":"a"}}` + "\n\n", "delete i a 0"},
		{"source not an object fails the item only", `{"index":{"_index":"i","_id":"a"}}` + "\n[1]\n", "index i a 0 mapper_parsing_exception"},
		{"no newline at the end", `{"delete":{"_index":"i","_id":"a"}}`, "illegal_argument_exception"},
		{"empty", " \n", "action_request_validation_exception"},
		{"unknown action", `{"upsert":{"_index":"i"}}` + "\n", "illegal_argument_exception"},
		{"unknown parameter", `{"delete":{"_index":"i","_id":"a","ttl":1}}` + "\n", "illegal_argument_exception"},
		{"negative version", `{"delete":{"_index":"i","_id":"a","version":-1,"version_type":"external"}}` + "\n", "action_request_validation_exception"},
		{"external without version", `{"delete":{"_index":"i","_id":"a","version_type":"external"}}` + "\n", "action_request_validation_exception"},
		{"id not a string", `{"delete":{"_index":"i","_id":5}}` + "\n", "illegal_argument_exception"},
		{"id of 512 bytes", `{"delete":{"_index":"i","_id":"` + strings.Repeat("a", 512) + `"}}` + "\n", "delete i " + strings.Repeat("a", 512) + " 0"},
		{"id of 513 bytes", `{"delete":{"_index":"i","_id":"` + strings.Repeat("a", 513) + `"}}` + "\n", "action_request_validation_exception"},
		{"null", "null\n", "illegal_argument_exception"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, apiErr := parseBulk([]byte(tt.body), "dflt")
			var got []string
			if apiErr != nil {
				got = append(got, apiErr.Type)
				if apiErr.Status != http.StatusBadRequest {
					t.Errorf("status %d", apiErr.Status)
				}
			}
			for _, it := range items {
				s := fmt.Sprintf("%s %s %s %d", it.action, it.index, it.id, it.version)
				if it.err != nil {
					s += " " + it.err.Type
				}
				got = append(got, s)
			}
			if strings.Join(got, "|") != tt.want {
				t.Errorf("got %q, want %q", strings.Join(got, "|"), tt.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	ext := func(action string, v int64) *item {
		return &item{action: action, index: "i", id: "k", external: true, version: v}
	}
	seq := func(n int64) *int64 { return &n }
	tests := []struct {
		name   string
		it     *item
		st     docState
		exists bool
		want   string // "status result version deleted" or the error's status and type
	}{
		{"new, external", ext(actIndex, 5), docState{}, false, "201 created 5 false"},
		{"higher", ext(actIndex, 6), docState{Version: 5}, true, "200 updated 6 false"},
		{"equal", ext(actIndex, 5), docState{Version: 5}, true, "409 version_conflict_engine_exception"},
		{"equal, external_gte", &item{action: actIndex, id: "k", external: true, gte: true, version: 5}, docState{Version: 5}, true, "200 updated 5 false"},
		{"over a tombstone", ext(actIndex, 8), docState{Version: 7, Deleted: true}, true, "201 created 8 false"},
		{"under a tombstone", ext(actIndex, 6), docState{Version: 7, Deleted: true}, true, "409 version_conflict_engine_exception"},
		{"delete", ext(actDelete, 7), docState{Version: 5}, true, "200 deleted 7 true"},
		{"delete unknown", ext(actDelete, 2), docState{}, false, "404 not_found 2 true"},
		{"delete lower", ext(actDelete, 4), docState{Version: 5}, true, "409 version_conflict_engine_exception"},
		{"internal index", &item{action: actIndex, id: "k"}, docState{Version: 3}, true, "200 updated 4 false"},
		{"create existing", &item{action: actCreate, id: "k"}, docState{Version: 3}, true, "409 version_conflict_engine_exception"},
		{"create over a tombstone", &item{action: actCreate, id: "k"}, docState{Version: 3, Deleted: true}, true, "201 created 4 false"},
		{"update missing", &item{action: actUpdate, id: "k"}, docState{}, false, "404 document_missing_exception"},
		{"if_seq_no matches", &item{action: actIndex, id: "k", ifSeqNo: seq(4), ifPTerm: seq(1)}, docState{Version: 2, SeqNo: 4}, true, "200 updated 3 false"},
		{"if_seq_no differs", &item{action: actIndex, id: "k", ifSeqNo: seq(3), ifPTerm: seq(1)}, docState{Version: 2, SeqNo: 4}, true, "409 version_conflict_engine_exception"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			if e := judge(tt.it, tt.st, tt.exists); e != nil {
				got = fmt.Sprintf("%d %s", e.Status, e.Type)
			} else {
				got = fmt.Sprintf("%d %s %d %t", tt.it.status, tt.it.result, tt.it.after.Version, tt.it.after.Deleted)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	e := judge(ext(actIndex, 3), docState{Version: 7}, true)
	if want := "[k]: version conflict, current version [7] is higher or equal to the one provided [3]"; e == nil || e.Reason != want {
		t.Errorf("reason %v, want %q", e, want)
	}
}

func TestRoundsSendOneItemPerID(t *testing.T) {
	p := &Proxy{}
	mk := func(n int, action, id string) *item { return &item{n: n, action: action, index: "i", id: id} }
	items := []*item{mk(0, actIndex, "a"), mk(1, actDelete, "a"), mk(2, actIndex, "b"), mk(3, actUpdate, "b"), mk(4, actIndex, "a")}
	var got []string
	for _, round := range p.rounds(items) {
		var r []string
		for _, it := range round {
			r = append(r, fmt.Sprint(it.n))
		}
		got = append(got, strings.Join(r, ","))
	}
	// a: its last index supersedes the index and the delete; b: its update
	// goes after its index, in a request of its own.
	if want := []string{"2,4", "3"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("rounds %v, want %v", got, want)
	}
}

func TestStoreReplaysItsLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "state.jsonl")
	s, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.commit(record{Op: "doc", Index: "i", ID: "a/b ü", Version: 5, SeqNo: 1}))
	must(s.commit(record{Op: "doc", Index: "i", ID: "a/b ü", Version: 7, SeqNo: 2, Deleted: true}, record{Op: "doc", Index: "j", ID: "x", Version: 1, SeqNo: 1}))
	must(s.commit(record{Op: "alias", Alias: "live", Index: "i"}, record{Op: "alias", Alias: "old", Index: "j"}))
	must(s.commit(record{Op: "alias", Alias: "live", Index: "j"}, record{Op: "unalias", Alias: "live", Index: "j"}))
	must(s.commit(record{Op: "drop", Index: "j"}))
	must(s.close())

	again, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.close()
	if d, ok := again.doc(docKey{"i", "a/b ü"}); !ok || d != (docState{Version: 7, SeqNo: 2, Deleted: true}) {
		t.Errorf("tombstone after replay: %+v %t", d, ok)
	}
	if _, ok := again.doc(docKey{"j", "x"}); ok {
		t.Error("a dropped index's document survived")
	}
	if got := again.aliasMap(); len(got) != 1 || !slices.Equal(got["live"], []string{"i"}) {
		t.Errorf("aliases after replay: %v", got)
	}
	if n := again.nextSeq("i"); n != 3 {
		t.Errorf("next sequence number %d, want 3", n)
	}
}

func TestKeyLocksSerializeOneDocument(t *testing.T) {
	s, _ := openStore("")
	var mu sync.Mutex
	inside := map[docKey]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			keys := []docKey{{"i", fmt.Sprint(w % 3)}, {"i", "shared"}}
			for range 50 {
				unlock := s.lock(keys)
				mu.Lock()
				for _, k := range keys {
					if inside[k]++; inside[k] > 1 {
						t.Errorf("two holders of %v", k)
					}
				}
				mu.Unlock()
				mu.Lock()
				for _, k := range keys {
					inside[k]--
				}
				mu.Unlock()
				unlock()
			}
		})
	}
	wg.Wait()
	if len(s.locks) != 0 {
		t.Errorf("%d locks left", len(s.locks))
	}
}

func TestCompareSorted(t *testing.T) {
	keys := []sortKey{{field: "modified", desc: true}, {field: "key"}}
	tests := []struct {
		a, b string
		want int
	}{
		{`["2026-11-02T00:00:00Z","a"]`, `["2026-11-01T00:00:00Z","a"]`, -1},
		{`["2026-11-01T00:00:00Z","a"]`, `["2026-11-01T00:00:00Z","b"]`, -1},
		{`["2026-11-01T00:00:00Z","b"]`, `["2026-11-01T00:00:00Z","b"]`, 0},
		{`[null,"a"]`, `["2026-11-01T00:00:00Z","a"]`, 1},
	}
	for _, tt := range tests {
		var a, b []any
		_ = json.Unmarshal([]byte(tt.a), &a)
		_ = json.Unmarshal([]byte(tt.b), &b)
		if got := compareSorted(a, b, keys); got != tt.want {
			t.Errorf("compare %s %s = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	if got := compareSorted([]any{json.Number("10")}, []any{9.0}, []sortKey{{field: "size"}}); got != 1 {
		t.Errorf("numbers compare as numbers: %d", got)
	}
}

func TestUnflushedForgetsOldWrites(t *testing.T) {
	var u unflushed
	start := time.Now()
	u.add(docKey{"i", "old"}, pendingWrite{at: start})
	for n := range 4095 {
		u.add(docKey{"i", fmt.Sprint(n)}, pendingWrite{at: start.Add(forgetAfter + time.Second)})
	}
	if _, ok := u.get(docKey{"i", "old"}); ok {
		t.Error("a write older than forgetAfter is still pending")
	}
	if _, ok := u.get(docKey{"i", "4094"}); !ok {
		t.Error("a recent write was forgotten")
	}
}
