package objectslambda_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// noUploads refuses every upload call: the fuzz target is the HTTP layer.
type noUploads struct{}

func (noUploads) Begin(context.Context, string, objects.UploadRequest) (objects.Grant, error) {
	return objects.Grant{}, objects.ErrNotFound
}
func (noUploads) Status(context.Context, string, string) (objects.Upload, error) {
	return objects.Upload{}, objects.ErrNotFound
}
func (noUploads) Complete(context.Context, string, string, []objects.Part) (objects.Upload, error) {
	return objects.Upload{}, objects.ErrNotFound
}

type fixedLinks struct{}

func (fixedLinks) PresignGet(_ context.Context, ref objects.BlobRef, ttl time.Duration) (objects.SignedRequest, error) {
	return objects.SignedRequest{Method: http.MethodGet, URL: "https://example.invalid/" + ref.Key, Expires: time.Unix(0, 0).Add(ttl)}, nil
}

var (
	_ objectslambda.Uploads = noUploads{}
	_ objectslambda.Links   = fixedLinks{}
)

// FuzzHTTP: any request API Gateway could hand the objects API (method,
// path, headers, body, base64 or not) gets a response, never a panic or a
// Go error: a 2xx, or a 4xx whose JSON body names a reason. The store is
// in memory and never fails, so a 5xx is a bug too.
func FuzzHTTP(f *testing.F) {
	seeds := []struct {
		method, key, query, ct, ifMatch, body string
		b64                                   bool
	}{
		{"PUT", "docs/a.txt", "", "text/plain", "", "hello", false},
		{"PUT", "docs/a.txt", "placement=table", "text/plain", `"1"`, "aGVsbG8=", true},
		{"PUT", "docs/a.txt", "", "text/plain", "*", "x", false},
		{"GET", "docs/a.txt", "version=1", "", "", "", false},
		{"HEAD", "docs/a.txt", "", "", "", "", false},
		{"DELETE", "docs/a.txt", "", "", `W/"7"`, "", false},
		{"GET", "docs/a.txt", "versions", "", "", "", false},
		{"POST", "docs/big.bin", "uploads", "application/json", "", `{"size":5,"sha256":"00"}`, false},
		{"POST", "docs/big.bin", "uploadId=abc123", "application/json", "", `{"parts":[{"n":1}]}`, false},
		{"GET", "docs/big.bin", "uploadId=abc123&versions", "", "", "", false},
		{"PATCH", "../etc/passwd", "", "", "", "", false},
		{"PUT", "a//b", "", "text/html; charset=\x00", "99999999999999999999", "!!!", true},
		{"PUT", "a/versions", "", "", "", "x", false},
		{"GET", "\x00", "", "", "", "", false},
	}
	for _, s := range seeds {
		f.Add(s.method, s.key, s.query, s.ct, s.ifMatch, s.body, s.b64)
	}
	f.Fuzz(func(t *testing.T, method, key, query, ct, ifMatch, body string, b64 bool) {
		var params map[string]string
		if q, err := url.ParseQuery(query); err == nil && len(q) > 0 {
			params = map[string]string{}
			for k, vs := range q {
				params[k] = vs[0]
			}
		}
		table, bucket := objectstest.NewTable(), objectstest.NewBucket("objects")
		h := &objectslambda.HTTP{
			Docs:    &objects.Store{Items: table, Chunks: table, Blobs: bucket},
			Uploads: noUploads{}, Links: fixedLinks{}, MaxBody: 64 << 10,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		req := events.APIGatewayV2HTTPRequest{
			RouteKey: "ANY /objects/{key+}", RawPath: "/objects/" + key,
			PathParameters: map[string]string{"key": key}, QueryStringParameters: params,
			Headers: map[string]string{"content-type": ct, "if-match": ifMatch},
			Body:    body, IsBase64Encoded: b64,
		}
		req.RequestContext.HTTP.Method = method
		for range 2 { // the second sees what the first stored
			resp, err := h.Handle(context.Background(), req)
			if err != nil {
				t.Fatalf("%s %q: Go error %v", method, key, err)
			}
			switch {
			case resp.StatusCode >= 200 && resp.StatusCode < 400:
			case resp.StatusCode >= 400 && resp.StatusCode < 500:
				if method == http.MethodHead {
					continue // no body
				}
				var eb apigw.ErrorBody
				if err := json.Unmarshal([]byte(resp.Body), &eb); err != nil || eb.Error == "" {
					t.Fatalf("%s %q: %d with body %q: no reason", method, key, resp.StatusCode, resp.Body)
				}
			default:
				t.Fatalf("%s %q (%s, %q, %d bytes): status %d %s", method, key, ct, ifMatch, len(body), resp.StatusCode, strings.TrimSpace(resp.Body))
			}
		}
	})
}
