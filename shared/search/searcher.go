package search

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Hit is one document a search found.
type Hit struct {
	Key         string
	Version     int64 // the version the document was indexed at
	Size        int64
	ContentType string
	Modified    time.Time
	TextState   TextState
	Score       float64
	// Snippet is a short passage of the text around the first word of the
	// query it holds (the text's beginning when it holds none); "" for a
	// document indexed without text.
	Snippet string
	// Excerpt is the beginning of the text as the index stores it; the
	// searcher makes the snippet from it.
	Excerpt string
}

// Found is one page of hits as the index answers it.
type Found struct {
	Hits  []Hit
	Total int // documents matching, as the index counts them
}

// Finder runs a planned query on the index behind an alias.
type Finder interface {
	Find(ctx context.Context, p Plan) (Found, error)
}

// Current is a key's latest version in the table.
type Current struct {
	Version int64
	Deleted bool
}

// Latest reads the latest version of keys from the table in one batch; a
// key the table does not hold is absent from the map.
type Latest interface {
	Latest(ctx context.Context, keys []string) (map[string]Current, error)
}

// Page is one page of a search's results.
type Page struct {
	Hits  []Hit
	Total int    // documents matching, as the index counts them
	Next  string // the next page's cursor; "" on the last page
	// Fresh reports that each hit was checked against the table; Dropped
	// counts the hits left out because their key was deleted or written
	// again since it was indexed.
	Fresh   bool
	Dropped int
}

// Searcher answers searches from the index, checked against the table
// when asked.
type Searcher struct {
	Finder Finder
	Latest Latest // needed for Fresh queries
}

// Search runs q. Refusals are *InvalidError; an unreachable index wraps
// ErrUnavailable.
func (s *Searcher) Search(ctx context.Context, q Query) (Page, error) {
	plan, err := q.Plan()
	if err != nil {
		return Page{}, err
	}
	found, err := s.Finder.Find(ctx, plan)
	if err != nil {
		return Page{}, fmt.Errorf("search: %w", err)
	}
	page := Page{Hits: found.Hits, Total: found.Total}
	if plan.Offset+len(found.Hits) < min(found.Total, MaxDepth) && len(found.Hits) == plan.Limit {
		page.Next = q.Next(plan)
	}
	for i := range page.Hits {
		h := &page.Hits[i]
		h.Snippet, h.Excerpt = Snippet(h.Excerpt, plan.Terms), ""
	}
	if q.Fresh {
		if err := s.fresh(ctx, &page); err != nil {
			return Page{}, err
		}
	}
	return page, nil
}

// fresh drops the hits the table has moved past.
func (s *Searcher) fresh(ctx context.Context, page *Page) error {
	page.Fresh = true
	if len(page.Hits) == 0 {
		return nil
	}
	keys := make([]string, len(page.Hits))
	for i, h := range page.Hits {
		keys[i] = h.Key
	}
	cur, err := s.Latest.Latest(ctx, keys)
	if err != nil {
		return fmt.Errorf("search: check hits against the table: %w", err)
	}
	kept := page.Hits[:0]
	for _, h := range page.Hits {
		c, ok := cur[h.Key]
		if !ok || c.Deleted || c.Version != h.Version {
			page.Dropped++
			continue
		}
		kept = append(kept, h)
	}
	page.Hits = kept
	return nil
}

// snippetRunes is about how long a snippet is.
const snippetRunes = 160

// Snippet is a passage of text around the first of terms it holds (case
// folded), or its beginning, on word boundaries, with "…" where it was cut.
func Snippet(text string, terms []string) string {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return ""
	}
	lower := strings.ToLower(text)
	at := -1
	for _, t := range terms {
		if i := strings.Index(lower, t); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	start := 0
	if at > snippetRunes/3 && len(lower) == len(text) {
		start = at - snippetRunes/3
		for start > 0 && text[start-1] != ' ' {
			start--
		}
	}
	end := start
	for n := 0; end < len(text) && n < snippetRunes; n++ {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	if end < len(text) {
		if sp := strings.LastIndexByte(text[start:end], ' '); sp > 0 {
			end = start + sp
		}
	}
	out := text[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}
