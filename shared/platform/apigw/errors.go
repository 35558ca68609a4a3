package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Kind is what a refusal is to HTTP, and so its status (Kind.Status). A
// reason does not decide the status alone: bad-content-type is a
// document's Content-Type refused (415) on a PUT, and a search's type=
// parameter refused (400) on a search; the adapter that meets a domain's
// error names its kind.
type Kind uint8

// Kinds.
const (
	Internal            Kind = iota // 500: a failure of ours; the client sees no detail
	Invalid                         // 400: the request is malformed or breaks a rule
	NotFound                        // 404: no such resource (or route)
	NotAllowed                      // 405: the resource does not take the method (with Allow)
	Conflict                        // 409: the resource's state refuses the request
	TooLarge                        // 413: a body over its limit
	UnsupportedMedia                // 415: a Content-Type the route does not take
	RangeNotSatisfiable             // 416: a Range the API will not serve (with Content-Range)
	Unavailable                     // 503: busy, or a dependency down; retry (with Retry-After)
)

// statuses is each kind's status: the one place a refusal gets one.
var statuses = [...]int{
	Internal:            http.StatusInternalServerError,
	Invalid:             http.StatusBadRequest,
	NotFound:            http.StatusNotFound,
	NotAllowed:          http.StatusMethodNotAllowed,
	Conflict:            http.StatusConflict,
	TooLarge:            http.StatusRequestEntityTooLarge,
	UnsupportedMedia:    http.StatusUnsupportedMediaType,
	RangeNotSatisfiable: http.StatusRequestedRangeNotSatisfiable,
	Unavailable:         http.StatusServiceUnavailable,
}

// Status is the HTTP status of an answer of kind k; 500 for a kind not
// listed.
func (k Kind) Status() int {
	if int(k) < len(statuses) {
		return statuses[k]
	}
	return http.StatusInternalServerError
}

// Reasons of the edge itself (ErrorBody.Error), the same on every route;
// each API adds its own (objectsapi.Reason…, voteslambda.Reason…) and its
// domains' (objects.Reason…, search.Reason…). docs/openapi.yaml lists them
// all (ErrorCode).
const (
	ReasonInternal    = "internal"     // 500
	ReasonNotFound    = "not-found"    // 404
	ReasonThrottled   = "throttled"    // 503
	ReasonTooLarge    = "too-large"    // 413: Body
	ReasonBadBody     = "bad-body"     // 400: Body, marked base64 and not
	ReasonMissingBody = "missing-body" // 400: DecodeJSON, an empty body
	ReasonInvalidJSON = "invalid-json" // 400: DecodeJSON, not the route's JSON
)

// ErrorBody is every error answer's body, on every route of both APIs.
type ErrorBody struct {
	Error          string `json:"error"` // the reason: a stable code to branch on
	Message        string `json:"message"`
	CurrentVersion *int64 `json:"currentVersion,omitempty"` // conflicts
	Deleted        bool   `json:"deleted,omitempty"`        // conflicts with a deleted object
}

// Error is an error answer: its status (from its Kind, on the server), the
// body the client reads, and the headers it carries besides content-type
// (names lower-case: allow, content-range). A function builds it with
// Refuse, or its adapter from a domain's error; a client reads it with
// ReadError. Err is the cause, logged by Fail and never answered.
type Error struct {
	Status int
	ErrorBody
	Header map[string]string
	Err    error
}

// Error reads "<status> <reason>: <message>".
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.ErrorBody.Error, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Refuse is an answer of kind k with its reason and a message for the
// client (it must never hold internal state).
func Refuse(k Kind, reason, format string, args ...any) *Error {
	return &Error{Status: k.Status(), ErrorBody: ErrorBody{Error: reason, Message: fmt.Sprintf(format, args...)}}
}

// Wrap is the answer of kind k to the domain's error err: its reason, its
// detail as the message, and err as the cause.
func Wrap(k Kind, reason, detail string, err error) *Error {
	return &Error{Status: k.Status(), ErrorBody: ErrorBody{Error: reason, Message: detail}, Err: err}
}

// InternalError is the answer to an error the client is not told about:
// 500 internal, err logged.
func InternalError(err error) *Error {
	return Wrap(Internal, ReasonInternal, "internal error", err)
}

// WithHeader returns e with the header name (lower-case) set to value.
func (e *Error) WithHeader(name, value string) *Error {
	if e.Header == nil {
		e.Header = map[string]string{}
	}
	e.Header[name] = value
	return e
}

// Response is e's answer: its status, its body as JSON and its headers; a
// 503 also says Retry-After: 1.
func (e *Error) Response() events.APIGatewayV2HTTPResponse {
	resp := JSON(e.Status, e.ErrorBody)
	for k, v := range e.Header {
		resp.Headers[k] = v
	}
	if e.Status == http.StatusServiceUnavailable {
		resp.Headers["retry-after"] = "1"
	}
	return resp
}

// Fail answers a request that failed with e (nil: 500 internal), the one
// place a failed request becomes an answer: a 503 is logged as a warning,
// any other 5xx as an error with its cause, the client seeing neither's
// detail; a 4xx is the client's and is not logged.
func Fail(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, e *Error) events.APIGatewayV2HTTPResponse {
	if e == nil {
		e = InternalError(errors.New("no error given"))
	}
	var cause error = e
	if e.Err != nil {
		cause = e.Err
	}
	switch {
	case e.Status == http.StatusServiceUnavailable:
		log.WarnContext(ctx, "request refused for load", "route", req.RouteKey, "reason", e.ErrorBody.Error, "err", cause)
	case e.Status >= 500:
		log.ErrorContext(ctx, "request failed", "route", req.RouteKey, "method", req.RequestContext.HTTP.Method,
			"path", Clip(req.RawPath, 256), "status", e.Status, "err", cause)
	}
	return e.Response()
}

// ReadError reads an error answer as a client: status and the body raw.
// A function's answer is its ErrorBody as it is. API Gateway's own answer
// (a refused signature, no route, a request over Lambda's payload limit,
// a timeout), before any function ran, has no reason: it gets the
// status's text as its reason (too-large for a 413, the function's reason
// for the same refusal) and its message, or the first 200 bytes of what
// it said, control characters escaped (a message may reach a terminal);
// gateway reports that case.
func ReadError(status int, raw []byte) (e *Error, gateway bool) {
	e = &Error{Status: status}
	if json.Unmarshal(raw, &e.ErrorBody) == nil && e.ErrorBody.Error != "" {
		return e, false
	}
	e.ErrorBody = ErrorBody{Error: http.StatusText(status)}
	if status == http.StatusRequestEntityTooLarge {
		e.ErrorBody.Error = ReasonTooLarge
	}
	var gw struct {
		Message string `json:"message"`
	}
	msg := string(raw)
	if json.Unmarshal(raw, &gw) == nil && gw.Message != "" {
		msg = gw.Message
	}
	e.Message = printable(Clip(msg, 200))
	return e, true
}

// printable is s with control characters and invalid UTF-8 escaped as Go
// quotes them.
func printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Clip cuts s to at most n bytes of valid UTF-8, marking a cut with "…":
// what a message quotes of the client's input, or a log of its path.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
