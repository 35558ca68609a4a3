package searchos

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/search"
)

// source is a document as the index stores it.
type source struct {
	Key         string    `json:"key"`
	KeyWords    string    `json:"key_words"`
	ID          string    `json:"id"`
	Version     int64     `json:"version"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type,omitempty"`
	SHA256      string    `json:"sha256,omitempty"`
	Placement   string    `json:"placement,omitempty"`
	Modified    time.Time `json:"modified"`
	Text        string    `json:"text,omitempty"`
	TextState   string    `json:"text_state"`
	Excerpt     string    `json:"excerpt,omitempty"`
}

// excerptBytes is how much of the text the excerpt keeps.
const excerptBytes = 600

func sourceOf(d search.Document) source {
	return source{
		Key: d.Key, KeyWords: search.KeyWords(d.Key), ID: search.DocID(d.Key), Version: d.Version,
		Size: d.Size, ContentType: d.ContentType, SHA256: d.SHA256, Placement: d.Placement,
		Modified: d.Modified.UTC(), Text: d.Text, TextState: string(d.TextState), Excerpt: prefix(d.Text, excerptBytes),
	}
}

func (s source) hit(score float64) search.Hit {
	return search.Hit{
		Key: s.Key, Version: s.Version, Size: s.Size, ContentType: s.ContentType, Modified: s.Modified,
		TextState: search.TextState(s.TextState), Score: score, Excerpt: s.Excerpt,
	}
}

// prefix is at most n bytes of s, cut on a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// hitFields are the fields a search returns.
var hitFields = []string{"key", "version", "size", "content_type", "modified", "text_state", "excerpt"}

// gcDeletes is how long OpenSearch remembers a deleted document's version
// (index.gc_deletes, 60 s by default): longer than a stream record lives
// (24 h), so a replayed put older than a delete is refused, not taken as
// new.
const gcDeletes = "25h"

// indexBody is the settings and mappings of a new index: keyword where
// exact, text where searched, dates and numbers typed, strict (a field
// the adapter does not write is refused, never guessed). One shard (the
// index of one stack's objects is small); a replica once the domain has a
// second node (auto_expand_replicas 0-1: a one-node domain stays green).
func (e *Engine) indexBody() []byte {
	return fmt.Appendf(nil, `{
  "settings": {"index": {"number_of_shards": 1, "auto_expand_replicas": "0-1", "gc_deletes": %q}},
  "mappings": {
    "dynamic": "strict",
    "properties": {
      "key":          {"type": "keyword"},
      "key_words":    {"type": "text"},
      "id":           {"type": "keyword"},
      "version":      {"type": "long"},
      "size":         {"type": "long"},
      "content_type": {"type": "keyword"},
      "sha256":       {"type": "keyword"},
      "placement":    {"type": "keyword"},
      "modified":     {"type": "date"},
      "text":         {"type": "text"},
      "text_state":   {"type": "keyword"},
      "excerpt":      {"type": "keyword", "index": false, "doc_values": false}
    }
  }
}`, gcDeletes)
}
