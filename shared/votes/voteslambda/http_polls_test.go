package voteslambda

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// handle sends req and wants a JSON response; it returns the status and
// the body's message (empty on success).
func handle(t *testing.T, h *HTTP, req events.APIGatewayV2HTTPRequest) (int, string, string) {
	t.Helper()
	resp, err := h.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || resp.Headers["content-type"] != "application/json" {
		t.Fatalf("response %d %q is not JSON: %v", resp.StatusCode, resp.Body, err)
	}
	msg, _ := body["message"].(string)
	return resp.StatusCode, msg, resp.Body
}

// POST /polls takes application/json only (any parameters, any case);
// anything else is 415 with a message naming what was sent and what is
// wanted, and creates nothing.
func TestPollsHTTPContentType(t *testing.T) {
	h := newHTTP(t)
	tests := []struct {
		name    string
		headers map[string]string
		status  int
		says    []string // in the message of a refusal
	}{
		{"application/json", map[string]string{"content-type": "application/json"}, 201, nil},
		{"with charset", map[string]string{"content-type": "application/json; charset=utf-8"}, 201, nil},
		{"upper case", map[string]string{"content-type": "APPLICATION/JSON"}, 201, nil},
		{"header name not lower-cased", map[string]string{"Content-Type": "application/json"}, 201, nil},
		{"text/plain", map[string]string{"content-type": "text/plain"}, 415, []string{`"text/plain"`, "application/json"}},
		{"no Content-Type", nil, 415, []string{"no Content-Type", "application/json"}},
		{"empty Content-Type", map[string]string{"content-type": ""}, 415, []string{"no Content-Type", "application/json"}},
		{"form", map[string]string{"content-type": "application/x-www-form-urlencoded"}, 415, []string{`"application/x-www-form-urlencoded"`, "application/json"}},
		{"two types", map[string]string{"content-type": "application/json, text/plain"}, 415, []string{`"application/json, text/plain"`}},
		{"json suffix", map[string]string{"content-type": "application/merge-patch+json"}, 415, []string{`"application/merge-patch+json"`}},
		{"malformed", map[string]string{"content-type": "application/json; charset"}, 415, []string{`"application/json; charset"`}},
		{"long", map[string]string{"content-type": "text/" + strings.Repeat("x", 5000)}, 415, []string{"text/xxx", "…"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprint("ct-", i)
			req := events.APIGatewayV2HTTPRequest{RouteKey: "POST /polls", Headers: tt.headers, Body: fmt.Sprintf(`{"pollId":%q,"options":["a","b"]}`, id)}
			status, msg, body := handle(t, h, req)
			if status != tt.status {
				t.Fatalf("got %d %s, want %d", status, body, tt.status)
			}
			for _, s := range tt.says {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
			if len(msg) > 300 {
				t.Errorf("message is %d bytes: the header is echoed whole", len(msg))
			}
			want := 200
			if tt.status != 201 {
				want = 404
			}
			if got, _, body := handle(t, h, request("GET /polls/{id}", id, "")); got != want {
				t.Errorf("GET /polls/%s = %d %s, want %d", id, got, body, want)
			}
		})
	}
}

// A new poll's id is one URL path segment: 400 naming the rule, and no
// poll stored.
func TestPollsHTTPPathSegmentIDs(t *testing.T) {
	h := newHTTP(t)
	tests := []struct {
		id     string
		status int
	}{
		{"../x", 400},
		{"a/b", 400},
		{"..", 400},
		{".", 400},
		{`a\b`, 400},
		{"ok-id", 201},
		{"a.b", 201},
		{"...", 201},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			status, msg, body := handle(t, h, request("POST /polls", "", fmt.Sprintf(`{"pollId":%q,"options":["a"]}`, tt.id)))
			if status != tt.status {
				t.Fatalf("got %d %s, want %d", status, body, tt.status)
			}
			if tt.status == 400 && !strings.Contains(msg, "one URL path segment") {
				t.Errorf("message %q does not name the rule", msg)
			}
			want := 200
			if tt.status != 201 {
				want = 404
			}
			if got, _, body := handle(t, h, request("GET /polls/{id}", tt.id, "")); got != want {
				t.Errorf("GET /polls/{id} with id %q = %d %s, want %d", tt.id, got, body, want)
			}
		})
	}
}

