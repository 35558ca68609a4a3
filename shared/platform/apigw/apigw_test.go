package apigw

import (
	"bytes"
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
)

func TestJSON(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   any
		want   string
		code   int
	}{
		{"no HTML escapes", http.StatusBadRequest, map[string]string{"error": "bad-key", "message": `a&b <c>`}, `{"error":"bad-key","message":"a&b <c>"}`, http.StatusBadRequest},
		{"cannot encode", http.StatusOK, map[string]any{"f": func() {}}, `{"error":"internal","message":"internal error"}`, http.StatusInternalServerError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := JSON(tt.status, tt.body)
			if got.Body != tt.want || got.StatusCode != tt.code || got.Headers["content-type"] != "application/json" {
				t.Errorf("JSON = %d %v %s, want %d %s", got.StatusCode, got.Headers, got.Body, tt.code, tt.want)
			}
		})
	}
}

// Each kind answers its one status; a kind out of the list is a 500.
func TestKindStatus(t *testing.T) {
	for _, tt := range []struct {
		kind Kind
		want int
	}{
		{Internal, 500},
		{Invalid, 400},
		{NotFound, 404},
		{NotAllowed, 405},
		{Conflict, 409},
		{TooLarge, 413},
		{UnsupportedMedia, 415},
		{RangeNotSatisfiable, 416},
		{Unavailable, 503},
		{Kind(200), 500},
	} {
		t.Run(fmt.Sprint(tt.want), func(t *testing.T) {
			if got := tt.kind.Status(); got != tt.want {
				t.Errorf("Kind(%d).Status() = %d, want %d", tt.kind, got, tt.want)
			}
			if got := Refuse(tt.kind, "r", "m").Response().StatusCode; got != tt.want {
				t.Errorf("Refuse(Kind(%d)).Response() = %d, want %d", tt.kind, got, tt.want)
			}
		})
	}
}

