package objectslambda

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// Headers are read whatever the case of their names: API Gateway sends
// them lower-cased, a direct invocation may not. Each request below is
// refused for what its header says, which a lookup of the lower-case name
// alone would not have seen.
func TestHeadersInAnyCase(t *testing.T) {
	var gotType string
	h := &HTTP{
		Docs: docs{
			put: func(key string, body []byte, o objects.PutOptions) (objects.Written, error) {
				gotType = o.ContentType
				return objects.Written{Record: objects.Record{Key: key, Version: 1, Kind: objects.Inline, Size: int64(len(body)), SHA256: objects.SumOf(body), ContentType: o.ContentType}}, nil
			},
			stat: func(key string, version int64) (objects.Record, error) {
				return objects.Record{Key: key, Version: 2, Kind: objects.Inline, Size: 3, Data: []byte("abc"), SHA256: objects.SumOf([]byte("abc"))}, nil
			},
		},
		Log: slog.New(slog.DiscardHandler),
	}
	for _, tt := range []struct {
		name    string
		method  string
		headers map[string]string
		status  int
		reason  string
	}{
		{"If-Match", "PUT", map[string]string{"If-Match": "seven"}, 400, "bad-if-match"},
		{"IF-NONE-MATCH", "PUT", map[string]string{"IF-NONE-MATCH": `"1"`}, 400, "unsupported-precondition"},
		{"Content-Type", "PUT", map[string]string{"Content-Type": "not a type"}, 201, ""}, // the fake store takes it: see gotType
		{"Range", "GET", map[string]string{"Range": "bytes=x"}, 400, "bad-range"},
		{"Range unsatisfiable", "GET", map[string]string{"Range": "bytes=9-"}, 416, "range-not-satisfiable"},
		{"If-Range stale", "GET", map[string]string{"Range": "bytes=0-0", "If-Range": `"1"`}, 200, ""},
		{"If-Range current", "GET", map[string]string{"Range": "bytes=0-0", "If-Range": `"2"`}, 206, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := h.Handle(context.Background(), request(tt.method, "a", tt.headers, "x", false))
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %v: %d %s, want %d %s", tt.method, tt.headers, resp.StatusCode, resp.Body, tt.status, tt.reason)
			}
			if tt.reason != "" {
				var body apigw.ErrorBody
				if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || body.Error != tt.reason {
					t.Errorf("body %s, want reason %s", resp.Body, tt.reason)
				}
			}
			if tt.status == 416 && resp.Headers["content-range"] != "bytes */3" {
				t.Errorf("416 without Content-Range: %v", resp.Headers)
			}
		})
	}
	if gotType != "not a type" {
		t.Errorf("Content-Type reached the store as %q", gotType)
	}
}

// Each of the objects and search domains' errors answers one kind, and so
// one status, whatever wraps it (TestClassify has the rest).
func TestInvalidKinds(t *testing.T) {
	for _, tt := range []struct {
		reason objects.Reason
		status int
	}{
		{objects.ReasonEmptyKey, 400},
		{objects.ReasonKeyTooLong, 400},
		{objects.ReasonKeyNotUTF8, 400},
		{objects.ReasonKeyBadChar, 400},
		{objects.ReasonTooLarge, 413},
		{objects.ReasonBadContentType, 415},
		{objects.ReasonBadVersion, 400},
		{objects.ReasonTooLargeForTable, 413},
		{objects.ReasonBadSHA256, 400},
		{objects.ReasonBadParts, 400},
		{objects.ReasonUploadClosed, 409},
		{objects.ReasonBadRange, 400},
		{objects.ReasonMultipleRanges, 416},
		{objects.ReasonRangeNotSatisfiable, 416},
		{objects.ReasonBadPrefix, 400},
		{objects.ReasonBadDelimiter, 400},
		{objects.ReasonBadLimit, 400},
		{objects.ReasonBadCursor, 400},
	} {
		t.Run(string(tt.reason), func(t *testing.T) {
			e := classify(&objects.InvalidError{Reason: tt.reason, Detail: "d"})
			if e.Status != tt.status || e.ErrorBody.Error != string(tt.reason) || e.Message != "d" {
				t.Errorf("classify = %d %s %q, want %d %s", e.Status, e.ErrorBody.Error, e.Message, tt.status, tt.reason)
			}
		})
	}
}
