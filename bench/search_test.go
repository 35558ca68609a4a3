package main

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

func TestDrainRate(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(ms int, n int) countAt { return countAt{at: t0.Add(time.Duration(ms) * time.Millisecond), n: n} }
	for _, tc := range []struct {
		name   string
		counts []countAt
		base   int
		rate   float64
		span   time.Duration
		ok     bool
	}{
		{"from the first count above base", []countAt{at(0, 10), at(50, 10), at(100, 510), at(600, 1010), at(1100, 2010)}, 10, 1500, time.Second, true},
		{"all in one count", []countAt{at(0, 0), at(50, 1000)}, 0, 0, 0, false},
		{"nothing above base", []countAt{at(0, 5), at(50, 5)}, 5, 0, 0, false},
		{"none", nil, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate, span, ok := drainRate(tc.counts, tc.base)
			if rate != tc.rate || span != tc.span || ok != tc.ok {
				t.Errorf("got %v %v %v, want %v %v %v", rate, span, ok, tc.rate, tc.span, tc.ok)
			}
		})
	}
}

func TestLagPerSecond(t *testing.T) {
	began := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	probe := func(sentMs, lagMs int) lagProbe {
		p := lagProbe{sent: began.Add(time.Duration(sentMs) * time.Millisecond)}
		if lagMs >= 0 {
			p.found = p.sent.Add(time.Duration(lagMs) * time.Millisecond)
		}
		return p
	}
	probes := []lagProbe{
		probe(0, 400), probe(500, 600), probe(900, 1000), // second 0
		probe(1200, -1),                    // second 1: never found
		probe(2100, 300), probe(2600, 500), // second 2
	}
	p50, worst, sent := lagPerSecond(probes, began)
	if got, want := fmt.Sprint(p50), "[0.6 0.6 0.3]"; got != want {
		t.Errorf("p50 %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(worst), "[1 1 0.5]"; got != want {
		t.Errorf("worst %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(sent), "[3 1 2]"; got != want {
		t.Errorf("sent %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(lagSeconds(probes)), "[0.4 0.6 1 0.3 0.5]"; got != want {
		t.Errorf("lagSeconds %s, want %s", got, want)
	}
}

// The indexer's EMF lines, as its emf.Writer writes them, are read from
// the function log beside the other functions' lines.
func TestFunctionLogIndexerLines(t *testing.T) {
	var buf bytes.Buffer
	w := emf.New(&buf, "ddbpipe", map[string]string{"Function": "search-indexer", "Stack": "ddbpipe"})
	for _, n := range []float64{500, 480} {
		if err := w.Emit([]emf.Metric{
			{Name: "DocumentsIndexed", Unit: emf.Count, Value: n}, {Name: "DocumentsDeleted", Unit: emf.Count, Value: 10},
			{Name: "StaleWritesRefused", Unit: emf.Count, Value: 2}, {Name: "DocumentsRefused", Unit: emf.Count, Value: 0},
			{Name: "BulkRequests", Unit: emf.Count, Value: 1}, {Name: "IndexBatchesFailed", Unit: emf.Count, Value: 0},
			{Name: "IndexLag", Unit: emf.Milliseconds, Value: 900},
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var l functionLog
	from := time.Now()
	other := `{"time":"2026-11-28T12:00:00Z","level":"INFO","msg":"indexed batch","function":"SearchIndexerFunction","changes":500}` + "\n"
	if _, err := l.Write([]byte(other + buf.String())); err != nil {
		t.Fatal(err)
	}
	b := l.indexerBetween(from, time.Now())
	if len(b.lines) != 2 || b.documents() != 1004 || b.requests() != 2 || b.failed() != 0 || fmt.Sprint(b.sizes()) != "[512 492]" || b.lines[0].lagMs != 900 {
		t.Errorf("got %+v (documents %v, requests %v, sizes %v), want two batches of 512 and 492 documents, one request each",
			b.lines, b.documents(), b.requests(), b.sizes())
	}
}

func TestLetters(t *testing.T) {
	for n, want := range map[int]string{0: "a", 25: "z", 26: "ba", 27: "bb", 26*26 + 3: "bad"} {
		if got := letters(n); got != want {
			t.Errorf("letters(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPerThousand(t *testing.T) {
	if got := perThousand(2, 1000); got != 2 {
		t.Errorf("perThousand(2, 1000) = %v, want 2", got)
	}
	if got := perThousand(3, 0); !math.IsNaN(got) {
		t.Errorf("perThousand(3, 0) = %v, want NaN", got)
	}
}
