package objectslambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

type answer struct {
	status int
	body   apigw.ErrorBody
	raw    string
}

// call makes one raw request to the API.
func call(t *testing.T, e *stack.Env, method, path string, header map[string]string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, e.APIURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := e.APIClient() // signed, as the AWS_IAM routes require
	hc.CheckRedirect = nil
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// Bad requests, each refused with its status and stable reason.
func TestBadRequests(t *testing.T) {
	e, c := newClient(t)
	ctx := context.Background()
	if _, err := c.Put(ctx, "rejects/doc.txt", []byte("v1"), objectsclient.PutOptions{ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	g, err := c.BeginUpload(ctx, "rejects/single.bin", 3, objectsclient.UploadOptions{SHA256: objects.SumOf([]byte("abc")).String()})
	if err != nil {
		t.Fatal(err)
	}
	json := map[string]string{"Content-Type": "application/json"}
	sha := strings.Repeat("ab", 32)
	tests := []struct {
		name         string
		method, path string
		header       map[string]string
		body         string
		status       int
		reason       string
	}{
		{"NUL in key", "PUT", "/objects/a%00b", nil, "x", 400, "key-bad-char"},
		{"NUL as the key", "GET", "/objects/%00", nil, "", 400, "key-bad-char"},
		{"key too long", "PUT", "/objects/" + strings.Repeat("k", objects.MaxKeyBytes+1), nil, "x", 400, "key-too-long"},
		{"two sub-resources", "GET", "/objects/rejects/doc.txt?versions&uploads", nil, "", 400, "bad-query"},
		{"a version of the versions", "GET", "/objects/rejects/doc.txt?versions&version=1", nil, "", 400, "bad-query"},
		{"unknown query parameter", "GET", "/objects/rejects/doc.txt?acl", nil, "", 400, "bad-query"},
		{"oversized body", "PUT", "/objects/rejects/big.bin", nil, strings.Repeat("x", objectslambda.DefaultMaxBody+1), 413, "too-large"},
		{"stale If-Match", "PUT", "/objects/rejects/doc.txt", map[string]string{"If-Match": `"7"`}, "v2", 409, "conflict"},
		{"malformed If-Match", "PUT", "/objects/rejects/doc.txt", map[string]string{"If-Match": "seven"}, "v2", 400, "bad-if-match"},
		{"If-Match: *", "PUT", "/objects/rejects/doc.txt", map[string]string{"If-Match": "*"}, "v2", 400, "unsupported-precondition"},
		{"create-only on an existing key", "PUT", "/objects/rejects/doc.txt", map[string]string{"If-None-Match": "*"}, "v2", 409, "conflict"},
		{"If-Match: 0 (create only) on an existing key", "PUT", "/objects/rejects/doc.txt", map[string]string{"If-Match": `"0"`}, "v2", 409, "conflict"},
		{"If-Match: 0 on a delete", "DELETE", "/objects/rejects/doc.txt", map[string]string{"If-Match": "0"}, "", 400, "bad-if-match"},
		{"bad placement", "PUT", "/objects/rejects/x?placement=disk", nil, "x", 400, "bad-placement"},
		{"bad content type", "PUT", "/objects/rejects/x", map[string]string{"Content-Type": "not a type"}, "x", 415, "bad-content-type"},
		{"version zero", "GET", "/objects/rejects/doc.txt?version=0", nil, "", 400, "bad-version"},
		{"version not a number", "GET", "/objects/rejects/doc.txt?version=latest", nil, "", 400, "bad-version"},
		{"unknown version", "GET", "/objects/rejects/doc.txt?version=9", nil, "", 404, "not-found"},
		{"unknown key", "GET", "/objects/rejects/nothing", nil, "", 404, "not-found"},
		{"versions of an unknown key", "GET", "/objects/rejects/nothing?versions", nil, "", 404, "not-found"},
		{"stale delete", "DELETE", "/objects/rejects/doc.txt", map[string]string{"If-Match": "3"}, "", 409, "conflict"},
		{"unsupported method", "PATCH", "/objects/rejects/doc.txt", nil, "x", 405, "method-not-allowed"},
		{"PUT to versions", "PUT", "/objects/rejects/doc.txt?versions", nil, "x", 405, "method-not-allowed"},
		{"upload: missing body", "POST", "/objects/rejects/u?uploads", json, "", 400, "missing-body"},
		{"upload: malformed JSON", "POST", "/objects/rejects/u?uploads", json, `{"size":`, 400, "invalid-json"},
		{"upload: unknown field", "POST", "/objects/rejects/u?uploads", json, `{"size":1,"sha256":"` + sha + `","md5":"x"}`, 400, "invalid-json"},
		{"upload: size missing", "POST", "/objects/rejects/u?uploads", json, `{"sha256":"` + sha + `"}`, 400, "invalid-json"},
		{"upload: size not a number", "POST", "/objects/rejects/u?uploads", json, `{"size":"big","sha256":"` + sha + `"}`, 400, "invalid-json"},
		{"upload: bad sha256", "POST", "/objects/rejects/u?uploads", json, `{"size":1,"sha256":"xyz"}`, 400, "bad-sha256"},
		{"upload: too large", "POST", "/objects/rejects/u?uploads", json, `{"size":6000000000,"sha256":"` + sha + `"}`, 413, "too-large"},
		{"upload: negative size", "POST", "/objects/rejects/u?uploads", json, `{"size":-1,"sha256":"` + sha + `"}`, 413, "too-large"},
		{"upload: stale ifMatch", "POST", "/objects/rejects/doc.txt?uploads", json, `{"size":1,"sha256":"` + sha + `","ifMatch":4}`, 409, "conflict"},
		{"upload: bad content type", "POST", "/objects/rejects/u?uploads", json, `{"size":1,"sha256":"` + sha + `","contentType":"///"}`, 415, "bad-content-type"},
		{"unknown upload", "GET", "/objects/rejects/u?uploadId=0123abcd", nil, "", 404, "not-found"},
		{"upload of another key", "GET", "/objects/rejects/other?uploadId=" + g.ID, nil, "", 404, "not-found"},
		{"complete a single PUT", "POST", "/objects/rejects/single.bin?uploadId=" + g.ID, json, `{"parts":[{"partNumber":1,"etag":"x"}]}`, 400, "bad-parts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, e, tt.method, tt.path, tt.header, []byte(tt.body))
			if got.status != tt.status || got.body.Error != tt.reason || got.body.Message == "" {
				t.Errorf("got %d %s, want %d with reason %q and a message", got.status, truncate(got.raw, 300), tt.status, tt.reason)
			}
			if tt.reason == "conflict" && tt.method == "PUT" && (got.body.CurrentVersion == nil || *got.body.CurrentVersion != 1) {
				t.Errorf("conflict without currentVersion 1: %s", got.raw)
			}
		})
	}
	// Nothing above changed the document.
	if o, err := c.Get(ctx, "rejects/doc.txt", 0); err != nil || o.Version != 1 || string(o.Body) != "v1" {
		t.Errorf("after the refusals: %+v %q %v; want v1 unchanged", o.Meta, o.Body, err)
	}
}

// Input meant to break the adapter: refused by the gateway or the key
// rules, never a 500.
func TestHostileInput(t *testing.T) {
	e, _ := newClient(t)
	tests := []struct {
		name         string
		method, path string
		header       map[string]string
		status       int
	}{
		{"invalid UTF-8 in the path", "GET", "/objects/%FF%FE", nil, 400},
		{"NUL in the key", "PUT", "/objects/a%00b", nil, 400},
		{"huge header", "GET", "/objects/a", map[string]string{"X-Junk": strings.Repeat("j", 20000)}, 431},
		{"huge If-Match", "PUT", "/objects/a", map[string]string{"If-Match": strings.Repeat("9", 5000)}, 400},
		{"double-encoded dots stay literal", "GET", "/objects/a/%252E%252E/b", nil, 404}, // the key "a/%2E%2E/b"
		{"backslash traversal is a key", "GET", "/objects/a%5C..%5Cb", nil, 404},
		{"overlong UTF-8 slash", "GET", "/objects/a%C0%AFb", nil, 400},
		{"fullwidth dot segment is just letters", "GET", "/objects/a/%EF%BC%8E%EF%BC%8E/b", nil, 404},
		{"dot segments are a key", "GET", "/objects/a/%2E%2E/etc/passwd", nil, 404},
		{"version overflow", "GET", "/objects/a?version=99999999999999999999", nil, 400},
		{"JSON bomb in upload", "POST", "/objects/a?uploads", map[string]string{"Content-Type": "application/json"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.method == "POST" {
				body = []byte(strings.Repeat("[", 100000))
			}
			got := call(t, e, tt.method, tt.path, tt.header, body)
			if got.status != tt.status {
				t.Errorf("got %d %s, want %d", got.status, truncate(got.raw, 200), tt.status)
			}
		})
	}
}

// An upload whose bytes do not match the declared SHA-256 ends failed:
// no version refers to it and the uploaded object is deleted.
func TestUploadChecksumMismatchFails(t *testing.T) {
	e, c := newClient(t)
	ctx := context.Background()
	declared := objectstest.Random(17*objectstest.MB, 7) // over 16 MiB: multipart, which S3 cannot check
	sent := bytes.Clone(declared)
	sent[len(sent)/2] ^= 1
	key := "mismatch/multipart.bin"
	_, err := c.Upload(ctx, key, bytes.NewReader(sent), int64(len(sent)), objectsclient.UploadOptions{SHA256: objects.SumOf(declared).String()})
	var ue *objectsclient.UploadError
	if !errors.As(err, &ue) || ue.Status.Reason != objects.UploadFailedChecksum {
		t.Fatalf("got %v, want a failed upload with reason %s", err, objects.UploadFailedChecksum)
	}
	if _, err := c.Versions(ctx, key); !objectsclient.IsNotFound(err) {
		t.Errorf("versions: %v, want not found (no reference)", err)
	}
	bucket := e.Vars["OBJECTS_BUCKET_NAME"]
	_, herr := e.Clients.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(objects.UploadKey(key, ue.Status.ID))})
	if herr == nil {
		t.Errorf("the refused upload is still in the bucket")
	}

	// A single PUT carries its SHA-256 signed: the bucket refuses other bytes.
	small := []byte("the declared bytes")
	_, err = c.Upload(ctx, "mismatch/single.bin", bytes.NewReader([]byte("other bytes, same n")[:len(small)]), int64(len(small)), objectsclient.UploadOptions{SHA256: objects.SumOf(small).String()})
	if err == nil {
		t.Fatal("an upload of other bytes than declared succeeded")
	}
	if _, err := c.Versions(ctx, "mismatch/single.bin"); !objectsclient.IsNotFound(err) {
		t.Errorf("versions: %v, want not found (no reference)", err)
	}
}

