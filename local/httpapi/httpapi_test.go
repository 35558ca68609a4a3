package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// recorder is a fake Invoker: it keeps the last event and answers with
// respond (or a bare 200).
type recorder struct {
	mu       sync.Mutex
	calls    int
	function string
	payload  []byte
	respond  func(ctx context.Context, function string, ev events.APIGatewayV2HTTPRequest) ([]byte, error)
}

var _ Invoker = (&recorder{}).invoke

func (rec *recorder) invoke(ctx context.Context, function string, payload []byte) ([]byte, error) {
	rec.mu.Lock()
	rec.calls++
	rec.function, rec.payload = function, payload
	respond := rec.respond
	rec.mu.Unlock()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	if respond == nil {
		return []byte(`{"statusCode":200}`), nil
	}
	return respond(ctx, function, ev)
}

func (rec *recorder) event(tb testing.TB) events.APIGatewayV2HTTPRequest {
	tb.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(rec.payload, &ev); err != nil {
		tb.Fatalf("event %s: %v", rec.payload, err)
	}
	return ev
}

func respondWith(out string) func(context.Context, string, events.APIGatewayV2HTTPRequest) ([]byte, error) {
	return func(context.Context, string, events.APIGatewayV2HTTPRequest) ([]byte, error) { return []byte(out), nil }
}

var fixedTime = time.Date(2024, 3, 5, 10, 7, 30, 123_000_000, time.UTC)

func mustServer(tb testing.TB, routes []Route, rec *recorder, opts ...Option) *Server {
	tb.Helper()
	opts = append([]Option{
		WithClock(func() time.Time { return fixedTime }),
		WithRequestID(func() string { return "req-1" }),
	}, opts...)
	s, err := NewServer(routes, rec.invoke, opts...)
	if err != nil {
		tb.Fatalf("NewServer: %v", err)
	}
	return s
}

func serve(s http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func assertMessage(tb testing.TB, w *httptest.ResponseRecorder, status int, message string) {
	tb.Helper()
	if w.Code != status {
		tb.Errorf("status = %d, want %d (body %q)", w.Code, status, w.Body.String())
	}
	want := `{"message":"` + message + `"}`
	if got := w.Body.String(); got != want {
		tb.Errorf("body = %s, want %s", got, want)
	}
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		tb.Errorf("Content-Type = %q, want application/json", got)
	}
	if got := w.Header().Get("Apigw-Requestid"); got == "" {
		tb.Error("no apigw-requestid header")
	}
}

var testRoutes = []Route{
	{Method: "GET", Path: "/", Function: "root"},
	{Method: "GET", Path: "/objects/{key}", Function: "getObject"},
	{Method: "put", Path: "/objects/{key}", Function: "putObject"},
	{Method: "ANY", Path: "/objects/{key}", Function: "anyObject"},
	{Method: "GET", Path: "/objects/special", Function: "special"},
	{Method: "GET", Path: "/polls/{id}/results", Function: "results"},
	{Method: "GET", Path: "/polls/{id}/{view}", Function: "pollView"},
	{Method: "GET", Path: "/files/{proxy+}", Function: "files"},
	{Method: "ANY", Path: "/files/static/{proxy+}", Function: "static"},
}

