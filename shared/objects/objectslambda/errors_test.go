package objectslambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		reason string
	}{
		{"adapter refusal", refuse(http.StatusBadRequest, objectsapi.ReasonBadIfMatch, "x"), 400, "bad-if-match"},
		{"bad key", objects.ValidateKey("a//b"), 400, "key-empty-segment"},
		{"reserved key", objects.ValidateKey("a/versions"), 400, "key-reserved"},
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
			status, body := classify(tt.err)
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
		path   string
		res    resource
		key    string
		upload string
	}{
		{"a", document, "a", ""},
		{"a/b.txt", document, "a/b.txt", ""},
		{"versions", document, "versions", ""}, // refused later by ValidateKey
		{"a/b/versions", versions, "a/b", ""},
		{"a/uploads", uploads, "a", ""},
		{"a/uploads/0f3c", upload, "a", "0f3c"},
		{"a/b/uploads/0f3c/complete", complete, "a/b", "0f3c"},
		{"uploads/x/complete", document, "uploads/x/complete", ""},         // no key before uploads/: a key, and a reserved one
		{"photos/uploads/cat.png", document, "photos/uploads/cat.png", ""}, // not an upload id: a key
		{"a/uploads/x.png/complete", document, "a/uploads/x.png/complete", ""},
	}
	for _, tt := range tests {
		res, key, id := target(tt.path)
		if res != tt.res || key != tt.key || id != tt.upload {
			t.Errorf("target(%q) = %v %q %q, want %v %q %q", tt.path, res, key, id, tt.res, tt.key, tt.upload)
		}
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
	if resp.StatusCode != 413 || !strings.Contains(resp.Body, "/uploads") {
		t.Errorf("oversized: %d %s; want 413 pointing at uploads", resp.StatusCode, resp.Body)
	}

	resp, _ = h.Handle(ctx, request("PUT", "a/b", nil, "!!!", true))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, "bad-body") {
		t.Errorf("bad base64: %d %s", resp.StatusCode, resp.Body)
	}
}