// An upload based on a version that is no longer the latest when it
// finishes fails with a conflict naming the current version.
func TestUploadStaleIfMatchFails(t *testing.T) {
	_, c := newClient(t)
	ctx := context.Background()
	key := "stale/doc.bin"
	if _, err := c.Put(ctx, key, []byte("v1"), objectsclient.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	body := objectstest.Random(100*objectstest.KB, 9)
	one := int64(1)
	g, err := c.BeginUpload(ctx, key, int64(len(body)), objectsclient.UploadOptions{SHA256: objects.SumOf(body).String(), IfMatch: &one})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, key, []byte("v2"), objectsclient.PutOptions{IfMatch: &one}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(g.Put.Method, g.Put.URL, bytes.NewReader(body))
	for k, v := range g.Put.Header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %v %v", err, resp)
	}
	resp.Body.Close()
	st, err := c.Wait(ctx, key, g.ID)
	var ue *objectsclient.UploadError
	if !errors.As(err, &ue) || st.Reason != objects.UploadFailedConflict || st.CurrentVersion == nil || *st.CurrentVersion != 2 {
		t.Fatalf("got %+v %v, want failed with a conflict at version 2", st, err)
	}
	if o, err := c.Get(ctx, key, 0); err != nil || string(o.Body) != "v2" {
		t.Errorf("latest: %q %v, want v2", o.Body, err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// A body over the PUT limit is refused with the upload route to use
// instead, and that route works when called as the message writes it.
func TestTooLargeNamesAWorkingUploadRoute(t *testing.T) {
	e, _ := newClient(t)
	body := bytes.Repeat([]byte("x"), objectslambda.DefaultMaxBody+1)
	got := call(t, e, "PUT", "/objects/data/c45.bin", nil, body)
	route := regexp.MustCompile(`POST (/objects/\S+\?uploads)`).FindStringSubmatch(got.body.Message)
	if got.status != 413 || route == nil {
		t.Fatalf("got %d %s, want 413 naming POST /objects/...?uploads", got.status, truncate(got.raw, 300))
	}
	if route[1] != "/objects/data/c45.bin?uploads" {
		t.Errorf("the message names %s, want /objects/data/c45.bin?uploads", route[1])
	}
	req := fmt.Sprintf(`{"size":%d,"sha256":%q}`, len(body), objects.SumOf(body).String())
	grant := call(t, e, "POST", route[1], map[string]string{"Content-Type": "application/json"}, []byte(req))
	if grant.status != 201 && grant.status != 200 {
		t.Errorf("POST %s as written: %d %s", route[1], grant.status, truncate(grant.raw, 300))
	}
}

// A body over API Gateway's payload limit never reaches the function: the
// gateway answers a bare 413, which the client reads as the function's own
// too-large refusal, naming the way to send it.
func TestClientReadsTheGatewaysTooLarge(t *testing.T) {
	_, c := newClient(t)
	_, err := c.Put(context.Background(), "rejects/huge.bin", bytes.Repeat([]byte("y"), 4_700_000) /* 6.3 MB base64-encoded in the event */, objectsclient.PutOptions{})
	var e *apigw.Error
	if !errors.As(err, &e) || e.Status != 413 || e.ErrorBody.Error != string(objects.ReasonTooLarge) || !strings.Contains(e.Message, "presigned upload") {
		t.Fatalf("got %v, want a 413 too-large naming the presigned upload", err)
	}
}