func TestRouting(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		target   string
		function string // "" for 404
		routeKey string
		params   map[string]string
	}{
		{"root", "GET", "/", "root", "GET /", nil},
		{"param", "GET", "/objects/abc", "getObject", "GET /objects/{key}", map[string]string{"key": "abc"}},
		{"method beats ANY", "PUT", "/objects/abc", "putObject", "PUT /objects/{key}", map[string]string{"key": "abc"}},
		{"ANY takes other methods", "DELETE", "/objects/abc", "anyObject", "ANY /objects/{key}", map[string]string{"key": "abc"}},
		{"literal beats param", "GET", "/objects/special", "special", "GET /objects/special", nil},
		{"literal route only for its method", "PUT", "/objects/special", "putObject", "PUT /objects/{key}", map[string]string{"key": "special"}},
		{"encoded slash stays in its segment", "GET", "/objects/a%2Fb", "getObject", "GET /objects/{key}", map[string]string{"key": "a/b"}},
		{"encoded space", "GET", "/objects/hello%20world", "getObject", "GET /objects/{key}", map[string]string{"key": "hello world"}},
		{"plus is not a space in paths", "GET", "/objects/a+b", "getObject", "GET /objects/{key}", map[string]string{"key": "a+b"}},
		{"utf-8", "GET", "/objects/%C3%A9t%C3%A9", "getObject", "GET /objects/{key}", map[string]string{"key": "été"}},
		{"dots are data", "GET", "/objects/..%2F..%2Fetc", "getObject", "GET /objects/{key}", map[string]string{"key": "../../etc"}},
		{"literal after param", "GET", "/polls/42/results", "results", "GET /polls/{id}/results", map[string]string{"id": "42"}},
		{"param after param", "GET", "/polls/42/chart", "pollView", "GET /polls/{id}/{view}", map[string]string{"id": "42", "view": "chart"}},
		{"greedy", "GET", "/files/a/b/c.txt", "files", "GET /files/{proxy+}", map[string]string{"proxy": "a/b/c.txt"}},
		{"greedy decodes", "GET", "/files/a%2Fb/c%20d", "files", "GET /files/{proxy+}", map[string]string{"proxy": "a/b/c d"}},
		{"longer greedy prefix wins even as ANY", "GET", "/files/static/app.css", "static", "ANY /files/static/{proxy+}", map[string]string{"proxy": "app.css"}},
		{"greedy needs a segment", "GET", "/files/static", "files", "GET /files/{proxy+}", map[string]string{"proxy": "static"}},

		{"no route", "GET", "/nope", "", "", nil},
		{"too few segments", "GET", "/objects", "", "", nil},
		{"too many segments", "GET", "/objects/a/b", "", "", nil},
		{"empty param", "GET", "/objects/", "", "", nil},
		{"empty greedy", "GET", "/files/", "", "", nil},
		{"greedy alone", "GET", "/files", "", "", nil},
		{"no method", "POST", "/polls/1/results", "", "", nil},
		{"literals are case-sensitive", "GET", "/OBJECTS/a", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			s := mustServer(t, testRoutes, rec)
			w := serve(s, httptest.NewRequest(tt.method, tt.target, nil))
			if tt.function == "" {
				assertMessage(t, w, http.StatusNotFound, "Not Found")
				if rec.calls != 0 {
					t.Errorf("invoked %q, want no invocation", rec.function)
				}
				return
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200 (body %s)", w.Code, w.Body)
			}
			if got, want := rec.function, tt.function; got != want {
				t.Errorf("function = %q, want %q", got, want)
			}
			ev := rec.event(t)
			if got, want := ev.RouteKey, tt.routeKey; got != want {
				t.Errorf("routeKey = %q, want %q", got, want)
			}
			if got, want := ev.RequestContext.RouteKey, tt.routeKey; got != want {
				t.Errorf("requestContext.routeKey = %q, want %q", got, want)
			}
			if got, want := ev.PathParameters, tt.params; !reflect.DeepEqual(got, want) {
				t.Errorf("pathParameters = %q, want %q", got, want)
			}
		})
	}
}

func TestDefaultRoute(t *testing.T) {
	rec := &recorder{}
	s := mustServer(t, []Route{
		{Path: "$default", Function: "fallback"},
		{Method: "GET", Path: "/{proxy+}", Function: "greedy"},
	}, rec)
	tests := []struct {
		name, method, target, function, routeKey string
	}{
		{"greedy route first", "GET", "/a/b", "greedy", "GET /{proxy+}"},
		{"then $default", "POST", "/a/b", "fallback", "$default"},
		{"root goes to $default", "GET", "/", "fallback", "$default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(s, httptest.NewRequest(tt.method, tt.target, nil))
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200", w.Code)
			}
			if got := rec.function; got != tt.function {
				t.Errorf("function = %q, want %q", got, tt.function)
			}
			if got := rec.event(t).RouteKey; got != tt.routeKey {
				t.Errorf("routeKey = %q, want %q", got, tt.routeKey)
			}
		})
	}
}

