package objectslambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		reason string
	}{
		{"adapter refusal", apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadIfMatch, "x"), 400, "bad-if-match"},
		{"key with NUL", objects.ValidateKey("a\x00b"), 400, "key-bad-char"},
		{"key not UTF-8", objects.ValidateKey("a\xff"), 400, "key-not-utf8"},
		{"bad version", fmt.Errorf("wrapped: %w", &objects.InvalidError{Reason: objects.ReasonBadVersion, Detail: "d"}), 400, "bad-version"},
		{"too large", &objects.InvalidError{Reason: objects.ReasonTooLarge, Detail: "d"}, 413, "too-large"},
		{"too large for the table", &objects.InvalidError{Reason: objects.ReasonTooLargeForTable, Detail: "d"}, 413, "too-large-for-table"},
		{"content type", &objects.InvalidError{Reason: objects.ReasonBadContentType, Detail: "d"}, 415, "bad-content-type"},
		{"upload closed", &objects.InvalidError{Reason: objects.ReasonUploadClosed, Detail: "d"}, 409, "upload-closed"},
		{"conflict", fmt.Errorf("put: %w", &objects.ConflictError{Key: "k", Expected: 1, Current: 3}), 409, "conflict"},
		{"not found", fmt.Errorf("%w: k", objects.ErrNotFound), 404, "not-found"},
		{"throttled", fmt.Errorf("x: %w", objects.ErrThrottled), 503, "throttled"},
		{"upload busy", objects.ErrUploadBusy, 503, "throttled"},
		{"checksum", &objects.ChecksumError{What: "blob", WantSize: 1, GotSize: 2}, 500, "checksum-mismatch"},
		{"dangling", objects.ErrDangling, 500, "internal"},
		{"anything else", errors.New("dynamodb: table arn:aws:dynamodb:secret"), 500, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := classify(tt.err)
			status, body := e.Status, e.ErrorBody
			if status != tt.status || body.Error != tt.reason || body.Message == "" {
				t.Errorf("got %d %+v, want %d %s with a message", status, body, tt.status, tt.reason)
			}
			if tt.reason == "conflict" && (body.CurrentVersion == nil || *body.CurrentVersion != 3) {
				t.Errorf("conflict body %+v, want currentVersion 3", body)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	tests := []struct {
		name   string
		query  map[string]string
		res    resource
		upload string
		reason string
	}{
		{"no query", nil, document, "", ""},
		{"a version", map[string]string{"version": "3"}, document, "", ""},
		{"a placement", map[string]string{"placement": "table"}, document, "", ""},
		{"versions", map[string]string{"versions": ""}, versions, "", ""},
		{"uploads", map[string]string{"uploads": ""}, uploads, "", ""},
		{"an upload", map[string]string{"uploadId": "0f3c"}, upload, "0f3c", ""},
		{"two sub-resources", map[string]string{"versions": "", "uploads": ""}, 0, "", objectsapi.ReasonBadQuery},
		{"versions with a version", map[string]string{"versions": "", "version": "1"}, 0, "", objectsapi.ReasonBadQuery},
		{"unknown parameter", map[string]string{"acl": ""}, 0, "", objectsapi.ReasonBadQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, id, err := target(tt.query)
			var ae *apigw.Error
			switch {
			case tt.reason != "":
				if !errors.As(err, &ae) || ae.ErrorBody.Error != tt.reason {
					t.Errorf("target(%v): %v, want %s", tt.query, err, tt.reason)
				}
			case err != nil || res != tt.res || id != tt.upload:
				t.Errorf("target(%v) = %v %q %v, want %v %q", tt.query, res, id, err, tt.res, tt.upload)
			}
		})
	}
}

