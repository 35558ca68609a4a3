package voteslambda

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func newHTTP(t *testing.T) *HTTP {
	t.Helper()
	return httpOn(countersTable(t))
}

// httpOn is the handler over a counters table.
func httpOn(db *dynamodb.Client, table string) *HTTP {
	return &HTTP{Store: votesddb.New(db, table, table+"-ledger"), DefaultShards: 8, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
}

// countersTable creates an empty counters table on DynamoDB Local.
func countersTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	st := stacktest.Need(t)
	db := dynamodb.NewFromConfig(stacktest.Config(t, st, nil))
	name := fmt.Sprintf("http-counters-%d", time.Now().UnixNano())
	if _, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
	}); err != nil {
		t.Fatal(err)
	}
	return db, name
}

// request is a request as API Gateway hands it over; a POST declares its
// body application/json, as POST /polls requires.
func request(route, id, body string) events.APIGatewayV2HTTPRequest {
	r := events.APIGatewayV2HTTPRequest{RouteKey: route, PathParameters: map[string]string{"id": id}, Body: body}
	if strings.HasPrefix(route, "POST ") {
		r.Headers = map[string]string{"content-type": "application/json"}
	}
	return r
}

func withQuery(r events.APIGatewayV2HTTPRequest, k, v string) events.APIGatewayV2HTTPRequest {
	r.QueryStringParameters = map[string]string{k: v}
	return r
}

func TestPollsHTTP(t *testing.T) {
	h := newHTTP(t)
	options := make([]string, 101)
	for i := range options {
		options[i] = fmt.Sprintf("%q", fmt.Sprint("o", i))
	}
	tests := []struct {
		name     string
		req      events.APIGatewayV2HTTPRequest
		status   int
		contains string
		reason   string // the error's reason; "" for a success
	}{
		{"create", request("POST /polls", "", `{"pollId":"color","options":["red","blue"]}`), 201, `"shards":8`, ""},
		{"create again", request("POST /polls", "", `{"pollId":"color","options":["red"]}`), 409, "exists", "poll-exists"},
		{"create with window", request("POST /polls", "", `{"pollId":"w","options":["a"],"shards":3,"opensAt":"2026-01-01T00:00:00Z","closesAt":"2026-02-01T00:00:00Z","oneVotePerVoter":true}`), 201, `"closesAt":"2026-02-01T00:00:00Z"`, ""},
		{"missing body", request("POST /polls", "", ""), 400, "missing body", "missing-body"},
		{"malformed JSON", request("POST /polls", "", `{"pollId":`), 400, "malformed", "invalid-json"},
		{"unknown field", request("POST /polls", "", `{"pollId":"x","options":["a"],"shardz":2}`), 400, "unknown field", "invalid-json"},
		{"ampersand unescaped", request("POST /polls", "", `{"pollId":"x","options":["a"],"a&b":1}`), 400, `unknown field \"a&b\"`, "invalid-json"},
		{"wrong type", request("POST /polls", "", `{"pollId":"x","options":"a"}`), 400, "malformed", "invalid-json"},
		{"no options", request("POST /polls", "", `{"pollId":"x","options":[]}`), 400, "options", "invalid-poll"},
		{"101 options", request("POST /polls", "", `{"pollId":"x","options":[`+strings.Join(options, ",")+`]}`), 400, "options", "invalid-poll"},
		{"duplicate option", request("POST /polls", "", `{"pollId":"x","options":["a","a"]}`), 400, "twice", "invalid-poll"},
		{"hash in id", request("POST /polls", "", `{"pollId":"a#b","options":["a"]}`), 400, "not allowed", "invalid-poll"},
		{"too many shards", request("POST /polls", "", `{"pollId":"x","options":["a"],"shards":5000}`), 400, "shards", "invalid-poll"},
		{"closes before opening", request("POST /polls", "", `{"pollId":"x","options":["a"],"opensAt":"2026-02-01T00:00:00Z","closesAt":"2026-01-01T00:00:00Z"}`), 400, "not after", "invalid-poll"},
		{"oversized body", request("POST /polls", "", `{"pollId":"x","options":["`+strings.Repeat("a", 70<<10)+`"]}`), 413, "64 KiB", "too-large"},
		{"binary body", events.APIGatewayV2HTTPRequest{RouteKey: "POST /polls", Headers: map[string]string{"content-type": "application/json"}, Body: "AAEC", IsBase64Encoded: true}, 415, "application/json", "unsupported-media-type"},
		{"get", request("GET /polls/{id}", "color", ""), 200, `"options":["red","blue"]`, ""},
		{"get missing", request("GET /polls/{id}", "nope", ""), 404, "no such poll", "unknown-poll"},
		{"get hostile id", request("GET /polls/{id}", "../../etc/passwd#x", ""), 404, "no such poll", "unknown-poll"},
		{"results with no votes", request("GET /polls/{id}/results", "color", ""), 200, `"totals":{"blue":0,"red":0},"total":0`, ""},
		{"results missing", request("GET /polls/{id}/results", "nope", ""), 404, "no such poll", "unknown-poll"},
		{"results cached", withQuery(request("GET /polls/{id}/results", "color", ""), "maxAge", "3600"), 200, `"source":"cache"`, ""},
		{"results fresh", withQuery(request("GET /polls/{id}/results", "color", ""), "maxAge", "0"), 200, `"source":"shards"`, ""},
		{"results bad maxAge", withQuery(request("GET /polls/{id}/results", "color", ""), "maxAge", "-1"), 400, "maxAge", "bad-max-age"},
		{"results NaN maxAge", withQuery(request("GET /polls/{id}/results", "color", ""), "maxAge", "NaN"), 400, "maxAge", "bad-max-age"},
		{"unknown route", request("DELETE /polls/{id}", "color", ""), 404, "no route", "not-found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.Handle(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || !strings.Contains(resp.Body, tt.contains) {
				t.Errorf("got %d %s, want %d containing %q", resp.StatusCode, resp.Body, tt.status, tt.contains)
			}
			if !json.Valid([]byte(resp.Body)) || resp.Headers["content-type"] != "application/json" {
				t.Errorf("response is not JSON: %q", resp.Body)
			}
			if resp.StatusCode >= 400 {
				var e apigw.ErrorBody
				if err := json.Unmarshal([]byte(resp.Body), &e); err != nil || e.Error != tt.reason || e.Message == "" {
					t.Errorf("error body %s: want reason %q and a message", resp.Body, tt.reason)
				}
			}
		})
	}
}