func TestNewServerErrors(t *testing.T) {
	tests := []struct {
		name   string
		routes []Route
	}{
		{"unknown method", []Route{{Method: "FETCH", Path: "/a", Function: "f"}}},
		{"no method", []Route{{Path: "/a", Function: "f"}}},
		{"relative path", []Route{{Method: "GET", Path: "a", Function: "f"}}},
		{"empty segment", []Route{{Method: "GET", Path: "/a//b", Function: "f"}}},
		{"trailing slash", []Route{{Method: "GET", Path: "/a/", Function: "f"}}},
		{"greedy not last", []Route{{Method: "GET", Path: "/{p+}/a", Function: "f"}}},
		{"bad variable name", []Route{{Method: "GET", Path: "/{a b}", Function: "f"}}},
		{"empty variable name", []Route{{Method: "GET", Path: "/{}", Function: "f"}}},
		{"variable twice", []Route{{Method: "GET", Path: "/{id}/{id}", Function: "f"}}},
		{"partial segment variable", []Route{{Method: "GET", Path: "/a{id}", Function: "f"}}},
		{"space in literal", []Route{{Method: "GET", Path: "/a b", Function: "f"}}},
		{"query in literal", []Route{{Method: "GET", Path: "/a?b", Function: "f"}}},
		{"no function", []Route{{Method: "GET", Path: "/a"}}},
		{"$default with a method", []Route{{Method: "GET", Path: "$default", Function: "f"}}},
		{"same route twice", []Route{{Method: "GET", Path: "/a", Function: "f"}, {Method: "get", Path: "/a", Function: "g"}}},
		{"same shape, other names", []Route{{Method: "GET", Path: "/a/{x}", Function: "f"}, {Method: "GET", Path: "/a/{y}", Function: "g"}}},
		{"two greedy on one path", []Route{{Method: "ANY", Path: "/{a+}", Function: "f"}, {Method: "ANY", Path: "/{b+}", Function: "g"}}},
		{"two $default", []Route{{Path: "$default", Function: "f"}, {Method: "ANY", Path: "$default", Function: "g"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewServer(tt.routes, (&recorder{}).invoke)
			if !errors.Is(err, ErrInvalidRoute) {
				t.Errorf("NewServer = %v, %v, want an error wrapping ErrInvalidRoute", s, err)
			}
		})
	}
	for name, opts := range map[string][]Option{
		"nil invoker":      nil,
		"zero timeout":     {WithTimeout(0)},
		"zero event limit": {WithMaxEventBytes(0)},
		"nil clock":        {WithClock(nil)},
	} {
		invoke := (&recorder{}).invoke
		if name == "nil invoker" {
			invoke = nil
		}
		if _, err := NewServer(testRoutes, invoke, opts...); err == nil {
			t.Errorf("NewServer with %s succeeded", name)
		}
	}
}

func TestEvent(t *testing.T) {
	rec := &recorder{}
	s := mustServer(t, testRoutes, rec, WithAccountID("111122223333"), WithAPIID("a1b2c3d4e5"))
	r := httptest.NewRequest("PUT", "http://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/objects/r%C3%A9sum%C3%A9%2Fv2?b=2&a=1&a=%C3%A9&flag&sp=a+b&raw=100%25&bad=100%", strings.NewReader(`{"k":"v"}`))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	r.Header.Set("User-Agent", "curl/8.5.0")
	r.Header.Add("X-Multi", "one")
	r.Header.Add("X-Multi", "two")
	r.Header.Add("Cookie", "session=abc; theme=dark")
	r.Header.Add("Cookie", "lang=en")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	r.RemoteAddr = "203.0.113.9:54321"

	w := serve(s, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200: %s", w.Code, w.Body)
	}
	got := rec.event(t)
	want := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "PUT /objects/{key}",
		RawPath:        "/objects/résumé/v2",
		RawQueryString: "b=2&a=1&a=%C3%A9&flag&sp=a+b&raw=100%25&bad=100%",
		Cookies:        []string{"session=abc", "theme=dark", "lang=en"},
		Headers: map[string]string{
			"content-type":      "application/json; charset=utf-8",
			"user-agent":        "curl/8.5.0",
			"x-multi":           "one,two",
			"host":              "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com",
			"content-length":    "9",
			"x-forwarded-for":   "198.51.100.7, 203.0.113.9",
			"x-forwarded-proto": "http",
			"x-forwarded-port":  "80",
		},
		QueryStringParameters: map[string]string{"a": "1,é", "b": "2", "flag": "", "sp": "a b", "raw": "100%", "bad": "100%"},
		PathParameters:        map[string]string{"key": "résumé/v2"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     "PUT /objects/{key}",
			AccountID:    "111122223333",
			Stage:        "$default",
			RequestID:    "req-1",
			APIID:        "a1b2c3d4e5",
			DomainName:   "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com",
			DomainPrefix: "a1b2c3d4e5",
			Time:         "05/Mar/2024:10:07:30 +0000",
			TimeEpoch:    1709633250123,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: "PUT", Path: "/objects/résumé/v2", Protocol: "HTTP/1.1", SourceIP: "203.0.113.9", UserAgent: "curl/8.5.0",
			},
		},
		Body: `{"k":"v"}`,
	}
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.MarshalIndent(got, "", " ")
		wantJSON, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("event\n got %s\nwant %s", gotJSON, wantJSON)
	}

	// The wire JSON has what API Gateway sends, and no more.
	var wire map[string]any
	if err := json.Unmarshal(rec.payload, &wire); err != nil {
		t.Fatal(err)
	}
	ctx := wire["requestContext"].(map[string]any)
	if _, ok := ctx["authentication"]; ok {
		t.Errorf("requestContext.authentication sent without mutual TLS: %v", ctx["authentication"])
	}
	if got, want := wire["isBase64Encoded"], false; got != want {
		t.Errorf("isBase64Encoded = %v, want %v", got, want)
	}
	if got := w.Header().Get("Apigw-Requestid"); got != "req-1" {
		t.Errorf("apigw-requestid = %q, want req-1", got)
	}
}

