package searchos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

type obj = map[string]any

// Find runs a planned query on the search alias. Each word must match the
// key's words or the text (one multi_match per word, so the words may sit
// in different fields); filters narrow without scoring. With words, hits
// come by score, else newest first; the key breaks ties, so pages are
// stable.
func (e *Engine) Find(ctx context.Context, p search.Plan) (search.Found, error) {
	body, err := json.Marshal(findBody(p))
	if err != nil {
		return search.Found{}, fmt.Errorf("searchos: query: %w", err)
	}
	resp, err := e.c.Search(ctx, &opensearchapi.SearchReq{Indices: []string{e.alias}, Body: bytes.NewReader(body)})
	if err != nil {
		err = classify("search", responseOf(resp), err)
		if errors.Is(err, search.ErrNoIndex) {
			return search.Found{}, nil // no object was ever written (or a reindex is due): nothing to find
		}
		return search.Found{}, err
	}
	found := search.Found{Total: resp.Hits.Total.Value}
	for _, h := range resp.Hits.Hits {
		var s source
		if err := json.Unmarshal(h.Source, &s); err != nil {
			return search.Found{}, fmt.Errorf("searchos: hit %s: %w", h.ID, err)
		}
		found.Hits = append(found.Hits, s.hit(float64(h.Score)))
	}
	return found, nil
}

func findBody(p search.Plan) obj {
	var must, filter []any
	for _, t := range p.Terms {
		must = append(must, obj{"multi_match": obj{"query": t, "fields": []string{"key_words", "text"}}})
	}
	if p.ContentType != "" {
		if p.Family {
			filter = append(filter, obj{"prefix": obj{"content_type": p.ContentType}})
		} else {
			filter = append(filter, obj{"term": obj{"content_type": p.ContentType}})
		}
	}
	if p.Prefix != "" {
		filter = append(filter, obj{"prefix": obj{"key": p.Prefix}})
	}
	if size := bounds(p.MinSize, p.MaxSize); size != nil {
		filter = append(filter, obj{"range": obj{"size": size}})
	}
	if mod := timeBounds(p.Since, p.Until); mod != nil {
		filter = append(filter, obj{"range": obj{"modified": mod}})
	}
	query := obj{"match_all": obj{}}
	if len(must)+len(filter) > 0 {
		b := obj{}
		if len(must) > 0 {
			b["must"] = must
		}
		if len(filter) > 0 {
			b["filter"] = filter
		}
		query = obj{"bool": b}
	}
	sort := []any{obj{"modified": "desc"}, obj{"key": "asc"}}
	if len(p.Terms) > 0 {
		sort = []any{obj{"_score": "desc"}, obj{"key": "asc"}}
	}
	return obj{
		"from": p.Offset, "size": p.Limit, "track_total_hits": true,
		"_source": hitFields, "query": query, "sort": sort,
	}
}

func bounds(min, max int64) obj {
	r := obj{}
	if min > 0 {
		r["gte"] = min
	}
	if max > 0 {
		r["lte"] = max
	}
	if len(r) == 0 {
		return nil
	}
	return r
}

func timeBounds(since, until time.Time) obj {
	r := obj{}
	if !since.IsZero() {
		r["gte"] = since.UTC().Format(time.RFC3339Nano)
	}
	if !until.IsZero() {
		r["lte"] = until.UTC().Format(time.RFC3339Nano)
	}
	if len(r) == 0 {
		return nil
	}
	return r
}

// Scan bounds: documents are read in buckets of ids sharing a hex prefix,
// each small enough to page through with from/size (OpenSearch's
// max_result_window is 10,000): 256 buckets serve 2.5 million documents,
// and a fuller bucket is split again.
const (
	scanPage    = 1000
	scanWindow  = 10000
	scanWorkers = 4
)

// ScanIndex lists every document of the search alias, key and version,
// calling fn with each page (from several goroutines at once).
func (e *Engine) ScanIndex(ctx context.Context, fn func([]search.Entry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	buckets := make(chan string)
	errs := make(chan error, scanWorkers)
	var wg sync.WaitGroup
	for range scanWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range buckets {
				if err := e.scanBucket(ctx, b, fn); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
feed:
	for i := range 256 {
		select {
		case buckets <- fmt.Sprintf("%02x", i):
		case <-ctx.Done():
			break feed
		}
	}
	close(buckets)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// scanRetry spaces the retries of a scan's page that the engine did not
// answer, or answered 429 or 5xx (ZincSearch answered 503 "unexpected
// EOF" under load in about one verify in five): a page is a read, so a
// retry is safe, and one lost page would fail a whole verify.
var scanRetry = retry.Backoff{Base: 200 * time.Millisecond, Max: 3 * time.Second}

const scanAttempts = 6

// again calls op until it succeeds, fails otherwise than ErrUnavailable
// (the engine did not answer, or answered 429 or 5xx), or has been called
// scanAttempts times, scanRetry apart: for reads, and for a refresh, which
// any number of calls leaves the same.
func again(ctx context.Context, op func() error) error {
	err := op()
	for n := 1; errors.Is(err, search.ErrUnavailable) && n < scanAttempts; n++ {
		if werr := scanRetry.Wait(ctx, n); werr != nil {
			return err
		}
		err = op()
	}
	return err
}

// scanBucket reads the documents whose id starts with prefix, splitting
// the bucket in 16 when it holds more than a window.
func (e *Engine) scanBucket(ctx context.Context, prefix string, fn func([]search.Entry) error) error {
	for from := 0; ; from += scanPage {
		var entries []search.Entry
		var total int
		err := again(ctx, func() (err error) {
			entries, total, err = e.scanPage(ctx, prefix, from)
			return err
		})
		if err != nil {
			return err
		}
		if total > scanWindow && len(prefix) < 64 {
			for i := range 16 {
				if err := e.scanBucket(ctx, prefix+strconv.FormatInt(int64(i), 16), fn); err != nil {
					return err
				}
			}
			return nil
		}
		if len(entries) > 0 {
			if err := fn(entries); err != nil {
				return err
			}
		}
		if len(entries) < scanPage || from+scanPage >= total {
			return nil
		}
	}
}

func (e *Engine) scanPage(ctx context.Context, prefix string, from int) ([]search.Entry, int, error) {
	body, err := json.Marshal(obj{
		"from": from, "size": scanPage, "track_total_hits": true, "_source": []string{"key", "version"},
		"query": obj{"bool": obj{"filter": []any{obj{"prefix": obj{"id": prefix}}}}},
		"sort":  []any{obj{"id": "asc"}},
	})
	if err != nil {
		return nil, 0, fmt.Errorf("searchos: scan query: %w", err)
	}
	resp, err := e.c.Search(ctx, &opensearchapi.SearchReq{Indices: []string{e.alias}, Body: bytes.NewReader(body)})
	if err != nil {
		return nil, 0, classify("scan "+prefix, responseOf(resp), err)
	}
	out := make([]search.Entry, 0, len(resp.Hits.Hits))
	for _, h := range resp.Hits.Hits {
		var s source
		if err := json.Unmarshal(h.Source, &s); err != nil {
			return nil, 0, fmt.Errorf("searchos: scan hit %s: %w", h.ID, err)
		}
		out = append(out, search.Entry{Key: s.Key, Version: s.Version})
	}
	return out, resp.Hits.Total.Value, nil
}
