package objectslambda

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// searches answers one fixed page and records the query it was asked.
type searches struct {
	got  search.Query
	page search.Page
	err  error
}

func (s *searches) Search(_ context.Context, q search.Query) (search.Page, error) {
	s.got = q
	return s.page, s.err
}

func get(params map[string]string) events.APIGatewayV2HTTPRequest {
	req := events.APIGatewayV2HTTPRequest{RouteKey: "GET /objects", QueryStringParameters: params}
	req.RequestContext.HTTP.Method = "GET"
	return req
}

// Every malformed or hostile search gets a 400 with its reason, the
// stack without search a 503, and a good one its page.
func TestSearchAnswers(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		status int
		reason string
	}{
		{"words", map[string]string{"search": "invoice 4711", "type": "application/pdf", "min-size": "1000000", "since": "2026-11-01", "fresh": "true", "limit": "5"}, 200, ""},
		{"no words, filters only", map[string]string{"search": "", "prefix": "docs/"}, 200, ""},
		{"lucene and dsl syntax are words", map[string]string{"search": `title:x AND {"script":1} OR *`}, 200, ""},
		{"unknown parameter", map[string]string{"search": "x", "delimiter": "/"}, 400, objectsapi.ReasonBadQuery},
		{"only punctuation", map[string]string{"search": "*:()"}, 400, string(search.ReasonBadQuery)},
		{"10,000 characters", map[string]string{"search": strings.Repeat("a", 10000)}, 400, string(search.ReasonBadQuery)},
		{"negative limit", map[string]string{"search": "x", "limit": "-1"}, 400, string(search.ReasonBadLimit)},
		{"huge limit", map[string]string{"search": "x", "limit": "99999999999"}, 400, string(search.ReasonBadLimit)},
		{"size not a number", map[string]string{"search": "x", "min-size": "1MB"}, 400, string(search.ReasonBadSize)},
		{"time not a time", map[string]string{"search": "x", "since": "last week"}, 400, string(search.ReasonBadTime)},
		{"fresh not a bool", map[string]string{"search": "x", "fresh": "maybe"}, 400, objectsapi.ReasonBadQuery},
		{"forged cursor", map[string]string{"search": "x", "cursor": "Yzl1LjUwMC5kZWFkYmVlZg"}, 400, string(search.ReasonBadCursor)},
		{"type with a parameter", map[string]string{"search": "x", "type": "text/plain;charset=utf-8"}, 400, string(search.ReasonBadType)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &searches{page: search.Page{Hits: []search.Hit{{Key: "docs/a.txt", Version: 2, Size: 9, ContentType: "text/plain",
				Modified: time.Unix(1_800_000_000, 0), TextState: search.TextIndexed, Snippet: "an invoice"}}, Total: 1, Fresh: true}}
			h := &HTTP{Search: s, Log: slog.New(slog.DiscardHandler)}
			resp, err := h.Handle(context.Background(), get(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if tt.status != 200 {
				var e apigw.ErrorBody
				if err := json.Unmarshal([]byte(resp.Body), &e); err != nil || e.Error != tt.reason {
					t.Fatalf("body %s, want reason %s", resp.Body, tt.reason)
				}
				return
			}
			var out objectsapi.SearchResult
			if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Hits) != 1 || out.Hits[0].Key != "docs/a.txt" || out.Hits[0].Text != "indexed" || !out.Fresh {
				t.Errorf("result %s", resp.Body)
			}
			if s.got.Words != tt.params["search"] {
				t.Errorf("asked %+v", s.got)
			}
		})
	}
}

func TestSearchWithoutSearchIsUnavailable(t *testing.T) {
	for name, h := range map[string]*HTTP{
		"disabled":    {Log: slog.New(slog.DiscardHandler)},
		"unreachable": {Search: &searches{err: search.ErrUnavailable}, Log: slog.New(slog.DiscardHandler)},
	} {
		resp, _ := h.Handle(context.Background(), get(map[string]string{"search": "x"}))
		if resp.StatusCode != 503 || resp.Headers["retry-after"] == "" {
			t.Errorf("%s: status %d %v, want 503 with retry-after: %s", name, resp.StatusCode, resp.Headers, resp.Body)
		}
	}
}