func TestEventOmitsEmptyParts(t *testing.T) {
	rec := &recorder{}
	s := mustServer(t, testRoutes, rec)
	serve(s, httptest.NewRequest("GET", "/", nil))
	var wire map[string]any
	if err := json.Unmarshal(rec.payload, &wire); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"cookies", "queryStringParameters", "pathParameters", "body", "stageVariables"} {
		if v, ok := wire[key]; ok {
			t.Errorf("%s = %v, want it left out", key, v)
		}
	}
	if got := wire["rawQueryString"]; got != "" {
		t.Errorf("rawQueryString = %v, want empty", got)
	}
}

func TestRequestBodyEncoding(t *testing.T) {
	binary := []byte{0x89, 'P', 'N', 'G', 0x00, 0xff, 0x00}
	tests := []struct {
		name        string
		contentType string
		body        []byte
		wantBase64  bool
	}{
		{"json", "application/json", []byte(`{"a":1}`), false},
		{"json with charset", "application/json; charset=UTF-8", []byte(`[]`), false},
		{"upper-case type", "Application/JSON", []byte(`{}`), false},
		{"plain text", "text/plain", []byte("héllo"), false},
		{"csv", "text/csv", []byte("a,b\n1,2"), false},
		{"xml", "application/xml", []byte("<a/>"), false},
		{"javascript", "application/javascript", []byte("f()"), false},
		{"form is base64 on HTTP APIs", "application/x-www-form-urlencoded", []byte("a=1&b=2"), true},
		{"octet-stream", "application/octet-stream", binary, true},
		{"image", "image/png", binary, true},
		{"no content type", "", []byte("text but untyped"), true},
		{"json suffix types are binary", "application/vnd.api+json", []byte(`{}`), true},
		{"text that is not utf-8", "text/plain", []byte{'a', 0xff, 'b'}, true},
		{"malformed content type", "text/plain; charset", []byte("x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			s := mustServer(t, testRoutes, rec)
			r := httptest.NewRequest("PUT", "/objects/k", bytes.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			if w := serve(s, r); w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200", w.Code)
			}
			ev := rec.event(t)
			if ev.IsBase64Encoded != tt.wantBase64 {
				t.Errorf("isBase64Encoded = %v, want %v", ev.IsBase64Encoded, tt.wantBase64)
			}
			got := []byte(ev.Body)
			if ev.IsBase64Encoded {
				var err error
				if got, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
					t.Fatalf("body %q: %v", ev.Body, err)
				}
			}
			if !bytes.Equal(got, tt.body) {
				t.Errorf("body = %q, want %q", got, tt.body)
			}
		})
	}
}

