package faultproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// post sends a DynamoDB request to the proxy and returns the status and
// the error code of the answer ("" on 200).
func post(t *testing.T, url, action string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(b))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Type                string `json:"__type"`
		CancellationReasons []struct{ Code string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	code := doc.Type
	if i := bytes.IndexByte([]byte(code), '#'); i >= 0 {
		code = code[i+1:]
	}
	if len(doc.CancellationReasons) > 0 {
		code += ":" + doc.CancellationReasons[0].Code
	}
	return resp.StatusCode, code
}

func put(table string) map[string]any {
	return map[string]any{"TableName": table, "Item": map[string]any{"pk": map[string]string{"S": "k"}}}
}

func TestTableWriteLimit(t *testing.T) {
	up := MustUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }))
	clock := newFakeClock()
	p, url := MustStart(t, DynamoDB, up.URL, WithClock(clock), WithTableWriteLimit(TableWriteLimit{Scale: 0.005}))
	// A new table: 4,000 × 0.005 = 20 units a second, a second's burst.
	admitted := func(table string, n int) int {
		ok := 0
		for range n {
			if status, _ := post(t, url, "PutItem", put(table)); status == http.StatusOK {
				ok++
			}
		}
		return ok
	}
	if got := admitted("cold", 30); got != 20 {
		t.Errorf("a new table admitted %d of 30 one-unit puts at once, want 20", got)
	}
	if _, code := post(t, url, "PutItem", put("cold")); code != ProvisionedThroughputExceeded {
		t.Errorf("over the limit: %q, want %s", code, ProvisionedThroughputExceeded)
	}
	tx := map[string]any{"TransactItems": []any{map[string]any{"Put": put("cold")}}}
	if _, code := post(t, url, "TransactWriteItems", tx); code != "TransactionCanceledException:ThrottlingError" {
		t.Errorf("a transaction over the limit: %q", code)
	}
	clock.Advance(500 * time.Millisecond)
	if got := admitted("cold", 20); got != 10 {
		t.Errorf("half a second later: %d admitted, want 10", got)
	}

	// Created warm at 12,000 units: 60 a second.
	post(t, url, "CreateTable", map[string]any{"TableName": "warm", "WarmThroughput": map[string]any{"WriteUnitsPerSecond": 12000}})
	if got := admitted("warm", 80); got != 60 {
		t.Errorf("a table created warm at 12,000 admitted %d of 80 at once, want 60", got)
	}
	// Raised later with UpdateTable: 100 a second from then on.
	post(t, url, "UpdateTable", map[string]any{"TableName": "cold", "WarmThroughput": map[string]any{"WriteUnitsPerSecond": 20000}})
	if got := admitted("cold", 120); got != 100 {
		t.Errorf("after a raise to 20,000: %d of 120 admitted, want 100", got)
	}
	// An operator's override, then back to the table's own.
	if err := p.SetTableWriteLimit("cold", 5); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if got := admitted("cold", 10); got != 5 {
		t.Errorf("limit set to 5: %d admitted", got)
	}
	var cold TableStat
	for _, s := range p.TableStats() {
		if s.Table == "cold" {
			cold = s
		}
	}
	if cold.Limit != 5 || cold.Throttled == 0 || cold.AdmittedUnits >= cold.Units {
		t.Errorf("stats of cold: %+v", cold)
	}
	if got := p.Stats().Counts.TableThrottled; got == 0 {
		t.Errorf("TableThrottled = 0")
	}
	if _, err := New(SQS, up.URL, WithTableWriteLimit(TableWriteLimit{})); err == nil {
		t.Error("a table write limit on an SQS proxy was accepted")
	}
}
