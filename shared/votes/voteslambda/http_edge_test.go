package voteslambda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Each error of the polls routes answers one reason with its status; the
// domain's cause stays out of the answer.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		status int
		reason string
	}{
		{"a route's refusal", apigw.Refuse(apigw.Invalid, ReasonBadMaxAge, "x"), 400, "bad-max-age"},
		{"no poll", fmt.Errorf("votesddb: get poll p: %w", votes.ErrNoPoll), 404, "unknown-poll"},
		{"poll exists", fmt.Errorf("votesddb: create: %w", votes.ErrPollExists), 409, "poll-exists"},
		{"throttled", fmt.Errorf("votesddb: %w", votes.ErrThrottled), 503, "throttled"},
		{"anything else", errors.New("dynamodb: table arn:aws:dynamodb:secret"), 500, "internal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := classify(tt.err)
			resp := e.Response()
			if e.Status != tt.status || e.ErrorBody.Error != tt.reason || e.Message == "" || resp.StatusCode != tt.status {
				t.Errorf("classify = %d %s %q, want %d %s with a message", e.Status, e.ErrorBody.Error, e.Message, tt.status, tt.reason)
			}
			if strings.Contains(resp.Body, "votesddb") || strings.Contains(resp.Body, "secret") {
				t.Errorf("answer %s shows the cause", resp.Body)
			}
			if (tt.status == 503) != (resp.Headers["retry-after"] == "1") {
				t.Errorf("a %d with retry-after %q", tt.status, resp.Headers["retry-after"])
			}
		})
	}
}

// POST /polls is refused before any store is touched when its headers or
// body are not a poll's: the Content-Type in any case of its name, the
// body's size, its encoding and its JSON.
func TestCreateRefusals(t *testing.T) {
	h := &HTTP{DefaultShards: 8, Now: time.Now} // no store: every case is refused before it
	post := func(headers map[string]string, body string, b64 bool) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{RouteKey: "POST /polls", Headers: headers, Body: body, IsBase64Encoded: b64}
	}
	json := map[string]string{"content-type": "application/json"}
	for _, tt := range []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int
		reason string
		says   string
	}{
		{"Content-Type in capitals", post(map[string]string{"CONTENT-TYPE": "text/plain"}, `{}`, false), 415, ReasonUnsupportedMediaType, `"text/plain"`},
		{"Content-Type mixed case, padded", post(map[string]string{"Content-type": "  text/csv "}, `{}`, false), 415, ReasonUnsupportedMediaType, `"text/csv"`},
		{"Content-Type control characters", post(map[string]string{"content-type": "text/\x1b[31m"}, `{}`, false), 415, ReasonUnsupportedMediaType, `\x1b`},
		{"Content-Type very long", post(map[string]string{"content-type": strings.Repeat("a", 5000)}, `{}`, false), 415, ReasonUnsupportedMediaType, "…"},
		{"base64", post(json, "e30=", true), 415, ReasonUnsupportedMediaType, "application/json"},
		{"empty", post(json, "", false), 400, apigw.ReasonMissingBody, "missing body"},
		{"spaces", post(json, "  \n", false), 400, apigw.ReasonMissingBody, "missing body"},
		{"at the limit plus one", post(json, strings.Repeat(" ", 64<<10+1), false), 413, apigw.ReasonTooLarge, "64 KiB"},
		{"not JSON", post(json, "pollId=x", false), 400, apigw.ReasonInvalidJSON, "malformed poll JSON"},
		{"two values", post(json, `{"pollId":"a","options":["x"]}{}`, false), 400, apigw.ReasonInvalidJSON, "more than one JSON value"},
		{"shards 0", post(json, `{"pollId":"a","options":["x"],"shards":0}`, false), 400, ReasonInvalidPoll, "shards must be 1 to 1000"},
		{"bad id", post(json, `{"pollId":"a/b","options":["x"]}`, false), 400, ReasonInvalidPoll, "one URL path segment"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.create(context.Background(), tt.req)
			e := classify(err)
			if e.Status != tt.status || e.ErrorBody.Error != tt.reason || !strings.Contains(e.Message, tt.says) {
				t.Errorf("create: %d %s %q, want %d %s saying %q", e.Status, e.ErrorBody.Error, e.Message, tt.status, tt.reason, tt.says)
			}
			if len(e.Message) > 400 {
				t.Errorf("message of %d bytes", len(e.Message))
			}
		})
	}
}