// TestBinaryRoundTrip runs a real HTTP server: bytes uploaded come back
// unchanged through base64 on both legs.
func TestBinaryRoundTrip(t *testing.T) {
	body := make([]byte, 256*1024)
	for i := range body {
		body[i] = byte(i * 7)
	}
	rec := &recorder{respond: func(_ context.Context, _ string, ev events.APIGatewayV2HTTPRequest) ([]byte, error) {
		return json.Marshal(events.APIGatewayV2HTTPResponse{
			StatusCode:      http.StatusOK,
			Headers:         map[string]string{"Content-Type": "application/octet-stream"},
			Body:            ev.Body,
			IsBase64Encoded: ev.IsBase64Encoded,
		})
	}}
	ts := httptest.NewServer(mustServer(t, testRoutes, rec))
	defer ts.Close()

	req, err := http.NewRequest("PUT", ts.URL+"/objects/blob", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Errorf("status %d, %d bytes back, want 200 and the %d bytes sent", resp.StatusCode, len(got), len(body))
	}
	if got := resp.Header.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("Content-Type = %q, want application/octet-stream", got)
	}
	ev := rec.event(t)
	if got, want := ev.Headers["x-forwarded-port"], ts.Listener.Addr().String()[strings.LastIndex(ts.Listener.Addr().String(), ":")+1:]; got != want {
		t.Errorf("x-forwarded-port = %q, want %q", got, want)
	}
}

