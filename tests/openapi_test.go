package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/tests/openapicheck"
)

// openAPIPath is the HTTP APIs' description, from the repository's root.
const openAPIPath = openapicheck.Path

// openAPI loads and validates docs/openapi.yaml once for the package.
func openAPI(tb testing.TB) *openapicheck.Document {
	tb.Helper()
	return openapicheck.Load(tb, repoRoot(tb))
}

// TestOpenAPIErrorReasons holds the document's error reasons (the enum
// ErrorCode) to the code's: every Reason… string constant of the HTTP edge
// both APIs share (platform/apigw), the objects
// API, the objects and search domains and the polls routes is listed, and nothing
// else, so a reason added in the code fails here even before a test
// meets it in an answer. It reads the packages' source, as grep would.
func TestOpenAPIErrorReasons(t *testing.T) {
	schema := openAPI(t).Doc.Components.Schemas["ErrorCode"]
	if schema == nil || schema.Value == nil {
		t.Fatalf("%s: no ErrorCode schema", openAPIPath)
	}
	listed := map[string]bool{}
	for _, v := range schema.Value.Enum {
		listed[fmt.Sprint(v)] = true
	}
	inCode := map[string]string{} // reason → the constant that names it
	for _, dir := range []string{"shared/platform/apigw", "shared/objects/objectsapi", "shared/objects", "shared/search", "shared/votes/voteslambda"} {
		for name, value := range reasonConstants(t, filepath.Join(repoRoot(t), dir)) {
			inCode[value] = dir + ": " + name
		}
	}
	for reason, where := range inCode {
		if !listed[reason] {
			t.Errorf("%s (%s) is not in %s's ErrorCode enum", reason, where, openAPIPath)
		}
	}
	for reason := range listed {
		if _, ok := inCode[reason]; !ok {
			t.Errorf("%s's ErrorCode lists %q, which no Reason constant of the code names", openAPIPath, reason)
		}
	}
}

// reasonConstants returns the string constants named Reason… in the Go
// files (tests aside) of one package directory.
func reasonConstants(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			tb.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							tb.Fatal(err)
						}
						out[name.Name] = v
					}
				}
			}
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no Reason constants in %s", dir)
	}
	return out
}

