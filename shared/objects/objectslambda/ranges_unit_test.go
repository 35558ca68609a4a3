package objectslambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// Every answer GET gives to a Range header, over a store fake: the status,
// Content-Range, the body and the refusal's reason.
func TestRangeAnswers(t *testing.T) {
	doc := []byte("0123456789abcdefghij") // 20 bytes
	records := map[string]objects.Record{
		"doc":   {Key: "doc", Version: 3, Kind: objects.Inline, Size: int64(len(doc)), SHA256: objects.SumOf(doc), ContentType: "text/plain", Data: doc},
		"empty": {Key: "empty", Version: 1, Kind: objects.Inline, Size: 0, SHA256: objects.SumOf(nil), ContentType: "text/plain"},
	}
	h := &HTTP{
		Docs: docs{stat: func(key string, _ int64) (objects.Record, error) {
			r, ok := records[key]
			if !ok {
				return objects.Record{}, objects.ErrNotFound
			}
			return r, nil
		}},
		MaxResponse: 8, // a range longer than this is cut
		Log:         slog.New(slog.DiscardHandler),
	}
	tests := []struct {
		name         string
		method, key  string
		headers      map[string]string
		status       int
		body         string // the bytes of a 200 or 206
		contentRange string
		reason       string
	}{
		{"no Range", "GET", "doc", nil, 200, "01234567" + "89abcdefghij", "", ""},
		{"first bytes", "GET", "doc", map[string]string{"range": "bytes=0-3"}, 206, "0123", "bytes 0-3/20", ""},
		{"last byte", "GET", "doc", map[string]string{"range": "bytes=19-19"}, 206, "j", "bytes 19-19/20", ""},
		{"to the end, cut to the response limit", "GET", "doc", map[string]string{"range": "bytes=10-"}, 206, "abcdefgh", "bytes 10-17/20", ""},
		{"suffix", "GET", "doc", map[string]string{"range": "bytes=-3"}, 206, "hij", "bytes 17-19/20", ""},
		{"suffix longer than the document, cut", "GET", "doc", map[string]string{"range": "bytes=-30"}, 206, "01234567", "bytes 0-7/20", ""},
		{"last byte past the end", "GET", "doc", map[string]string{"range": "bytes=18-99"}, 206, "ij", "bytes 18-19/20", ""},
		{"If-Range with the current ETag", "GET", "doc", map[string]string{"range": "bytes=0-1", "if-range": `"3"`}, 206, "01", "bytes 0-1/20", ""},
		{"If-Range with another ETag: the whole document", "GET", "doc", map[string]string{"range": "bytes=0-1", "if-range": `"2"`}, 200, string(doc), "", ""},
		{"If-Range with a date: the whole document", "GET", "doc", map[string]string{"range": "bytes=0-1", "if-range": "Sat, 21 Nov 2026 10:00:00 GMT"}, 200, string(doc), "", ""},
		{"another unit: ignored", "GET", "doc", map[string]string{"range": "items=0-1"}, 200, string(doc), "", ""},
		{"HEAD ignores Range", "HEAD", "doc", map[string]string{"range": "bytes=0-1"}, 200, "", "", ""},
		{"HEAD ignores even a bad Range", "HEAD", "doc", map[string]string{"range": "bytes=x"}, 200, "", "", ""},
		{"empty document: the whole of it", "GET", "empty", map[string]string{"range": "bytes=0-0"}, 200, "", "", ""},
		{"past the end", "GET", "doc", map[string]string{"range": "bytes=20-"}, 416, "", "bytes */20", objectsapi.ReasonRangeNotSatisfiable},
		{"suffix of zero", "GET", "doc", map[string]string{"range": "bytes=-0"}, 416, "", "bytes */20", objectsapi.ReasonRangeNotSatisfiable},
		{"two ranges", "GET", "doc", map[string]string{"range": "bytes=0-1,5-6"}, 416, "", "", objectsapi.ReasonMultipleRanges},
		{"overlapping ranges", "GET", "doc", map[string]string{"range": "bytes=0-5,3-8"}, 416, "", "", objectsapi.ReasonMultipleRanges},
		{"reversed", "GET", "doc", map[string]string{"range": "bytes=5-2"}, 400, "", "", objectsapi.ReasonBadRange},
		{"malformed", "GET", "doc", map[string]string{"range": "bytes 0-1"}, 400, "", "", objectsapi.ReasonBadRange},
		{"missing object", "GET", "nope", map[string]string{"range": "bytes=0-1"}, 404, "", "", apigw.ReasonNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.Handle(context.Background(), request(tt.method, tt.key, tt.headers, "", false))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || resp.Headers["content-range"] != tt.contentRange {
				t.Fatalf("%d, Content-Range %q (%s); want %d, %q", resp.StatusCode, resp.Headers["content-range"], resp.Body, tt.status, tt.contentRange)
			}
			if tt.reason != "" {
				var e apigw.ErrorBody
				if err := json.Unmarshal([]byte(resp.Body), &e); err != nil || e.Error != tt.reason || e.Message == "" {
					t.Errorf("body %s: want reason %q with a message", resp.Body, tt.reason)
				}
				return
			}
			body, err := base64.StdEncoding.DecodeString(resp.Body)
			if err != nil || string(body) != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			if resp.Headers["accept-ranges"] != "bytes" || resp.Headers["etag"] != etag(records[tt.key].Version) || resp.Headers["x-object-size"] == "" {
				t.Errorf("headers %v: want Accept-Ranges, the ETag and the whole size", resp.Headers)
			}
		})
	}
}
