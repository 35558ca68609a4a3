package searchproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ZincSearch has no search_after and gives hits no sort values; its range
// queries take no keyword. The proxy pages with from/size instead: it finds
// the position of the first hit after the search_after values (the offset
// where the page before it ended, checked; else by bisection over the
// sorted results) and asks for the page from there.

// sortKey is one field of a search's sort.
type sortKey struct {
	field string
	desc  bool
}

// parseSort reads a search's sort: a field, or a list of fields, each a
// name or {name: order} or {name: {order: …}}.
func parseSort(raw json.RawMessage) []sortKey {
	if raw == nil {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		list = []json.RawMessage{raw}
	}
	var keys []sortKey
	for _, s := range list {
		var name string
		if json.Unmarshal(s, &name) == nil {
			keys = append(keys, sortKey{field: name, desc: name == "_score"})
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(s, &m) != nil {
			continue
		}
		for name, spec := range m {
			k := sortKey{field: name, desc: name == "_score"}
			var order string
			if json.Unmarshal(spec, &order) != nil {
				var o struct {
					Order string `json:"order"`
				}
				_ = json.Unmarshal(spec, &o)
				order = o.Order
			}
			if order != "" {
				k.desc = strings.EqualFold(order, "desc")
			}
			keys = append(keys, k)
		}
	}
	return keys
}

// sortValues are a hit's values of the sort fields, from its _source (a
// dotted name walks into objects); null when it has none.
func sortValues(h map[string]any, keys []sortKey) []any {
	src, _ := h["_source"].(map[string]any)
	vals := make([]any, len(keys))
	for i, k := range keys {
		switch k.field {
		case "_score":
			vals[i] = h["_score"]
		case "_id":
			vals[i] = h["_id"]
		default:
			var v any = src
			for _, part := range strings.Split(k.field, ".") {
				m, _ := v.(map[string]any)
				v = m[part]
			}
			vals[i] = v
		}
	}
	return vals
}

// compareSorted orders two hits' sort values as the search sorts them;
// a missing value sorts last.
func compareSorted(a, b []any, keys []sortKey) int {
	for i, k := range keys {
		if i >= len(a) || i >= len(b) {
			break
		}
		c := compareValue(a[i], b[i])
		if a[i] == nil || b[i] == nil {
			if c != 0 {
				return c // missing last, whatever the order
			}
			continue
		}
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func compareValue(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	sa, sb := fmt.Sprint(a), fmt.Sprint(b)
	if ta, err := time.Parse(time.RFC3339Nano, sa); err == nil {
		if tb, err := time.Parse(time.RFC3339Nano, sb); err == nil {
			return ta.Compare(tb)
		}
	}
	return strings.Compare(sa, sb)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// pager remembers where pages ended, so the next page's search_after
// costs one check instead of a bisection.
type pager struct {
	mu   sync.Mutex
	ends map[string]int // query + sort values of a page's last hit → offset after it
}

func (pg *pager) get(key string) (int, bool) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	o, ok := pg.ends[key]
	return o, ok
}

func (pg *pager) put(key string, offset int) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.ends == nil || len(pg.ends) > 4096 {
		pg.ends = map[string]int{}
	}
	pg.ends[key] = offset
}

func pageKey(path string, base map[string]json.RawMessage, after []any) string {
	h := sha256.New()
	h.Write([]byte(path))
	for _, k := range []string{"query", "sort", "post_filter"} {
		h.Write([]byte(k))
		h.Write(base[k])
	}
	h.Write([]byte(jsonText(after)))
	return hex.EncodeToString(h.Sum(nil))
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// searchAfterOffset finds the position of the first hit strictly after
// the values.
func (p *Proxy) searchAfterOffset(ctx context.Context, path string, base map[string]json.RawMessage, keys []sortKey, after []any) (int, *apiError) {
	probe := func(from, size int) ([][]any, int64, *apiError) {
		q := map[string]json.RawMessage{}
		for _, k := range []string{"query", "sort", "post_filter"} {
			if base[k] != nil {
				q[k] = base[k]
			}
		}
		q["from"], _ = json.Marshal(from)
		q["size"], _ = json.Marshal(size)
		q["track_total_hits"] = json.RawMessage("true")
		var fields []string
		for _, k := range keys {
			if !strings.HasPrefix(k.field, "_") {
				fields = append(fields, k.field)
			}
		}
		q["_source"], _ = json.Marshal(fields)
		body, _ := json.Marshal(q)
		status, data, err := p.engineJSON(ctx, http.MethodPost, path, body)
		if err != nil {
			return nil, 0, unavailable(err)
		}
		if status != http.StatusOK {
			return nil, 0, engineStatus(status, data)
		}
		var out map[string]any
		if err := decodeJSON(data, &out); err != nil {
			return nil, 0, errorf(http.StatusBadGateway, "exception", "the engine's search answer does not parse: %v", err)
		}
		hits, _ := out["hits"].(map[string]any)
		total, _ := number(hits["total"].(map[string]any)["value"])
		list, _ := hits["hits"].([]any)
		vals := make([][]any, 0, len(list))
		for _, h := range list {
			hm, _ := h.(map[string]any)
			vals = append(vals, normalize(sortValues(hm, keys)))
		}
		return vals, int64(total), nil
	}
	after = normalize(after)
	if o, ok := p.pages.get(pageKey(path, base, after)); ok && o > 0 {
		vals, _, apiErr := probe(o-1, 2)
		if apiErr != nil {
			return 0, apiErr
		}
		if len(vals) > 0 && compareSorted(vals[0], after, keys) <= 0 && (len(vals) == 1 || compareSorted(vals[1], after, keys) > 0) {
			return o, nil
		}
	}
	_, total, apiErr := probe(0, 0)
	if apiErr != nil {
		return 0, apiErr
	}
	lo, hi := 0, int(total)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		vals, _, apiErr := probe(mid, 1)
		if apiErr != nil {
			return 0, apiErr
		}
		if len(vals) == 0 {
			hi = mid
			continue
		}
		if compareSorted(vals[0], after, keys) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// normalize makes values decoded with UseNumber and without compare alike.
func normalize(vals []any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		if f, ok := number(v); ok {
			out[i] = f
		} else {
			out[i] = v
		}
	}
	return out
}

// withSourceFields makes a search's _source include the sort fields, and
// returns a function that trims a hit's _source back to what was asked.
func withSourceFields(req map[string]json.RawMessage, keys []sortKey) func(map[string]any) {
	var fields []string
	for _, k := range keys {
		if !strings.HasPrefix(k.field, "_") {
			fields = append(fields, k.field)
		}
	}
	raw, ok := req["_source"]
	if !ok || len(fields) == 0 {
		return func(map[string]any) {}
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("false")) {
		req["_source"], _ = json.Marshal(fields)
		return func(h map[string]any) { delete(h, "_source") }
	}
	var asked []string
	if json.Unmarshal(raw, &asked) != nil {
		return func(map[string]any) {} // true, or includes/excludes: left as asked
	}
	req["_source"], _ = json.Marshal(append(append([]string{}, asked...), fields...))
	return func(h map[string]any) {
		src, _ := h["_source"].(map[string]any)
		for name := range src {
			keep := false
			for _, a := range asked {
				keep = keep || a == name || strings.HasPrefix(a, name+".") || strings.Contains(a, "*")
			}
			if !keep {
				delete(src, name)
			}
		}
	}
}
