package objectslambda

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// find serves GET /objects?search=…: one page of a search.
func (h *HTTP) find(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	q, err := searchQuery(req.QueryStringParameters)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if h.Search == nil {
		return events.APIGatewayV2HTTPResponse{}, apigw.Refuse(apigw.Unavailable, objectsapi.ReasonSearchDisabled,
			"this stack runs without search (the template's SearchEnabled parameter)")
	}
	page, err := h.Search.Search(ctx, q)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := objectsapi.SearchResult{Hits: make([]objectsapi.SearchHit, len(page.Hits)), Total: page.Total,
		Cursor: page.Next, Fresh: page.Fresh, Dropped: page.Dropped}
	for i, hit := range page.Hits {
		out.Hits[i] = objectsapi.SearchHit{Key: hit.Key, Version: hit.Version, Size: hit.Size, ContentType: hit.ContentType,
			Modified: hit.Modified.UTC(), Snippet: hit.Snippet, Text: string(hit.TextState), Score: hit.Score}
	}
	return apigw.JSON(http.StatusOK, out), nil
}

// searchQuery reads a search's query parameters. Each malformed one is a
// 400 with the search domain's reason; the domain checks the values.
func searchQuery(p map[string]string) (search.Query, error) {
	for name := range p {
		if !slices.Contains(objectsapi.SearchParams, name) {
			return search.Query{}, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadQuery,
				"unknown query parameter %q: a search takes %v", apigw.Clip(name, 32), objectsapi.SearchParams)
		}
	}
	q := search.Query{Words: p[objectsapi.QuerySearch], ContentType: p[objectsapi.QueryType], Prefix: p["prefix"], Cursor: p["cursor"]}
	var err error
	if q.Limit, err = intParam(p, "limit", search.ReasonBadLimit); err != nil {
		return q, err
	}
	if q.MinSize, err = int64Param(p, objectsapi.QueryMinSize); err != nil {
		return q, err
	}
	if q.MaxSize, err = int64Param(p, objectsapi.QueryMaxSize); err != nil {
		return q, err
	}
	if q.Since, err = timeParam(p, objectsapi.QuerySince); err != nil {
		return q, err
	}
	if q.Until, err = timeParam(p, objectsapi.QueryUntil); err != nil {
		return q, err
	}
	switch f := p[objectsapi.QueryFresh]; f {
	case "", "false", "0":
	case "true", "1":
		q.Fresh = true
	default:
		return q, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadQuery, "fresh=%q: want true or false", apigw.Clip(f, 16))
	}
	if _, err := q.Plan(); err != nil {
		return q, err
	}
	return q, nil
}

func intParam(p map[string]string, name string, reason search.Reason) (int, error) {
	s, ok := p[name]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, apigw.Refuse(apigw.Invalid, string(reason), "%s %q: want a number from 1 to %d", name, apigw.Clip(s, 32), search.MaxLimit)
	}
	return n, nil
}

func int64Param(p map[string]string, name string) (int64, error) {
	s, ok := p[name]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, apigw.Refuse(apigw.Invalid, string(search.ReasonBadSize), "%s %q: want a number of bytes, 0 or more", name, apigw.Clip(s, 32))
	}
	return n, nil
}

// timeParam reads an RFC 3339 time or a date (YYYY-MM-DD, midnight UTC).
func timeParam(p map[string]string, name string) (time.Time, error) {
	s, ok := p[name]
	if !ok || s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, apigw.Refuse(apigw.Invalid, string(search.ReasonBadTime), "%s %q: want an RFC 3339 time or a date (2006-01-02)", name, apigw.Clip(s, 40))
}
