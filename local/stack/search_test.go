package stack_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// TestSearchEndpoint: the stack puts the search proxy in front of the
// servers' engine and names it, and only it, in Vars and local.env.
func TestSearchEndpoint(t *testing.T) {
	st := stacktest.Need(t)
	if st.Search == "" {
		t.Skipf("the servers have no search engine (%s unset)", servers.EnvSearch)
	}
	env := upBare(t, "search")

	url := env.Vars[stack.SearchEndpointVar]
	if url == "" || url != env.SearchURL || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("%s = %q, SearchURL %q", stack.SearchEndpointVar, url, env.SearchURL)
	}
	if v, ok := env.Vars[servers.EnvSearch]; ok {
		t.Errorf("Vars name the engine itself too: %s=%s", servers.EnvSearch, v)
	}
	envFile := filepath.Join(t.TempDir(), "local.env")
	if err := env.WriteEnvFile(envFile); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(envFile); !strings.Contains(string(data), "export "+stack.SearchEndpointVar+"='"+url+"'") {
		t.Errorf("local.env lacks the search endpoint:\n%s", data)
	}

	index := fmt.Sprintf("stack-search-%d", time.Now().UnixNano()%1e9)
	bulk := func(version int) string {
		return fmt.Sprintf(`{"index":{"_index":%q,"_id":"k","version":%d,"version_type":"external"}}`+"\n"+`{"key":"k"}`+"\n", index, version)
	}
	for _, tc := range []struct {
		body, want string
	}{
		{bulk(5), `"status":201`},
		{bulk(3), `"type":"version_conflict_engine_exception"`},
	} {
		resp, err := http.Post(url+"/_bulk", "application/x-ndjson", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), tc.want) {
			t.Errorf("bulk through %s: %d %s, want %s", url, resp.StatusCode, got, tc.want)
		}
	}

	// The fault proxy between the search proxy and the engine fails
	// requests as asked; clients get OpenSearch-shaped errors they retry.
	faults := env.Proxies[stack.SearchFaults]
	faults.SetFaults(faultproxy.Faults{ServerErrorRate: 1, ServerErrorStatus: http.StatusServiceUnavailable})
	resp, err := http.Post(url+"/"+index+"/_search", "application/json", strings.NewReader(`{"query":{"match_all":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(got), `"status":503`) {
		t.Errorf("search under faults: %d %s", resp.StatusCode, got)
	}
	faults.SetFaults(faultproxy.Faults{})
	if n := faults.Stats().ServerErrors; n == 0 {
		t.Error("the fault proxy counted no server error")
	}
}