// Every error answer is JSON: its reason and message, conflict fields when
// set, its headers, Retry-After on a 503, nothing HTML-escaped.
func TestErrorResponse(t *testing.T) {
	cur := int64(3)
	conflict := Refuse(Conflict, "conflict", "expected version %d, the object is at version %d", 1, 3)
	conflict.CurrentVersion, conflict.Deleted = &cur, true
	for _, tt := range []struct {
		name    string
		err     *Error
		status  int
		body    string
		headers map[string]string
	}{
		{"invalid", Refuse(Invalid, "bad-if-match", "If-Match %q is not a version", "x<y&z"), 400,
			`{"error":"bad-if-match","message":"If-Match \"x<y&z\" is not a version"}`, nil},
		{"conflict", conflict, 409,
			`{"error":"conflict","message":"expected version 1, the object is at version 3","currentVersion":3,"deleted":true}`, nil},
		{"method, with Allow", Refuse(NotAllowed, "method-not-allowed", "PATCH").WithHeader("allow", "GET, PUT"), 405,
			`{"error":"method-not-allowed","message":"PATCH"}`, map[string]string{"allow": "GET, PUT"}},
		{"unavailable says Retry-After", Refuse(Unavailable, ReasonThrottled, "busy"), 503,
			`{"error":"throttled","message":"busy"}`, map[string]string{"retry-after": "1"}},
		{"internal hides its cause", InternalError(errors.New("table arn:aws:dynamodb:secret")), 500,
			`{"error":"internal","message":"internal error"}`, nil},
		{"wrapped keeps its cause out", Wrap(NotFound, ReasonNotFound, "no such poll", errors.New("votesddb: get p: secret")), 404,
			`{"error":"not-found","message":"no such poll"}`, nil},
		{"a format verb in the message's argument", Refuse(Invalid, "r", "%s", "100%d"), 400,
			`{"error":"r","message":"100%d"}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.err.Response()
			if resp.StatusCode != tt.status || resp.Body != tt.body || resp.Headers["content-type"] != "application/json" {
				t.Errorf("Response = %d %v %s, want %d %s", resp.StatusCode, resp.Headers, resp.Body, tt.status, tt.body)
			}
			for k, v := range tt.headers {
				if resp.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, resp.Headers[k], v)
				}
			}
			if tt.status != 503 && resp.Headers["retry-after"] != "" {
				t.Errorf("a %d says Retry-After", tt.status)
			}
		})
	}
}

// The cause of a wrapped error stays in its chain for errors.Is and the
// log, never in its answer.
func TestErrorChain(t *testing.T) {
	cause := errors.New("dynamodb: throttled")
	e := Wrap(Unavailable, ReasonThrottled, "busy", fmt.Errorf("get: %w", cause))
	if !errors.Is(e, cause) {
		t.Errorf("errors.Is(%v, cause) = false", e)
	}
	var found *Error
	if !errors.As(fmt.Errorf("route: %w", e), &found) || found != e {
		t.Errorf("errors.As did not find the *Error through a wrap")
	}
	if got := e.Error(); got != "503 throttled: busy" {
		t.Errorf("Error() = %q", got)
	}
}

// Fail answers e and logs what the client does not see: a 5xx with its
// cause as an error, a 503 as a warning, a 4xx not at all; nil is a 500.
func TestFail(t *testing.T) {
	req := events.APIGatewayV2HTTPRequest{RouteKey: "PUT /objects/{key+}", RawPath: "/objects/" + strings.Repeat("k", 1000)}
	req.RequestContext.HTTP.Method = "PUT"
	for _, tt := range []struct {
		name   string
		err    *Error
		status int
		level  string // "" for no log line
		logs   string
	}{
		{"client's fault", Refuse(Invalid, "bad-if-match", "x"), 400, "", ""},
		{"not found", Wrap(NotFound, ReasonNotFound, "no such object", errors.New("objects: not found")), 404, "", ""},
		{"internal", InternalError(errors.New("dynamodb: secret detail")), 500, "ERROR", "dynamodb: secret detail"},
		{"checksum", Wrap(Internal, "checksum-mismatch", "failed verification", errors.New("objects: blob: checksum mismatch")), 500, "ERROR", "checksum mismatch"},
		{"throttled", Wrap(Unavailable, ReasonThrottled, "busy", errors.New("ThrottlingException")), 503, "WARN", "ThrottlingException"},
		{"nil", nil, 500, "ERROR", "no error given"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			resp := Fail(context.Background(), slog.New(slog.NewTextHandler(&log, nil)), req, tt.err)
			if resp.StatusCode != tt.status {
				t.Errorf("Fail = %d, want %d", resp.StatusCode, tt.status)
			}
			line := log.String()
			switch {
			case tt.level == "" && line != "":
				t.Errorf("a %d is logged: %s", tt.status, line)
			case tt.level != "" && (!strings.Contains(line, "level="+tt.level) || !strings.Contains(line, tt.logs)):
				t.Errorf("log %q, want level %s with %q", line, tt.level, tt.logs)
			case len(line) > 600:
				t.Errorf("log line of %d bytes: the path is not cut", len(line))
			}
			if strings.Contains(resp.Body, "secret") || strings.Contains(resp.Body, "Exception") {
				t.Errorf("answer %s shows the cause", resp.Body)
			}
		})
	}
}

func TestHeader(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers map[string]string
		ask     string
		want    string
	}{
		{"API Gateway's lower case", map[string]string{"content-type": "text/plain"}, "content-type", "text/plain"},
		{"asked in another case", map[string]string{"content-type": "text/plain"}, "Content-Type", "text/plain"},
		{"sent in another case", map[string]string{"Content-Type": "text/plain"}, "content-type", "text/plain"},
		{"sent in capitals", map[string]string{"IF-MATCH": `"3"`}, "if-match", `"3"`},
		{"trimmed", map[string]string{"range": " \tbytes=0-1 "}, "range", "bytes=0-1"},
		{"absent", map[string]string{"range": "bytes=0-1"}, "if-range", ""},
		{"empty value", map[string]string{"if-match": ""}, "if-match", ""},
		{"no headers", nil, "range", ""},
		{"a longer name is not it", map[string]string{"content-type-x": "a"}, "content-type", ""},
		{"a prefix is not it", map[string]string{"content": "a"}, "content-type", ""},
		// Names that differ only in case: the one written as asked, then
		// the lower-case one, then the first in byte order; never the map's
		// order.
		{"as asked first", map[string]string{"Range": "a", "range": "b", "RANGE": "c"}, "Range", "a"},
		{"lower case next", map[string]string{"RANGE": "c", "range": "b", "RaNgE": "d"}, "Range", "b"},
		{"byte order last", map[string]string{"RaNgE": "d", "RANGE": "c", "rANGE": "e"}, "range", "c"},
		// Hostile names and values come back as they are, to be judged by
		// their reader.
		{"the Kelvin sign is not k", map[string]string{"\u212a": "kelvin"}, "k", ""},
		{"the long s is not s", map[string]string{"x-object-\u017fha256": "x"}, "x-object-sha256", ""},
		{"one byte is not two", map[string]string{"\xc3": "x"}, "\u00c3", ""},
		{"NUL in a value", map[string]string{"if-match": "1\x00"}, "if-match", "1\x00"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // map order varies between runs
				if got := Header(events.APIGatewayV2HTTPRequest{Headers: tt.headers}, tt.ask); got != tt.want {
					t.Fatalf("Header(%v, %q) = %q, want %q", tt.headers, tt.ask, got, tt.want)
				}
			}
		})
	}
}

func TestBody(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		name    string
		body    string
		base64  bool
		limit   int
		want    string
		status  int    // 0: no error
		reason  string // of the error
		message string // in the error's message
	}{
		{"plain", "hello", false, 5, "hello", 0, "", ""},
		{"empty", "", false, 5, "", 0, "", ""},
		{"plain over", "hello!", false, 5, "", 413, ReasonTooLarge, "the body is 6 bytes, the limit is 5 bytes; hint"},
		{"base64", b64("hello"), true, 5, "hello", 0, "", ""},
		{"base64 empty", "", true, 5, "", 0, "", ""},
		{"base64 binary", b64("\x00\xff\xfe"), true, 3, "\x00\xff\xfe", 0, "", ""},
		{"base64 over after decoding", b64("hello!"), true, 5, "", 413, ReasonTooLarge, "the body is 6 bytes"},
		{"base64 over before decoding", b64(strings.Repeat("x", 300)), true, 100, "", 413, ReasonTooLarge, "the body is about 300 bytes"},
		{"base64 broken", "!!!!", true, 5, "", 400, ReasonBadBody, "does not decode"},
		{"base64 unpadded", "aGk", true, 5, "", 400, ReasonBadBody, "does not decode"},
		{"base64 URL alphabet", "-_-_", true, 5, "", 400, ReasonBadBody, "does not decode"},
		{"limit in KiB", strings.Repeat("a", 70<<10), false, 64 << 10, "", 413, ReasonTooLarge, "the limit is 64 KiB"},
		{"limit in MiB", strings.Repeat("a", 4<<20+1), false, 4 << 20, "", 413, ReasonTooLarge, "the limit is 4 MiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Body(events.APIGatewayV2HTTPRequest{Body: tt.body, IsBase64Encoded: tt.base64}, tt.limit, "; hint")
			var e *Error
			switch {
			case tt.status == 0 && (err != nil || string(got) != tt.want):
				t.Errorf("Body = %q, %v; want %q", got, err, tt.want)
			case tt.status != 0 && (!errors.As(err, &e) || e.Status != tt.status || e.ErrorBody.Error != tt.reason ||
				!strings.Contains(e.Message, tt.message) || !strings.HasSuffix(e.Message, "; hint") && tt.status == 413):
				t.Errorf("Body: %v, want %d %s saying %q and the hint", err, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func TestDecodeJSON(t *testing.T) {
	type doc struct {
		Size *int64   `json:"size"`
		Tags []string `json:"tags"`
	}
	body := JSONBody{Limit: 64 << 10, Want: `{"size":N}`, Malformed: `malformed JSON (%s): want {"size":N}`}
	deep := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) // past encoding/json's 10,000 levels
	for _, tt := range []struct {
		name    string
		req     events.APIGatewayV2HTTPRequest
		status  int // 0: decoded
		reason  string
		message string
	}{
		{"one object", events.APIGatewayV2HTTPRequest{Body: `{"size":3,"tags":["a"]}`}, 0, "", ""},
		{"base64", events.APIGatewayV2HTTPRequest{Body: base64.StdEncoding.EncodeToString([]byte(`{"size":3}`)), IsBase64Encoded: true}, 0, "", ""},
		{"trailing space", events.APIGatewayV2HTTPRequest{Body: "{\"size\":3}\n  "}, 0, "", ""},
		{"empty", events.APIGatewayV2HTTPRequest{}, 400, ReasonMissingBody, `missing body: want {"size":N}`},
		{"spaces", events.APIGatewayV2HTTPRequest{Body: " \n\t"}, 400, ReasonMissingBody, "missing body"},
		{"cut short", events.APIGatewayV2HTTPRequest{Body: `{"size":`}, 400, ReasonInvalidJSON, `malformed JSON (`},
		{"wrong type", events.APIGatewayV2HTTPRequest{Body: `{"size":"big"}`}, 400, ReasonInvalidJSON, `field "size": want a whole number, got a string`},
		{"unknown field, quoted as sent", events.APIGatewayV2HTTPRequest{Body: `{"a&b<c>":1}`}, 400, ReasonInvalidJSON, `unknown field "a&b<c>"`},
		{"two values", events.APIGatewayV2HTTPRequest{Body: `{"size":1} {"size":2}`}, 400, ReasonInvalidJSON, `malformed JSON (more than one JSON value): want {"size":N}`},
		{"an array", events.APIGatewayV2HTTPRequest{Body: `[1]`}, 400, ReasonInvalidJSON, "want an object"},
		{"NUL", events.APIGatewayV2HTTPRequest{Body: "{\"size\":1\x00}"}, 400, ReasonInvalidJSON, "malformed JSON"},
		{"nesting", events.APIGatewayV2HTTPRequest{Body: deep}, 400, ReasonInvalidJSON, "malformed JSON"},
		{"over the limit", events.APIGatewayV2HTTPRequest{Body: `{"tags":["` + strings.Repeat("t", 64<<10) + `"]}`}, 413, ReasonTooLarge, "the limit is 64 KiB"},
		{"broken base64", events.APIGatewayV2HTTPRequest{Body: "{}", IsBase64Encoded: true}, 400, ReasonBadBody, "base64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v doc
			err := DecodeJSON(tt.req, &v, body)
			var e *Error
			switch {
			case tt.status == 0 && err != nil:
				t.Errorf("DecodeJSON: %v", err)
			case tt.status != 0 && (!errors.As(err, &e) || e.Status != tt.status || e.ErrorBody.Error != tt.reason || !strings.Contains(e.Message, tt.message)):
				t.Errorf("DecodeJSON: %v, want %d %s saying %q", err, tt.status, tt.reason, tt.message)
			case e != nil && (strings.Contains(e.Message, "Go ") || strings.Contains(e.Message, "int64") || strings.Contains(e.Message, "apigw.")):
				t.Errorf("message %q names Go's types", e.Message)
			case e != nil && len(e.Message) > 300:
				t.Errorf("message of %d bytes", len(e.Message))
			}
		})
	}
}

// A client reads every error answer into the same *Error: a function's
// body as it is, API Gateway's own with the status's text as its reason.
func TestReadError(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  int
		raw     string
		reason  string
		message string
		gateway bool
	}{
		{"a function's", 409, `{"error":"conflict","message":"at version 3","currentVersion":3}`, "conflict", "at version 3", false},
		{"a function's, unknown fields", 400, `{"error":"bad-x","message":"m","extra":1}`, "bad-x", "m", false},
		{"gateway: signature", 403, `{"message":"Forbidden"}`, "Forbidden", "Forbidden", true},
		{"gateway: no route", 404, `{"message":"Not Found"}`, "Not Found", "Not Found", true},
		{"gateway: payload limit", 413, `{"message":"Request Entity Too Large"}`, ReasonTooLarge, "Request Entity Too Large", true},
		{"gateway: header quota", 431, ``, "Request Header Fields Too Large", "", true},
		{"not JSON", 502, "<html>Bad Gateway</html>", "Bad Gateway", "<html>Bad Gateway</html>", true},
		{"control characters", 500, "oops\x1b[31m\r\n", "Internal Server Error", `oops\x1b[31m\r\n`, true},
		{"long", 500, strings.Repeat("x", 1000), "Internal Server Error", strings.Repeat("x", 200) + "…", true},
		{"an error field that is not a string", 400, `{"error":1,"message":"m"}`, "Bad Request", "m", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, gateway := ReadError(tt.status, []byte(tt.raw))
			if e.Status != tt.status || e.ErrorBody.Error != tt.reason || e.Message != tt.message || gateway != tt.gateway {
				t.Errorf("ReadError = %d %q %q gateway %t, want %d %q %q gateway %t", e.Status, e.ErrorBody.Error, e.Message, gateway,
					tt.status, tt.reason, tt.message, tt.gateway)
			}
		})
	}
}

// What a function answers, a client reads back the same.
func TestReadErrorRoundTrip(t *testing.T) {
	cur := int64(7)
	sent := Refuse(Conflict, "conflict", "the object was deleted at version %d", 7)
	sent.CurrentVersion, sent.Deleted = &cur, true
	resp := sent.Response()
	got, gateway := ReadError(resp.StatusCode, []byte(resp.Body))
	if gateway || got.Status != 409 || got.ErrorBody.Error != "conflict" || got.Message != sent.Message ||
		got.CurrentVersion == nil || *got.CurrentVersion != 7 || !got.Deleted {
		t.Errorf("read back %+v, sent %+v", got, sent)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &raw); err != nil || len(raw) != 4 {
		t.Errorf("body %s: %v; want error, message, currentVersion, deleted", resp.Body, err)
	}
}

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"longer", 4, "long…"},
		{"héllo", 2, "h…"}, // cut inside é: the half rune goes
		{"", 0, ""},
	} {
		if got := Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