func TestResponses(t *testing.T) {
	tests := []struct {
		name       string
		out        string
		wantStatus int
		wantHeader http.Header // checked headers only
		wantBody   string
		noHeaders  []string // must be absent
	}{
		{
			name:       "full 2.0 response",
			out:        `{"statusCode":201,"headers":{"content-type":"text/plain","x-a":"1"},"body":"made"}`,
			wantStatus: 201, wantHeader: http.Header{"Content-Type": {"text/plain"}, "X-A": {"1"}}, wantBody: "made",
		},
		{
			name:       "string is the body",
			out:        `"Hello from Lambda!"`,
			wantStatus: 200, wantHeader: http.Header{"Content-Type": {"application/json"}}, wantBody: "Hello from Lambda!",
		},
		{
			name:       "object without statusCode is the body",
			out:        `{"message": "Hello from Lambda!"}`,
			wantStatus: 200, wantHeader: http.Header{"Content-Type": {"application/json"}}, wantBody: `{"message": "Hello from Lambda!"}`,
		},
		{
			name:       "object with a body but no statusCode is still the body",
			out:        `{"body":"x","headers":{"a":"b"}}`,
			wantStatus: 200, wantHeader: http.Header{"Content-Type": {"application/json"}}, wantBody: `{"body":"x","headers":{"a":"b"}}`, noHeaders: []string{"A"},
		},
		{name: "array", out: `[1,2]`, wantStatus: 200, wantBody: `[1,2]`},
		{name: "number", out: `42`, wantStatus: 200, wantBody: `42`},
		{name: "null", out: `null`, wantStatus: 200, wantBody: `null`},
		{
			name:       "base64 body",
			out:        `{"statusCode":200,"isBase64Encoded":true,"body":"AP8AaGk="}`,
			wantStatus: 200, wantBody: "\x00\xff\x00hi",
		},
		{
			name:       "cookies become set-cookie headers",
			out:        `{"statusCode":200,"cookies":["a=1; Path=/","b=2; HttpOnly"]}`,
			wantStatus: 200, wantHeader: http.Header{"Set-Cookie": {"a=1; Path=/", "b=2; HttpOnly"}},
		},
		{
			name:       "multi-value headers",
			out:        `{"statusCode":200,"headers":{"x-m":"a"},"multiValueHeaders":{"x-m":["a","b"],"x-n":["c"]}}`,
			wantStatus: 200, wantHeader: http.Header{"X-M": {"a", "b"}, "X-N": {"c"}},
		},
		{
			name:       "no content type is not sniffed",
			out:        `{"statusCode":200,"body":"<html></html>"}`,
			wantStatus: 200, wantBody: "<html></html>", noHeaders: []string{"Content-Type"},
		},
		{
			name:       "no body",
			out:        `{"statusCode":204}`,
			wantStatus: 204,
		},
		{
			name:       "header injection is dropped",
			out:        `{"statusCode":200,"headers":{"x-evil":"a\r\nSet-Cookie: pwned=1","bad name":"x","x-nul":"a\u0000b","content-length":"999","transfer-encoding":"chunked","apigw-requestid":"spoof","x-ok":"fine"},"cookies":["c=1\r\nX-Injected: 1"],"body":"ok"}`,
			wantStatus: 200, wantHeader: http.Header{"X-Ok": {"fine"}, "Apigw-Requestid": {"req-1"}}, wantBody: "ok",
			noHeaders: []string{"X-Evil", "Set-Cookie", "X-Injected", "X-Nul", "Bad Name", "Transfer-Encoding", "Content-Length"},
		},
		{name: "statusCode as a string", out: `{"statusCode":"200"}`, wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`},
		{name: "statusCode out of range", out: `{"statusCode":99}`, wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`},
		{name: "statusCode not an integer", out: `{"statusCode":200.5}`, wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`},
		{name: "body not a string", out: `{"statusCode":200,"body":{"a":1}}`, wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`},
		{name: "headers not strings", out: `{"statusCode":200,"headers":{"a":1}}`, wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`},
		{name: "bad base64", out: `{"statusCode":200,"isBase64Encoded":true,"body":"%%%"}`, wantStatus: 500, wantBody: `{"message":"Internal Server Error"}`},
		{name: "not JSON", out: `hello`, wantStatus: 502, wantBody: `{"message":"Internal Server Error"}`},
		{name: "empty output", out: ``, wantStatus: 502, wantBody: `{"message":"Internal Server Error"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{respond: respondWith(tt.out)}
			s := mustServer(t, testRoutes, rec)
			w := serve(s, httptest.NewRequest("GET", "/objects/k", nil))
			if w.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", w.Code, tt.wantStatus)
			}
			for name, want := range tt.wantHeader {
				if got := w.Header().Values(name); !reflect.DeepEqual(got, want) {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
			for _, name := range tt.noHeaders {
				if got := w.Header().Values(name); len(got) > 0 {
					t.Errorf("header %s = %q, want none", name, got)
				}
			}
			if got := w.Body.String(); got != tt.wantBody {
				t.Errorf("body = %q, want %q", got, tt.wantBody)
			}
		})
	}
}

func TestInvokeFailures(t *testing.T) {
	tests := []struct {
		name        string
		respond     func(context.Context, string, events.APIGatewayV2HTTPRequest) ([]byte, error)
		wantStatus  int
		wantMessage string
		// timeout is the API's: 20 ms for the cases that wait for it, a
		// minute for the others, so a busy machine's pause cannot make
		// their answer late.
		timeout time.Duration
	}{
		{
			name: "function error",
			respond: func(context.Context, string, events.APIGatewayV2HTTPRequest) ([]byte, error) {
				return nil, errors.New("panic: secret detail")
			},
			wantStatus: 500, wantMessage: "Internal Server Error", timeout: time.Minute,
		},
		{
			name: "timeout honoured by the invoker",
			respond: func(ctx context.Context, _ string, _ events.APIGatewayV2HTTPRequest) ([]byte, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			},
			wantStatus: 503, wantMessage: "Service Unavailable", timeout: 20 * time.Millisecond,
		},
		{
			name: "answer after the deadline",
			respond: func(ctx context.Context, _ string, _ events.APIGatewayV2HTTPRequest) ([]byte, error) {
				<-ctx.Done()
				return []byte(`{"statusCode":200}`), nil
			},
			wantStatus: 503, wantMessage: "Service Unavailable", timeout: 20 * time.Millisecond,
		},
		{
			name: "response over the limit",
			respond: func(context.Context, string, events.APIGatewayV2HTTPRequest) ([]byte, error) {
				return []byte(`"` + strings.Repeat("x", 2048) + `"`), nil
			},
			wantStatus: 502, wantMessage: "Internal Server Error", timeout: time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{respond: tt.respond}
			s := mustServer(t, testRoutes, rec, WithTimeout(tt.timeout), WithMaxResponseBytes(2048))
			w := serve(s, httptest.NewRequest("GET", "/objects/k", nil))
			assertMessage(t, w, tt.wantStatus, tt.wantMessage)
		})
	}
}

