// Package httpapi serves Lambda functions over HTTP the way an API Gateway
// HTTP API with Lambda proxy integrations (payload format 2.0) does, so that
// handlers run locally see the events they see in AWS.
//
// Request to event:
//
//   - The most specific route wins (see Route): literal segments beat
//     {param}, which beats {proxy+}; a method beats ANY; $default catches the
//     rest. No route: 404 {"message":"Not Found"}.
//   - Routing splits the percent-encoded path, so /objects/a%2Fb matches
//     /objects/{key} with key "a/b". Path and query parameters are decoded.
//     rawPath and requestContext.http.path are the decoded path, as HTTP APIs
//     send it.
//   - Header names are lower-cased and repeated headers joined with ","; so
//     are repeated query parameters. Cookie headers move to cookies, split on
//     ";". host, content-length and x-forwarded-for/-port/-proto are set as
//     API Gateway sets them.
//   - The body is sent as text when its Content-Type is text/*,
//     application/json, application/xml or application/javascript and it is
//     valid UTF-8; otherwise (application/x-www-form-urlencoded, a missing
//     Content-Type, anything else) it is base64 with isBase64Encoded true.
//     AWS does not document the list; this is the split observed on real
//     HTTP APIs.
//
// Authorization, per route (Route.Authorizer), before the function is
// invoked: AWS_IAM verifies the SigV4 signature (see WithIAM) and refuses
// with 403 and API Gateway's messages; a JWT authorizer (WithJWTAuthorizer)
// validates RS256 bearer tokens against the issuer's JWKS and refuses with
// 401 {"message":"Unauthorized"}; NONE is open. The event's
// requestContext.authorizer carries the caller (iam) or the claims (jwt).
//
// Response: a JSON object with statusCode is read as a 2.0 response
// (statusCode, headers, multiValueHeaders, cookies as Set-Cookie headers,
// body, base64-decoded when isBase64Encoded). Any other JSON is the body of a
// 200 application/json response; a JSON string is unquoted, as AWS documents
// for "Hello from Lambda!".
//
// Errors keep API Gateway's shapes: invoke error 500 {"message":"Internal
// Server Error"}; timeout 503 {"message":"Service Unavailable"}; event over the
// limit (6 MB, Lambda's) 413 {"message":"Request Entity Too Large"}; response
// over 6 MB or not valid JSON 502 {"message":"Internal Server Error"}; a 2.0
// response that is malformed 500. Every response carries an apigw-requestid
// header. Two local choices: request line and header values over 10240 bytes
// (the HTTP API quota) get 431, and a path, query or header that does not
// decode to UTF-8 gets 400 {"message":"Bad Request"}, since the event is JSON
// text.
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// Invoker runs a function's handler with a raw event and returns its raw
// JSON response. An error is a function error (unhandled, or the runtime's).
// It must honour ctx: when ctx expires the server answers 503.
type Invoker func(ctx context.Context, function string, payload []byte) ([]byte, error)

// Lambda's synchronous invocation limit, for request and response payloads.
const lambdaPayloadLimit = 6 * 1024 * 1024

type config struct {
	accountID        string
	apiID            string
	timeout          time.Duration
	maxEventBytes    int
	maxResponseBytes int
	maxHeaderBytes   int
	now              func() time.Time
	requestID        func() string
	log              *slog.Logger
	iam              *IAM
	jwt              map[string]*jwtVerifier
}

// Option configures a Server.
type Option func(*config)

// WithAccountID sets requestContext.accountId (default 123456789012).
func WithAccountID(id string) Option { return func(c *config) { c.accountID = id } }

// WithAPIID sets requestContext.apiId (default "local").
func WithAPIID(id string) Option { return func(c *config) { c.apiID = id } }

// WithTimeout sets the integration timeout (default and AWS maximum 30s).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxEventBytes sets the largest event, once encoded, that is invoked
// (default 6 MB, Lambda's limit; API Gateway itself accepts 10 MB bodies).
func WithMaxEventBytes(n int) Option { return func(c *config) { c.maxEventBytes = n } }

// WithMaxResponseBytes sets the largest function response (default 6 MB).
func WithMaxResponseBytes(n int) Option { return func(c *config) { c.maxResponseBytes = n } }

// WithMaxHeaderBytes sets the limit on the request line and header values
// (default 10240 bytes, the HTTP API quota).
func WithMaxHeaderBytes(n int) Option { return func(c *config) { c.maxHeaderBytes = n } }

// WithClock sets the clock for requestContext.time and timeEpoch.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithRequestID sets the request id generator (requestContext.requestId and
// the apigw-requestid header).
func WithRequestID(next func() string) Option { return func(c *config) { c.requestID = next } }

// WithLogger sets where function errors and dropped response headers are
// logged; clients only ever see API Gateway's generic messages.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Server is a local HTTP API. It is safe for concurrent use.
type Server struct {
	routes []*route // most specific first
	invoke Invoker
	cfg    config
}