// Polls stored before the path-segment rule (and before createdAt was
// recorded) are still read, with their results.
func TestPollsHTTPLegacyIDs(t *testing.T) {
	db, table := countersTable(t)
	h := httpOn(db, table)
	for _, id := range []string{"legacy/a", "..", `legacy\b`} {
		// The item as the store wrote a poll then.
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk":              &types.AttributeValueMemberS{Value: "poll#" + id},
			"sk":              &types.AttributeValueMemberS{Value: "meta"},
			"pollId":          &types.AttributeValueMemberS{Value: id},
			"options":         &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}, &types.AttributeValueMemberS{Value: "b"}}},
			"shards":          &types.AttributeValueMemberN{Value: "2"},
			"oneVotePerVoter": &types.AttributeValueMemberBOOL{Value: false},
		}}); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			req  events.APIGatewayV2HTTPRequest
			want string
		}{
			{request("GET /polls/{id}", id, ""), `"options":["a","b"]`},
			{withQuery(request("GET /polls/{id}/results", id, ""), "maxAge", "0"), `"totals":{"a":0,"b":0},"total":0`},
		} {
			if status, _, body := handle(t, h, tt.req); status != 200 || !strings.Contains(body, tt.want) {
				t.Errorf("%s with id %q = %d %s, want 200 with %s", tt.req.RouteKey, id, status, body, tt.want)
			}
		}
	}
}

// A poll body that is not what POST /polls takes gets a 400 in the
// client's words (JSON field and types, the shards range and default),
// never Go's type names, and creates nothing.
func TestPollsHTTPBodyErrors(t *testing.T) {
	h := newHTTP(t)
	tests := []struct {
		name, body string
		status     int
		says       []string
	}{
		{"options a string", `{"pollId":"b1","options":"a,b"}`, 400, []string{`field "options": want an array of strings, got a string`, `"options":["a","b"]`}},
		{"shards a string", `{"pollId":"b2","options":["a"],"shards":"8"}`, 400, []string{`field "shards": want a whole number, got a string`}},
		{"shards 0", `{"pollId":"b3","options":["a"],"shards":0}`, 400, []string{"shards must be 1 to 1000, got 0", "the default, 8"}},
		{"shards negative", `{"pollId":"b4","options":["a"],"shards":-3}`, 400, []string{"shards must be 1 to 1000, got -3"}},
		{"shards over the range", `{"pollId":"b5","options":["a"],"shards":1001}`, 400, []string{"shards must be 1 to 1000, got 1001"}},
		{"shards a fraction", `{"pollId":"b6","options":["a"],"shards":2.5}`, 400, []string{`field "shards": want a whole number`}},
		{"opensAt not a time", `{"pollId":"b7","options":["a"],"opensAt":"soon"}`, 400, []string{`"soon" is not an RFC 3339 time`}},
		{"unknown field", `{"pollId":"b8","options":["a"],"shard":4}`, 400, []string{`unknown field "shard"`}},
		{"two documents", `{"pollId":"b9","options":["a"]} {"pollId":"b9x","options":["a"]}`, 400, []string{"more than one JSON value"}},
		{"syntax", `{"pollId":"b10",}`, 400, []string{"not valid JSON at byte"}},
		{"an array", `[{"pollId":"b11"}]`, 400, []string{"want an object, got an array"}},
		{"shards omitted", `{"pollId":"b12","options":["a"]}`, 201, nil},
		{"shards 1000", `{"pollId":"b13","options":["a"],"shards":1000}`, 201, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, msg, body := handle(t, h, request("POST /polls", "", tt.body))
			if status != tt.status {
				t.Fatalf("got %d %s, want %d", status, body, tt.status)
			}
			for _, s := range tt.says {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
			for _, goish := range []string{"Go struct", "Go value", "PollRequest", "[]string", "*int", "votes: "} {
				if strings.Contains(msg, goish) {
					t.Errorf("message %q names Go's %q", msg, goish)
				}
			}
		})
	}
	if _, _, body := handle(t, h, request("GET /polls/{id}", "b12", "")); !strings.Contains(body, `"shards":8`) {
		t.Errorf("a poll created without shards: %s, want the default 8", body)
	}
}