func TestRequestLimits(t *testing.T) {
	tests := []struct {
		name       string
		opts       []Option
		request    func() *http.Request
		wantStatus int
		invoked    bool
	}{
		{
			name:       "body over the event limit",
			opts:       []Option{WithMaxEventBytes(4096)},
			request:    func() *http.Request { return typed("PUT", "/objects/k", "application/json", strings.Repeat("a", 4097)) },
			wantStatus: 413,
		},
		{
			name:       "body under the limit, base64 event over it",
			opts:       []Option{WithMaxEventBytes(4096)},
			request:    func() *http.Request { return typed("PUT", "/objects/k", "image/png", strings.Repeat("\x00", 3500)) },
			wantStatus: 413,
		},
		{
			name:       "text body that fits",
			opts:       []Option{WithMaxEventBytes(4096)},
			request:    func() *http.Request { return typed("PUT", "/objects/k", "text/plain", strings.Repeat("a", 3000)) },
			wantStatus: 200, invoked: true,
		},
		{
			name: "default limit is Lambda's 6 MB",
			request: func() *http.Request {
				return typed("PUT", "/objects/k", "application/json", strings.Repeat("a", 6*1024*1024+1))
			},
			wantStatus: 413,
		},
		{
			name:       "very long path",
			request:    func() *http.Request { return httptest.NewRequest("GET", "/objects/"+strings.Repeat("a", 11000), nil) },
			wantStatus: 431,
		},
		{
			name: "very long header",
			request: func() *http.Request {
				r := httptest.NewRequest("GET", "/objects/k", nil)
				r.Header.Set("X-Big", strings.Repeat("b", 10300))
				return r
			},
			wantStatus: 431,
		},
		{
			name:       "invalid utf-8 in the path",
			request:    func() *http.Request { return httptest.NewRequest("GET", "/objects/%FF%FE", nil) },
			wantStatus: 400,
		},
		{
			name: "raw invalid utf-8 in the path",
			request: func() *http.Request {
				r := httptest.NewRequest("GET", "/objects/k", nil)
				r.URL.Path, r.URL.RawPath = "/objects/\xff", ""
				return r
			},
			wantStatus: 400,
		},
		{
			name:       "invalid utf-8 in the query",
			request:    func() *http.Request { return httptest.NewRequest("GET", "/objects/k?q=%C3%28", nil) },
			wantStatus: 400,
		},
		{
			name: "invalid utf-8 in a header",
			request: func() *http.Request {
				r := httptest.NewRequest("GET", "/objects/k", nil)
				r.Header.Set("X-Bin", "a\xffb")
				return r
			},
			wantStatus: 400,
		},
		{
			name:       "nul byte in the path is data",
			request:    func() *http.Request { return httptest.NewRequest("GET", "/objects/a%00b", nil) },
			wantStatus: 200, invoked: true,
		},
	}
	messages := map[int]string{
		200: "", 400: "Bad Request", 413: "Request Entity Too Large", 431: "Request Header Fields Too Large",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			s := mustServer(t, testRoutes, rec, tt.opts...)
			w := serve(s, tt.request())
			if tt.wantStatus == 200 {
				if w.Code != 200 {
					t.Errorf("status = %d, want 200: %s", w.Code, w.Body)
				}
			} else {
				assertMessage(t, w, tt.wantStatus, messages[tt.wantStatus])
			}
			if got := rec.calls > 0; got != tt.invoked {
				t.Errorf("invoked = %v, want %v", got, tt.invoked)
			}
		})
	}
}