// NewServer checks the routes and builds the server. It fails, wrapping
// ErrInvalidRoute, on bad methods or paths, and on two routes that no
// request could tell apart (same method, same path up to variable names).
func NewServer(routes []Route, invoke Invoker, opts ...Option) (*Server, error) {
	if invoke == nil {
		return nil, errors.New("httpapi: nil Invoker")
	}
	s := &Server{
		invoke: invoke,
		cfg: config{
			accountID:        "123456789012",
			apiID:            "local",
			timeout:          30 * time.Second,
			maxEventBytes:    lambdaPayloadLimit,
			maxResponseBytes: lambdaPayloadLimit,
			maxHeaderBytes:   10240,
			now:              time.Now,
			requestID:        randomRequestID,
			log:              slog.New(slog.DiscardHandler),
		},
	}
	for _, o := range opts {
		o(&s.cfg)
	}
	c := s.cfg
	if c.timeout <= 0 || c.maxEventBytes <= 0 || c.maxResponseBytes <= 0 || c.maxHeaderBytes <= 0 ||
		c.now == nil || c.requestID == nil || c.log == nil {
		return nil, errors.New("httpapi: timeout and limits must be positive; clock, request id and logger not nil")
	}
	seen := map[string]*route{}
	for i, rt := range routes {
		r, err := compileRoute(rt, i)
		if err != nil {
			return nil, err
		}
		switch a := r.Authorizer; {
		case a == "" || a == AuthNone:
		case a == AuthIAM && c.iam == nil:
			return nil, fmt.Errorf("%w: %q uses AWS_IAM but the server has no WithIAM", ErrInvalidRoute, r.key)
		case a != AuthIAM && c.jwt[a] == nil:
			return nil, fmt.Errorf("%w: %q uses authorizer %q, which is not defined", ErrInvalidRoute, r.key, a)
		}
		k := r.Method + " " + r.shape()
		if prev, dup := seen[k]; dup {
			return nil, fmt.Errorf("%w: %q conflicts with %q", ErrInvalidRoute, r.key, prev.key)
		}
		seen[k] = r
		s.routes = append(s.routes, r)
	}
	slices.SortFunc(s.routes, compareSpecificity)
	return s, nil
}

// randomRequestID makes an id shaped like API Gateway's ("LV7fzho-PHcEJPw=").
func randomRequestID() string {
	var b [11]byte
	_, _ = rand.Read(b[:]) // never fails
	return base64.URLEncoding.EncodeToString(b[:])
}

// ServeHTTP handles one request as API Gateway would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := s.cfg.requestID()
	w.Header().Set("Apigw-Requestid", reqID)
	resp, err := s.serve(r, reqID)
	if err != nil {
		s.writeError(w, r, reqID, err)
		return
	}
	resp.write(w)
}

func (s *Server) serve(r *http.Request, reqID string) (*response, error) {
	if err := s.checkHeaderSize(r); err != nil {
		return nil, err
	}
	segs, err := splitPath(r.URL.EscapedPath())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	rt, params := s.route(r.Method, segs)
	if rt == nil {
		return nil, errNotFound
	}
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	authz, err := s.authorize(r, rt, body)
	if err != nil {
		return nil, err
	}
	payload, err := s.event(r, reqID, rt, params, authz)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.timeout)
	defer cancel()
	out, err := s.invoke(ctx, rt.Function, payload)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil:
		return nil, fmt.Errorf("%w: %s after %v", errTimeout, rt.Function, s.cfg.timeout)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", errFunction, rt.Function, err)
	}
	return s.response(out)
}

func (s *Server) route(method string, segs []string) (*route, map[string]string) {
	for _, rt := range s.routes {
		if rt.Method != "ANY" && rt.Method != method {
			continue
		}
		if params, ok := rt.match(segs); ok {
			return rt, params
		}
	}
	return nil, nil
}

// Errors, each mapped to one API Gateway response in writeError.
var (
	errNotFound         = errors.New("httpapi: no route")
	errBadRequest       = errors.New("httpapi: bad request")
	errEventTooLarge    = errors.New("httpapi: event too large")
	errHeadersTooLarge  = errors.New("httpapi: request line and headers too large")
	errFunction         = errors.New("httpapi: function error")
	errTimeout          = errors.New("httpapi: function timed out")
	errBadResponse      = errors.New("httpapi: malformed function response")
	errInvalidJSON      = errors.New("httpapi: function response is not JSON")
	errResponseTooLarge = errors.New("httpapi: function response too large")
)

// writeError is the one place errors become responses. Details go to the
// log, never to the client.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, reqID string, err error) {
	status, message := http.StatusInternalServerError, "Internal Server Error"
	ae, isAuth := asAuthError(err)
	switch {
	case isAuth:
		status, message = ae.status, ae.message
		w.Header().Set("X-Amzn-Errortype", ae.errorType())
		if status == http.StatusUnauthorized {
			w.Header().Set("Www-Authenticate", fmt.Sprintf(`Bearer scope="" error="invalid_token" error_description=%q`, ae.reason))
		}
	case errors.Is(err, errNotFound):
		status, message = http.StatusNotFound, "Not Found"
	case errors.Is(err, errBadRequest):
		status, message = http.StatusBadRequest, "Bad Request"
	case errors.Is(err, errEventTooLarge):
		status, message = http.StatusRequestEntityTooLarge, "Request Entity Too Large"
	case errors.Is(err, errHeadersTooLarge):
		status, message = http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large"
	case errors.Is(err, errTimeout):
		status, message = http.StatusServiceUnavailable, "Service Unavailable"
	case errors.Is(err, errResponseTooLarge), errors.Is(err, errInvalidJSON):
		status = http.StatusBadGateway
	case errors.Is(err, errFunction), errors.Is(err, errBadResponse):
		// 500 Internal Server Error
	}
	level := slog.LevelWarn
	if status == http.StatusNotFound || isAuth {
		level = slog.LevelDebug
	}
	s.cfg.log.Log(r.Context(), level, "httpapi request failed",
		"requestId", reqID, "method", r.Method, "path", r.URL.EscapedPath(), "status", status, "err", err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(messageBody(message)) // a client gone away is not our error
}

// messageBody is API Gateway's error envelope, {"message":"…"}, as JSON
// (a signature refusal's message spans lines) without HTML escaping.
func messageBody(message string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Message string `json:"message"`
	}{message}) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
