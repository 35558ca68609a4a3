package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// indexerLine is one EMF line of the search indexer: one stream batch.
type indexerLine struct {
	at                                                 time.Time
	indexed, deleted, newer, refused, requests, failed float64
	lagMs                                              float64
}

// indexerBatches are the search indexer's batches within a run.
type indexerBatches struct {
	lines []indexerLine
}

// documents is what the batches settled: written, deleted, refused as
// older, refused for their content.
func (b indexerBatches) documents() float64 {
	var n float64
	for _, l := range b.lines {
		n += l.indexed + l.deleted + l.newer + l.refused
	}
	return n
}

func (b indexerBatches) requests() float64 {
	var n float64
	for _, l := range b.lines {
		n += l.requests
	}
	return n
}

func (b indexerBatches) failed() float64 {
	var n float64
	for _, l := range b.lines {
		n += l.failed
	}
	return n
}

// sizes are the documents of each batch, in the order they were written.
func (b indexerBatches) sizes() []int {
	out := make([]int, 0, len(b.lines))
	for _, l := range b.lines {
		out = append(out, int(l.indexed+l.deleted+l.newer+l.refused))
	}
	return out
}

func (l *functionLog) indexerBetween(from, to time.Time) indexerBatches {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b indexerBatches
	for _, x := range l.indexer {
		if !x.at.Before(from) && !x.at.After(to) {
			b.lines = append(b.lines, x)
		}
	}
	return b
}

// waitIndexer returns the indexer's batches since from once they have
// settled n documents, or after 5 s: a batch's EMF line comes just after
// its bulk request, which a count of the index may already have seen.
func (l *functionLog) waitIndexer(from time.Time, n int) indexerBatches {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b := l.indexerBetween(from, time.Now())
		if b.documents() >= float64(n) || time.Now().After(deadline) {
			return b
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countAt is the engine's count of an index at a moment.
type countAt struct {
	at time.Time
	n  int
}

// drainRate is documents per second from the first count above base to
// the last count: from the first documents indexed to the last, measured
// at the same polls for every writer. ok is false when fewer than two
// counts above base were seen.
func drainRate(counts []countAt, base int) (rate float64, span time.Duration, ok bool) {
	i := slices.IndexFunc(counts, func(c countAt) bool { return c.n > base })
	if i < 0 || i == len(counts)-1 {
		return 0, 0, false
	}
	first, last := counts[i], counts[len(counts)-1]
	span = last.at.Sub(first.at)
	if span <= 0 || last.n <= first.n {
		return 0, 0, false
	}
	return float64(last.n-first.n) / span.Seconds(), span, true
}

// counter counts the documents of an index or alias with the engine's
// /{index}/_count (the search proxy's: a search of size 0 with its total,
// which sorts and returns nothing, so polling it costs the engine little).
type counter struct {
	url   string // the search proxy itself, not the IAM gate in front of it: the bench observes, it is no caller of the product
	index string
}

// count is the documents of the index; 0 when it does not exist yet.
func (c counter) count(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/"+url.PathEscape(c.index)+"/_count", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return 0, err
	case resp.StatusCode == http.StatusNotFound:
		return 0, nil
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("count %s: %s: %.200s", c.index, resp.Status, body)
	}
	var out struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, fmt.Errorf("count %s: %w", c.index, err)
	}
	return out.Count, nil
}

// watchCount polls the count of c every 50 ms until it reaches want or
// limit passes, and returns every count it read.
func watchCount(ctx context.Context, c counter, want int, limit time.Duration) ([]countAt, error) {
	deadline := time.Now().Add(limit)
	var counts []countAt
	for {
		n, err := c.count(ctx)
		if err != nil {
			return counts, fmt.Errorf("count: %w", err)
		}
		counts = append(counts, countAt{at: time.Now(), n: n})
		if n >= want {
			return counts, nil
		}
		if time.Now().After(deadline) {
			return counts, fmt.Errorf("count: %d documents after %s, want %d", n, limit, want)
		}
		select {
		case <-ctx.Done():
			return counts, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lagProbe is one write of the lag run: when it was sent, and when a
// search first found it (zero: never).
type lagProbe struct {
	key, word   string
	sent, found time.Time
	err         error
}

func (p lagProbe) lag() time.Duration { return p.found.Sub(p.sent) }

// lagSeconds are the lags of the probes found, in seconds.
func lagSeconds(probes []lagProbe) []float64 {
	var out []float64
	for _, p := range probes {
		if !p.found.IsZero() {
			out = append(out, p.lag().Seconds())
		}
	}
	return out
}

// lagPerSecond groups the probes found by the second of the run they were
// sent in (from began): the median and the largest lag of each second, and
// how many were sent. A second with no probe found repeats the one before
// (0 at the start), so the lines stay continuous.
func lagPerSecond(probes []lagProbe, began time.Time) (p50, worst, sent []float64) {
	secs := 0
	for _, p := range probes {
		secs = max(secs, int(p.sent.Sub(began)/time.Second)+1)
	}
	lags := make([][]float64, secs)
	sent = make([]float64, secs)
	for _, p := range probes {
		s := int(p.sent.Sub(began) / time.Second)
		if s < 0 {
			continue
		}
		sent[s]++
		if !p.found.IsZero() {
			lags[s] = append(lags[s], p.lag().Seconds())
		}
	}
	p50, worst = make([]float64, secs), make([]float64, secs)
	for s, ls := range lags {
		switch {
		case len(ls) > 0:
			p50[s], worst[s] = percentile(ls, 50), slices.Max(ls)
		case s > 0:
			p50[s], worst[s] = p50[s-1], worst[s-1]
		}
	}
	return p50, worst, sent
}

// perThousand is n per 1,000 of of (NaN when of is 0).
func perThousand(n, of float64) float64 {
	if of == 0 {
		return math.NaN()
	}
	return n / of * 1000
}