func typed(method, target, contentType, body string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	return r
}

func TestRequestIDOnEveryResponse(t *testing.T) {
	n := 0
	s, err := NewServer(testRoutes, (&recorder{}).invoke, WithRequestID(func() string { n++; return "id-" + string(rune('0'+n)) }))
	if err != nil {
		t.Fatal(err)
	}
	for i, target := range []string{"/objects/k", "/missing", "/objects/k"} {
		w := serve(s, httptest.NewRequest("GET", target, nil))
		if got, want := w.Header().Get("Apigw-Requestid"), "id-"+string(rune('1'+i)); got != want {
			t.Errorf("request %d apigw-requestid = %q, want %q", i, got, want)
		}
	}
}

func TestDefaultRequestIDShape(t *testing.T) {
	id := randomRequestID()
	if len(id) != 16 || !strings.HasSuffix(id, "=") {
		t.Errorf("request id %q, want 16 characters ending in = like LV7fzho-PHcEJPw=", id)
	}
	if randomRequestID() == id {
		t.Error("two request ids are equal")
	}
}

func TestConcurrentRequests(t *testing.T) {
	s, err := NewServer(testRoutes, func(_ context.Context, fn string, payload []byte) ([]byte, error) {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		return json.Marshal(ev.PathParameters["key"])
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			key := strings.Repeat("k", i+1)
			w := serve(s, httptest.NewRequest("GET", "/objects/"+key, nil))
			if w.Code != 200 || w.Body.String() != key {
				t.Errorf("GET /objects/%s = %d %q", key, w.Code, w.Body)
			}
		})
	}
	wg.Wait()
}

func ExampleNewServer() {
	s, err := NewServer([]Route{
		{Method: "GET", Path: "/objects/{key}", Function: "GetObjectFunction"},
	}, func(_ context.Context, function string, payload []byte) ([]byte, error) {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		return json.Marshal(function + " got " + ev.PathParameters["key"])
	})
	if err != nil {
		panic(err)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/objects/a%2Fb", nil))
	fmt.Println(w.Code, w.Body)
	// Output: 200 GetObjectFunction got a/b
}