// apiDo sends one request to env's API with hc and returns the answer's
// status and body.
func apiDo(t *testing.T, env *stack.Env, hc *http.Client, method, path string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, env.APIURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// openAPIChecked returns hc with every answer from env's API checked
// against docs/openapi.yaml (openapicheck). With requests, the requests are
// checked too (for tests that send only valid ones).
func openAPIChecked(tb testing.TB, env *stack.Env, hc *http.Client, requests bool) *http.Client {
	tb.Helper()
	return openAPI(tb).Client(tb, env.APIURL, hc, requests)
}

// checkedAPI is env's signed API client with its answers checked against
// docs/openapi.yaml (openAPIChecked), one per test and stack, for the
// helpers that many tests share.
func checkedAPI(t *testing.T, env *stack.Env) *http.Client {
	t.Helper()
	key := checkedKey{t, env}
	if hc, ok := checkedClients.Load(key); ok {
		return hc.(*http.Client)
	}
	hc, _ := checkedClients.LoadOrStore(key, openAPIChecked(t, env, env.APIClient(), false))
	t.Cleanup(func() { checkedClients.Delete(key) })
	return hc.(*http.Client)
}

type checkedKey struct {
	t   *testing.T
	env *stack.Env
}

var checkedClients sync.Map // checkedKey → *http.Client

// TestAPIAnswersMatchOpenAPI sends one valid request to every operation of
// both APIs on a local stack, and a few that the API refuses, and checks
// every request and answer against docs/openapi.yaml (openAPIChecked; the
// bad-input corpus checks the answers of its hostile requests likewise):
// documents written (an empty one too), read whole and in part, their
// versions, a listing, a presigned upload through its commit to the 303 of
// a document too big for a response, a multipart upload completed, a
// delete; a poll created, read, and its results.
func TestAPIAnswersMatchOpenAPI(t *testing.T) {
	t.Parallel()
	env := upLocal(t)
	signed := openAPIChecked(t, env, env.APIClient(), true)
	plain := openAPIChecked(t, env, &http.Client{Timeout: time.Minute}, true)
	send := func(hc *http.Client, method, path string, header map[string]string, body string, want int) string {
		t.Helper()
		status, raw := apiDo(t, env, hc, method, path, header, body)
		if status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, openapicheck.Truncated(raw), want)
		}
		return raw
	}
	text := map[string]string{"Content-Type": "text/plain"}
	jsonType := map[string]string{"Content-Type": "application/json"}
	dir := unique("openapi")
	doc := "/objects/" + dir + "/notes.txt"

	// Objects: a document's life.
	send(signed, "PUT", doc, map[string]string{"Content-Type": "text/plain", "If-None-Match": "*"}, "first", 201)
	send(signed, "PUT", doc, text, "first", 200) // unchanged
	send(signed, "PUT", doc+"?placement=table", map[string]string{"Content-Type": "text/plain", "If-Match": `"1"`}, "second", 200)
	send(signed, "PUT", doc, map[string]string{"Content-Type": "text/plain", "If-Match": "1"}, "third", 409)
	send(signed, "GET", doc, nil, "", 200)
	send(signed, "GET", doc+"?version=1", nil, "", 200)
	send(signed, "GET", doc, map[string]string{"Range": "bytes=1-3"}, "", 206)
	send(signed, "HEAD", doc, nil, "", 200)
	send(signed, "GET", doc+"?versions=", nil, "", 200)
	send(signed, "GET", "/objects?prefix="+dir+"%2F&delimiter=%2F&limit=10", nil, "", 200)
	send(signed, "GET", "/objects?prefix="+dir+"%2F", nil, "", 200)
	// Searches: a page (the index may not hold the note yet: any page is
	// an answer to check), a fresh one, and a refusal (a request the
	// document calls malformed is the unit tests': the checker refuses it).
	send(signed, "GET", "/objects?fresh=true&limit=5&prefix="+dir+"%2F&search=second", nil, "", 200)
	send(signed, "GET", "/objects?search=&type=text%2F%2A", nil, "", 200)
	send(signed, "GET", "/objects?limit=500&search=x", nil, "", 400)
	send(signed, "GET", doc+"?uploads=", nil, "", 405)
	send(signed, "PUT", "/objects/"+dir+"/empty", nil, "", 201) // an empty document, no Content-Type
	send(signed, "GET", "/objects/"+dir+"/empty", nil, "", 200)

	// A presigned upload of a document over what a response carries.
	big := bytes.Repeat([]byte("b"), 4<<20+1)
	sum := sha256.Sum256(big)
	bigPath := "/objects/" + dir + "/big.bin"
	var grant struct {
		UploadID string `json:"uploadId"`
		Put      struct {
			Method  string              `json:"method"`
			URL     string              `json:"url"`
			Headers map[string][]string `json:"headers"`
		} `json:"put"`
	}
	raw := send(signed, "POST", bigPath+"?uploads=", jsonType,
		fmt.Sprintf(`{"size":%d,"sha256":%q,"contentType":"application/octet-stream"}`, len(big), hex.EncodeToString(sum[:])), 201)
	if err := json.Unmarshal([]byte(raw), &grant); err != nil || grant.Put.URL == "" {
		t.Fatalf("grant %s: %v; want a single presigned PUT", openapicheck.Truncated(raw), err)
	}
	status := bigPath + "?uploadId=" + url.QueryEscape(grant.UploadID)
	send(signed, "GET", status, nil, "", 200) // pending
	put, err := http.NewRequestWithContext(t.Context(), grant.Put.Method, grant.Put.URL, bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range grant.Put.Headers {
		for _, v := range vs {
			put.Header.Add(k, v)
		}
	}
	resp, err := plain.Do(put) // S3's answer: not the API's, not checked
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", resp.Status)
	}
	eventually(t, 30*time.Second, "the upload committed", func() bool {
		return strings.Contains(send(signed, "GET", status, nil, "", 200), `"state":"committed"`)
	})
	send(signed, "POST", status, jsonType, `{"parts":[{"partNumber":1,"etag":"x"}]}`, 400) // a single PUT: nothing to complete
	send(signed, "GET", bigPath, nil, "", 303)
	send(signed, "DELETE", bigPath, nil, "", 200)

	// A multipart upload, completed: 202 while the finalizer works, 200
	// when completed again after it committed.
	huge := bytes.Repeat([]byte("h"), 16<<20+1)
	sum = sha256.Sum256(huge)
	hugePath := "/objects/" + dir + "/huge.bin"
	var mp struct {
		UploadID  string `json:"uploadId"`
		Multipart struct {
			PartSize int64 `json:"partSize"`
			Parts    []struct {
				Method  string              `json:"method"`
				URL     string              `json:"url"`
				Headers map[string][]string `json:"headers"`
			} `json:"parts"`
			Complete string `json:"complete"`
		} `json:"multipart"`
	}
	raw = send(signed, "POST", hugePath+"?uploads=", jsonType, fmt.Sprintf(`{"size":%d,"sha256":%q}`, len(huge), hex.EncodeToString(sum[:])), 201)
	if err := json.Unmarshal([]byte(raw), &mp); err != nil || len(mp.Multipart.Parts) < 2 {
		t.Fatalf("grant %s: %v; want a multipart upload", openapicheck.Truncated(raw), err)
	}
	var done []string
	for i, p := range mp.Multipart.Parts {
		part := huge[int64(i)*mp.Multipart.PartSize : min(int64(i+1)*mp.Multipart.PartSize, int64(len(huge)))]
		req, err := http.NewRequestWithContext(t.Context(), p.Method, p.URL, bytes.NewReader(part))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range p.Headers {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
			t.Fatalf("part %d: %s, ETag %q", i+1, resp.Status, resp.Header.Get("ETag"))
		}
		done = append(done, fmt.Sprintf(`{"partNumber":%d,"etag":%q}`, i+1, resp.Header.Get("ETag")))
	}
	parts := `{"parts":[` + strings.Join(done, ",") + `]}`
	send(signed, "POST", mp.Multipart.Complete, jsonType, parts, 202)
	hugeStatus := hugePath + "?uploadId=" + url.QueryEscape(mp.UploadID)
	eventually(t, 30*time.Second, "the multipart upload committed", func() bool {
		return strings.Contains(send(signed, "GET", hugeStatus, nil, "", 200), `"state":"committed"`)
	})
	send(signed, "POST", mp.Multipart.Complete, jsonType, parts, 200)
	send(signed, "DELETE", hugePath, nil, "", 200)
	send(signed, "DELETE", doc, map[string]string{"If-Match": "2"}, "", 200)
	send(signed, "GET", doc, nil, "", 404)

	// Polls.
	poll := unique("openapi-poll")
	send(signed, "POST", "/polls", jsonType, fmt.Sprintf(`{"pollId":%q,"options":["a","b"],"shards":2,"opensAt":"2026-01-01T00:00:00Z","closesAt":"2099-01-01T00:00:00Z"}`, poll), 201)
	send(signed, "GET", "/polls/"+poll, nil, "", 200)
	send(signed, "GET", "/polls/"+poll+"/results?maxAge=0", nil, "", 200)
	send(signed, "GET", "/polls/"+poll+"/results", nil, "", 200)
	send(signed, "GET", "/polls/no-such-poll", nil, "", 404)
	send(signed, "GET", "/polls/"+poll+"/rejects", nil, "", 200)
	send(signed, "GET", "/polls/"+poll+"/rejects?limit=5", nil, "", 200)
	send(signed, "GET", "/polls/no-such-poll/rejects", nil, "", 404)
	send(plain, "GET", "/polls/"+poll, nil, "", 403)
	send(plain, "GET", "/health", nil, "", 200)
}