// The key is the whole path parameter, whatever it looks like; the query
// names the sub-resource.
func TestHandleRoutesByQuery(t *testing.T) {
	var got []string
	h := &HTTP{
		Docs: docs{
			put: func(key string, body []byte, o objects.PutOptions) (objects.Written, error) {
				got = append(got, "put "+key)
				return objects.Written{Record: objects.Record{Key: key, Version: 1, Kind: objects.Inline}}, nil
			},
			stat: func(key string, version int64) (objects.Record, error) {
				got = append(got, "get "+key)
				return objects.Record{Key: key, Version: 1, Kind: objects.Inline}, nil
			},
		},
		Log: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	for _, key := range []string{"a/versions", "a/uploads", "a/uploads/0f3c", "a/uploads/0f3c/complete", "/", "a/../b", "k?versions"} {
		for _, method := range []string{"PUT", "GET"} {
			if resp, _ := h.Handle(ctx, request(method, key, nil, "x", false)); resp.StatusCode/100 != 2 {
				t.Errorf("%s %q: %d %s", method, key, resp.StatusCode, resp.Body)
			}
		}
	}
	if len(got) != 14 || got[0] != "put a/versions" || got[13] != "get k?versions" {
		t.Errorf("the store saw %q", got)
	}
	req := request("PUT", "a", nil, "x", false)
	req.QueryStringParameters = map[string]string{"versions": ""}
	if resp, _ := h.Handle(ctx, req); resp.StatusCode != 405 || resp.Headers["allow"] != "GET" {
		t.Errorf("PUT ?versions: %d %v, want 405 allowing GET", resp.StatusCode, resp.Headers)
	}
}

// docs is a Documents fake with function fields.
type docs struct {
	put  func(key string, body []byte, o objects.PutOptions) (objects.Written, error)
	stat func(key string, version int64) (objects.Record, error)
}

func (d docs) Write(_ context.Context, key string, body []byte, o objects.PutOptions) (objects.Written, error) {
	return d.put(key, body, o)
}
func (d docs) Stat(_ context.Context, key string, v int64) (objects.Record, error) {
	return d.stat(key, v)
}
func (d docs) Fetch(_ context.Context, rec objects.Record, _ int64) (objects.Object, error) {
	return objects.Object{Record: rec.Meta(), Body: rec.Data}, nil
}
func (d docs) FetchRange(_ context.Context, rec objects.Record, _ int64, r objects.Range) (objects.Partial, error) {
	return objects.Partial{Record: rec.Meta(), Range: r, Body: rec.Data[r.Start:r.End]}, nil
}
func (d docs) Versions(context.Context, string) ([]objects.Record, error) { return nil, nil }
func (d docs) Delete(context.Context, string, objects.DeleteOptions) (int64, error) {
	return 0, nil
}

var _ Documents = docs{}

func request(method, key string, headers map[string]string, body string, b64 bool) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RouteKey: "ANY /objects/{key+}", PathParameters: map[string]string{"key": key}, Headers: headers,
		Body: body, IsBase64Encoded: b64,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method}},
	}
}

// A store failure is logged with its detail and answered 500 without it;
// the base64 body arrives decoded, with its options.
func TestHandlerAdapts(t *testing.T) {
	var logged strings.Builder
	var gotBody []byte
	var gotOpts objects.PutOptions
	h := &HTTP{
		Docs: docs{
			put: func(key string, body []byte, o objects.PutOptions) (objects.Written, error) {
				gotBody, gotOpts = body, o
				if key == "boom" {
					return objects.Written{}, errors.New("dynamodb: secret-table-name unreachable")
				}
				return objects.Written{Record: objects.Record{Key: key, Version: 4, Kind: objects.Inline, Size: int64(len(body)), SHA256: objects.SumOf(body), ContentType: o.ContentType}}, nil
			},
		},
		Log: slog.New(slog.NewTextHandler(&logged, nil)),
	}
	ctx := context.Background()
	resp, _ := h.Handle(ctx, request("PUT", "a/b", map[string]string{"content-type": "image/png", "if-match": `"3"`}, base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), true))
	if resp.StatusCode != 200 || resp.Headers["etag"] != `"4"` || string(gotBody) != "\x00\x01\x02" || gotOpts.ContentType != "image/png" || *gotOpts.IfMatch != 3 {
		t.Errorf("put: %d %v, body %q, options %+v", resp.StatusCode, resp.Headers, gotBody, gotOpts)
	}
	var m objectsapi.Meta
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil || m.Version != 4 || m.Size != 3 || m.Kind != "inline" {
		t.Errorf("put answer %s: %v", resp.Body, err)
	}

	resp, _ = h.Handle(ctx, request("PUT", "boom", nil, "x", false))
	if resp.StatusCode != 500 || strings.Contains(resp.Body, "secret") || !strings.Contains(logged.String(), "secret-table-name") {
		t.Errorf("failure: %d %s; log %q", resp.StatusCode, resp.Body, logged.String())
	}

	resp, _ = h.Handle(ctx, request("PUT", "a/b", nil, strings.Repeat("x", DefaultMaxBody+1), false))
	if resp.StatusCode != 413 || !strings.Contains(resp.Body, "/objects/a/b?uploads") {
		t.Errorf("oversized: %d %s; want 413 pointing at uploads", resp.StatusCode, resp.Body)
	}

	resp, _ = h.Handle(ctx, request("PUT", "a/b", nil, "!!!", true))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, "bad-body") {
		t.Errorf("bad base64: %d %s", resp.StatusCode, resp.Body)
	}
}

