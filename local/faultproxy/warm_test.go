package faultproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
)

// The proxy answers for warm throughput as AWS does: DescribeTable reports
// it (a new table's by default), a warm-only UpdateTable raises it without
// reaching DynamoDB Local (which refuses one), never lowers it, and the
// table's write limit follows.
func TestWarmThroughputAnswers(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	up := MustUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Header.Get("X-Amz-Target"))
		mu.Unlock()
		var req struct{ TableName string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.TableName == "gone" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Cannot do operations on a non-existent table"}`))
			return
		}
		_, _ = w.Write([]byte(`{"Table":{"TableName":"` + req.TableName + `","TableStatus":"ACTIVE"}}`))
	}))
	p, url := MustStart(t, DynamoDB, up.URL, WithTableWriteLimit(TableWriteLimit{Scale: 0.01}))
	call := func(action string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(b))
		req.Header.Set("X-Amz-Target", dynamoTarget+action)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp.StatusCode, doc
	}
	warmOf := func(doc map[string]any, field string) [2]float64 {
		t.Helper()
		table, _ := doc[field].(map[string]any)
		wt, _ := table["WarmThroughput"].(map[string]any)
		if wt == nil || wt["Status"] != "ACTIVE" {
			t.Fatalf("%s has no active WarmThroughput: %v", field, doc)
		}
		r, _ := wt["ReadUnitsPerSecond"].(float64)
		w, _ := wt["WriteUnitsPerSecond"].(float64)
		return [2]float64{r, w}
	}
	limit := func(table string) float64 {
		for _, s := range p.TableStats() {
			if s.Table == table {
				return s.Limit
			}
		}
		return -1
	}

	if status, doc := call("DescribeTable", map[string]string{"TableName": "t"}); status != 200 || warmOf(doc, "Table") != [2]float64{12000, 4000} {
		t.Fatalf("a new table's DescribeTable: %d %v, want 12,000 reads and 4,000 writes", status, doc)
	}
	raise := func(read, write int) (int, map[string]any) {
		return call("UpdateTable", map[string]any{"TableName": "t", "WarmThroughput": map[string]int{"ReadUnitsPerSecond": read, "WriteUnitsPerSecond": write}})
	}
	if status, doc := raise(15000, 20000); status != 200 || warmOf(doc, "TableDescription") != [2]float64{15000, 20000} {
		t.Fatalf("raising: %d %v", status, doc)
	}
	if got := limit("t"); got != 200 {
		t.Errorf("the raised table's limit is %v units/s, want 20,000 × 0.01 = 200", got)
	}
	if _, doc := raise(13000, 5000); warmOf(doc, "TableDescription") != [2]float64{15000, 20000} {
		t.Errorf("a lower warm throughput lowered it: %v", doc)
	}
	if _, doc := call("DescribeTable", map[string]string{"TableName": "t"}); warmOf(doc, "Table") != [2]float64{15000, 20000} {
		t.Errorf("DescribeTable after the raise: %v", doc)
	}
	if status, doc := raise(1, 1); status != 200 || doc["TableDescription"] == nil {
		t.Errorf("a raise to below a new table's: %d %v", status, doc)
	}
	// A missing table: DynamoDB Local's answer, and nothing learnt.
	if status, doc := call("UpdateTable", map[string]any{"TableName": "gone", "WarmThroughput": map[string]int{"WriteUnitsPerSecond": 9000}}); status != 400 ||
		!bytes.Contains([]byte(doc["__type"].(string)), []byte("ResourceNotFoundException")) {
		t.Errorf("raising a missing table: %d %v", status, doc)
	}
	if got := limit("gone"); got != -1 {
		t.Errorf("a missing table got a limit: %v", got)
	}
	// An UpdateTable with other changes goes to DynamoDB Local as it is.
	call("UpdateTable", map[string]any{"TableName": "t", "DeletionProtectionEnabled": true})
	mu.Lock()
	defer mu.Unlock()
	updates := 0
	for _, target := range reached {
		if target == dynamoTarget+"UpdateTable" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d UpdateTable requests reached the upstream, want only the one that is not warm-only (%v)", updates, reached)
	}
}
