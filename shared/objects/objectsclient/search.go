package objectsclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
)

// SearchOptions narrow a search; the zero value narrows nothing.
type SearchOptions struct {
	ContentType string // "application/pdf" or a family, "text/*"
	MinSize     int64
	MaxSize     int64
	Since       time.Time
	Until       time.Time
	Prefix      string
	Limit       int    // hits per page (server default 20, at most 100)
	Cursor      string // the previous page's SearchResult.Cursor
	// Fresh has the API check every hit against the table and leave out
	// the ones deleted or written again since they were indexed.
	Fresh bool
}

// SearchResult and SearchHit are the API's.
type (
	SearchResult = objectsapi.SearchResult
	SearchHit    = objectsapi.SearchHit
)

// Search finds objects by words of their key and text (all of them), and
// by the options. An empty words finds every object the options let
// through, newest first.
func (c *Client) Search(ctx context.Context, words string, o SearchOptions) (SearchResult, error) {
	q := url.Values{objectsapi.QuerySearch: {words}}
	set := func(name, v string) {
		if v != "" {
			q.Set(name, v)
		}
	}
	set(objectsapi.QueryType, o.ContentType)
	set("prefix", o.Prefix)
	set("cursor", o.Cursor)
	if o.MinSize > 0 {
		set(objectsapi.QueryMinSize, strconv.FormatInt(o.MinSize, 10))
	}
	if o.MaxSize > 0 {
		set(objectsapi.QueryMaxSize, strconv.FormatInt(o.MaxSize, 10))
	}
	if !o.Since.IsZero() {
		set(objectsapi.QuerySince, o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		set(objectsapi.QueryUntil, o.Until.UTC().Format(time.RFC3339Nano))
	}
	if o.Limit != 0 {
		set("limit", strconv.Itoa(o.Limit))
	}
	if o.Fresh {
		set(objectsapi.QueryFresh, "true")
	}
	// The query in SigV4's canonical form, as ListPage sends it.
	resp, err := c.do(ctx, http.MethodGet, c.base+"/objects?"+strings.ReplaceAll(q.Encode(), "+", "%20"), nil, nil)
	if err != nil {
		return SearchResult{}, err
	}
	var r SearchResult
	return r, decode(resp, &r)
}
