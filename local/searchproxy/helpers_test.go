package searchproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// testProxy is a proxy in front of the tests' search engine.
type testProxy struct {
	t   *testing.T
	srv *Server
}

func startProxy(t *testing.T, o Options) *testProxy {
	t.Helper()
	if o.Engine == "" {
		o.Engine = stacktest.NeedSearch(t)
	}
	o.User, o.Password = servers.SearchUser, servers.SearchPassword
	if o.RefreshInterval == 0 {
		o.RefreshInterval = servers.ZincWALSyncInterval()
	}
	srv, err := Start(o, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	return &testProxy{t: t, srv: srv}
}

var indexes atomic.Int64

// newIndex names an index of the test's own (the engine is shared) and
// creates it with the mapping the indexer uses.
func (p *testProxy) newIndex(prefix string) string {
	p.t.Helper()
	name := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, indexes.Add(1))
	status, body := p.do(http.MethodPut, "/"+name, `{"settings":{"index":{"number_of_shards":1,"gc_deletes":"3650d"}},
		"mappings":{"properties":{"key":{"type":"keyword"},"words":{"type":"text"},"size":{"type":"long"},"version":{"type":"long"},"modified":{"type":"date"}}}}`)
	if status != http.StatusOK {
		p.t.Fatalf("create index %s: %d %s", name, status, body)
	}
	p.dropAtCleanup(name)
	return name
}

// dropAtCleanup deletes an index when the test ends: the engine is
// shared, and each index it keeps costs it CPU (its WAL's timer).
func (p *testProxy) dropAtCleanup(index string) {
	p.t.Cleanup(func() {
		req, err := http.NewRequest(http.MethodDelete, p.srv.URL+"/"+index, nil)
		if err != nil {
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
}

// do sends a request and returns the status and the body.
func (p *testProxy) do(method, path, body string) (int, string) {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.srv.URL+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// doJSON sends a request and decodes the answer.
func (p *testProxy) doJSON(method, path, body string) (int, map[string]any) {
	p.t.Helper()
	status, data := p.do(method, path, body)
	var m map[string]any
	if data != "" && method != http.MethodHead {
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			p.t.Fatalf("%s %s: %d, answer does not parse: %v\n%s", method, path, status, err, data)
		}
	}
	return status, m
}

// bulkItem is one item of a bulk answer, flattened.
type bulkItem struct {
	Action  string
	Index   string `json:"_index"`
	ID      string `json:"_id"`
	Status  int    `json:"status"`
	Result  string `json:"result"`
	Version int64  `json:"_version"`
	SeqNo   int64  `json:"_seq_no"`
	Error   *struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"error"`
}

// bulk sends NDJSON lines and returns the items (failing on a non-200).
func (p *testProxy) bulk(query string, lines ...string) (errorsFlag bool, items []bulkItem) {
	p.t.Helper()
	status, body := p.do(http.MethodPost, "/_bulk"+query, strings.Join(lines, "\n")+"\n")
	if status != http.StatusOK {
		p.t.Fatalf("bulk: %d %s", status, body)
	}
	var resp struct {
		Errors bool                         `json:"errors"`
		Items  []map[string]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		p.t.Fatalf("bulk answer: %v\n%s", err, body)
	}
	for _, m := range resp.Items {
		for action, raw := range m {
			var it bulkItem
			if err := json.Unmarshal(raw, &it); err != nil {
				p.t.Fatal(err)
			}
			it.Action = action
			items = append(items, it)
		}
	}
	return resp.Errors, items
}

// indexLine is a bulk index action with an external version and its source.
func indexLine(index, id string, version int64, words string) string {
	meta, _ := json.Marshal(map[string]any{"index": map[string]any{"_index": index, "_id": id, "version": version, "version_type": "external"}})
	src, _ := json.Marshal(map[string]any{"key": id, "words": words, "version": version})
	return string(meta) + "\n" + string(src)
}

func deleteLine(index, id string, version int64) string {
	meta, _ := json.Marshal(map[string]any{"delete": map[string]any{"_index": index, "_id": id, "version": version, "version_type": "external"}})
	return string(meta)
}

// getDoc reads a document by id through the proxy.
func (p *testProxy) getDoc(index, id string) (found bool, version int64, source map[string]any) {
	p.t.Helper()
	status, m := p.doJSON(http.MethodGet, "/"+url.PathEscape(index)+"/_doc/"+url.PathEscape(id), "")
	if status != http.StatusOK && status != http.StatusNotFound {
		p.t.Fatalf("get %s/%s: %d %v", index, id, status, m)
	}
	found, _ = m["found"].(bool)
	v, _ := m["_version"].(float64)
	source, _ = m["_source"].(map[string]any)
	return found, int64(v), source
}

// searchIDs returns the ids a search of every document of index finds.
func (p *testProxy) searchIDs(index string) []string {
	p.t.Helper()
	status, m := p.doJSON(http.MethodPost, "/"+index+"/_search", `{"query":{"match_all":{}},"size":1000,"_source":false}`)
	if status != http.StatusOK {
		p.t.Fatalf("search %s: %d %v", index, status, m)
	}
	var ids []string
	for _, h := range m["hits"].(map[string]any)["hits"].([]any) {
		ids = append(ids, h.(map[string]any)["_id"].(string))
	}
	return ids
}

// eventually waits until cond holds (at most 10 s), failing with what it
// last saw.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within 10s; last: %s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jsonString(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