// goTypeName matches what encoding/json's own messages say of Go types
// (int64, *int64, []string, time.Time, objectsapi.UploadRequest, struct).
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|struct)\b|\[\]\w|\*\w|map\[|\b\w+\.[A-Z]\w+`)

// Every refusal answers {"error","message"}: a reason, a message in the
// client's words (no Go type names), not HTML-escaped.
func TestErrorBodies(t *testing.T) {
	h := &HTTP{
		Docs: docs{
			stat: func(key string, version int64) (objects.Record, error) {
				return objects.Record{}, fmt.Errorf("stat %s: %w", key, objects.ErrNotFound)
			},
		},
		Log: slog.New(slog.DiscardHandler),
	}
	post := func(key, body string) events.APIGatewayV2HTTPRequest {
		r := request("POST", key, map[string]string{"content-type": "application/json"}, body, false)
		r.QueryStringParameters = map[string]string{"uploads": ""}
		return r
	}
	withQuery := func(r events.APIGatewayV2HTTPRequest, k, v string) events.APIGatewayV2HTTPRequest {
		r.QueryStringParameters = map[string]string{k: v}
		return r
	}
	tests := []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int
		reason string
		says   string // in the message
	}{
		{"bad JSON", post("k", `{"size":`), 400, "invalid-json", "malformed JSON"},
		{"size a string", post("k", `{"size":"big"}`), 400, "invalid-json", `field "size": want a whole number, got a string`},
		{"sha256 a number", post("k", `{"size":1,"sha256":5}`), 400, "invalid-json", `field "sha256": want a string`},
		{"unknown field with &", post("k", `{"size":1,"a&b":1}`), 400, "invalid-json", `unknown field "a&b"`},
		{"an array", post("k", `[1]`), 400, "invalid-json", "want an object"},
		{"missing body", post("k", ``), 400, "missing-body", "missing body"},
		{"missing object", request("GET", "a/b", nil, "", false), 404, "not-found", "no such object"},
		{"bad key", request("PUT", "a\x00b", nil, "x", false), 400, "key-bad-char", "key"},
		{"bad version", withQuery(request("GET", "a", nil, "", false), "version", "latest"), 400, "bad-version", "version"},
		{"bad placement with &", withQuery(request("PUT", "a", nil, "x", false), "placement", "a&b"), 400, "bad-placement", `"a&b"`},
		{"bad If-Match", request("PUT", "a", map[string]string{"if-match": "x<y"}, "x", false), 400, "bad-if-match", `"x<y"`},
		{"bad range", request("GET", "a", map[string]string{"range": "bytes=x"}, "", false), 400, "bad-range", ""},
		{"method", request("PATCH", "a", nil, "", false), 405, "method-not-allowed", "PATCH"},
		{"unknown parameter", withQuery(request("GET", "a", nil, "", false), "acl", ""), 400, "bad-query", `"acl"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := h.Handle(context.Background(), tt.req)
			var body apigw.ErrorBody
			if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
				t.Fatalf("%d %s: %v", resp.StatusCode, resp.Body, err)
			}
			if resp.StatusCode != tt.status || body.Error != tt.reason || body.Message == "" || !strings.Contains(body.Message, tt.says) {
				t.Errorf("got %d %s, want %d %s with a message saying %q", resp.StatusCode, resp.Body, tt.status, tt.reason, tt.says)
			}
			if m := goTypeName.FindString(body.Message); m != "" {
				t.Errorf("message %q names a Go type (%q)", body.Message, m)
			}
			if strings.Contains(resp.Body, `\u00`) {
				t.Errorf("body %s escapes HTML", resp.Body)
			}
		})
	}
}
