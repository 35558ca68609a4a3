package objectsapi

import "time"

// Query parameters of a search: GET /objects?search=WORDS[&type=T]
// [&min-size=N][&max-size=N][&since=T][&until=T][&prefix=P][&limit=N]
// [&cursor=C][&fresh=true]. The search parameter (words, possibly empty)
// turns the collection's GET from a listing into a search; the others
// narrow it.
const (
	QuerySearch  = "search"
	QueryType    = "type"
	QueryMinSize = "min-size"
	QueryMaxSize = "max-size"
	QuerySince   = "since"
	QueryUntil   = "until"
	QueryFresh   = "fresh"
)

// SearchParams are the parameters a search takes (QuerySearch first).
var SearchParams = []string{QuerySearch, QueryType, QueryMinSize, QueryMaxSize, QuerySince, QueryUntil, "prefix", "limit", "cursor", QueryFresh}

// Reasons of a search (apigw.ErrorBody.Error): 400 for the request's own (the
// search domain's: bad-query, bad-limit, bad-size, bad-time,
// bad-content-type, bad-prefix, bad-cursor), 503 when the stack runs
// without search or its index cannot answer.
const (
	ReasonSearchDisabled    = "search-disabled"
	ReasonSearchUnavailable = "search-unavailable"
)

// SearchResult is a search's page of hits, best first (newest first when
// the search has no words). Total counts every document that matches (at
// most 10,000 can be paged through). With fresh=true every hit was checked
// against the table, and Dropped counts those left out because their key
// was deleted or written again since it was indexed.
type SearchResult struct {
	Hits    []SearchHit `json:"hits"`
	Total   int         `json:"total"`
	Cursor  string      `json:"cursor,omitempty"`
	Fresh   bool        `json:"fresh"`
	Dropped int         `json:"dropped,omitempty"`
}

// SearchHit is one document a search found, as the index holds it: the
// version it was indexed at, which a fresh search has checked is still the
// latest.
type SearchHit struct {
	Key         string    `json:"key"`
	Version     int64     `json:"version"`
	Size        int64     `json:"size"`
	ContentType string    `json:"contentType"`
	Modified    time.Time `json:"modified"`
	Snippet     string    `json:"snippet,omitempty"`
	// Text says what of the document's text is indexed: indexed, none
	// (not text), too-large, binary, undecodable, unreadable or refused.
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}
