package emf

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestEmit(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf, "ddbpipe", map[string]string{"Function": "counter"})
	w.now = func() time.Time { return time.UnixMilli(1763719200000) }
	if err := w.Emit([]Metric{{"VotesAccepted", Count, 12}, {"CoalescingRatio", None, 9.5}}, map[string]any{"requestId": "r1"}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function        string
		VotesAccepted   float64
		CoalescingRatio float64
		RequestID       string `json:"requestId"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%s: %v", buf.String(), err)
	}
	m := doc.AWS.CloudWatchMetrics
	if doc.AWS.Timestamp != 1763719200000 || len(m) != 1 || m[0].Namespace != "ddbpipe" || len(m[0].Metrics) != 2 ||
		m[0].Dimensions[0][0] != "Function" || doc.Function != "counter" || doc.VotesAccepted != 12 || doc.CoalescingRatio != 9.5 || doc.RequestID != "r1" {
		t.Errorf("EMF line %s", buf.String())
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Error("not exactly one line")
	}
}

func TestEmitRejects(t *testing.T) {
	w := New(&bytes.Buffer{}, "ns", map[string]string{"Function": "f"})
	if err := w.Emit([]Metric{{"Function", Count, 1}}, nil); err == nil {
		t.Error("a metric named like a dimension was accepted")
	}
	many := make([]Metric, 101)
	for i := range many {
		many[i] = Metric{Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), Unit: Count}
	}
	if err := w.Emit(many, nil); err == nil {
		t.Error("101 metrics in one line were accepted")
	}
}
