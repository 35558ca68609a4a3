// Package openapicheck holds a local API's answers to docs/openapi.yaml,
// for tests: a client whose exchanges are checked (Client), and a proxy in
// front of the API for programs that take an API URL, such as the CLI
// (Proxy). An answer whose status, headers or body the document does not
// describe for its operation fails the test. It uses kin-openapi, a
// validator nobody here wrote.
package openapicheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Path is the HTTP APIs' description, from the repository's root.
const Path = "docs/openapi.yaml"

// Document is docs/openapi.yaml, loaded and validated once.
type Document struct {
	Doc    *openapi3.T
	router routers.Router
}

var (
	loadOnce sync.Once
	loaded   *Document
	loadErr  error
)

// Load reads and validates root's docs/openapi.yaml once for the test
// binary, with kin-openapi's router over its operations. The router
// ignores the document's servers (each local stack has its own port): a
// request's path is matched as it is.
func Load(tb testing.TB, root string) *Document {
	tb.Helper()
	loadOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(filepath.Join(root, Path))
		if err != nil {
			loadErr = fmt.Errorf("load %s: %w", Path, err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			loadErr = fmt.Errorf("%s: %w", Path, err)
			return
		}
		routed := *doc
		routed.Servers = nil
		router, err := legacy.NewRouter(&routed)
		if err != nil {
			loadErr = fmt.Errorf("%s: %w", Path, err)
			return
		}
		loaded = &Document{Doc: doc, router: router}
	})
	if loadErr != nil {
		tb.Fatal(loadErr)
	}
	return loaded
}

// Client returns hc with every answer from the API at apiURL checked
// against the document. With requests, the requests are checked too (for
// tests that send only valid ones). Answers from elsewhere (S3's presigned
// URLs) pass unchecked. When tb ends it logs how many answers were checked.
func (d *Document) Client(tb testing.TB, apiURL string, hc *http.Client, requests bool) *http.Client {
	tb.Helper()
	c := d.checker(tb, apiURL, hc.Transport, requests)
	out := *hc
	out.Transport = c
	return &out
}

// Proxy serves, until tb ends, a proxy to the API at apiURL whose every
// answer is checked against the document, and returns its URL. The Host
// header passes as the client sent it, so a request signed for the
// proxy's address is verified by the API as signed.
func (d *Document) Proxy(tb testing.TB, apiURL string) string {
	tb.Helper()
	target, err := url.Parse(apiURL)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	front := "http://" + srv.Listener.Addr().String()
	c := d.checker(tb, front, nil, false)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.URL.RawPath, pr.Out.URL.Path = pr.In.URL.RawPath, pr.In.URL.Path
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
		},
		Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			// The checker routes by the front's host; the request goes on
			// to the API's.
			front := req.Clone(req.Context())
			front.URL.Host = c.host
			resp, err := c.base.RoundTrip(req)
			if err != nil {
				return resp, err
			}
			return c.checked(front, nil, resp)
		}),
	}
	srv.Config.Handler = rp
	srv.Start()
	tb.Cleanup(srv.Close)
	return front
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (d *Document) checker(tb testing.TB, apiURL string, base http.RoundTripper, requests bool) *checker {
	api, err := url.Parse(apiURL)
	if err != nil {
		tb.Fatal(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	c := &checker{tb: tb, router: d.router, host: api.Host, base: base, requests: requests}
	tb.Cleanup(func() { tb.Logf("%d answers of the API checked against %s", c.count.Load(), Path) })
	return c
}

// checker is an http.RoundTripper that checks each exchange with the API
// against the document.
type checker struct {
	tb       testing.TB
	router   routers.Router
	host     string
	base     http.RoundTripper
	requests bool
	count    atomic.Int64
}

func (c *checker) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != c.host {
		return c.base.RoundTrip(req)
	}
	var sent []byte
	if c.requests && req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		sent, err = io.ReadAll(b)
		b.Close()
		if err != nil {
			return nil, err
		}
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	return c.checked(req, sent, resp)
}

// checked reads the answer, checks the exchange, and returns the answer
// with its body to read again.
func (c *checker) checked(req *http.Request, sent []byte, resp *http.Response) (*http.Response, error) {
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(got))
	if err := c.check(req, sent, resp, got); err != nil {
		c.tb.Errorf("%s %s → %d %s: not as %s says: %v", req.Method, Truncated(req.URL.RequestURI()), resp.StatusCode,
			Truncated(string(got)), Path, err)
		return resp, nil
	}
	if req.Method != http.MethodHead { // openapi3filter does not check HEAD answers
		c.count.Add(1)
	}
	return resp, nil
}

// check validates one exchange: the request (when c.requests) and the
// answer, against the operation the request's method and path name.
func (c *checker) check(req *http.Request, sent []byte, resp *http.Response, got []byte) error {
	route, params, err := c.route(req)
	if err != nil {
		return fmt.Errorf("no operation for %s %s: %w", req.Method, req.URL.Path, err)
	}
	ctx := context.Background()
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if c.requests {
		vreq := req.Clone(ctx)
		vreq.Body = io.NopCloser(bytes.NewReader(sent))
		vin := *in
		vin.Request = vreq
		if err := openapi3filter.ValidateRequest(ctx, &vin); err != nil {
			return fmt.Errorf("request: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: opts}
	out.SetBodyBytes(got)
	return openapi3filter.ValidateResponse(ctx, out)
}

// route finds the request's operation. API Gateway's /objects/{key+} is
// greedy: the key is the whole rest of the path, '/' included, where an
// OpenAPI path parameter is one segment (a generated client writes '/' as
// %2F). So a path under /objects/ is routed as one segment, and its key
// is the rest of the decoded path.
func (c *checker) route(req *http.Request) (*routers.Route, map[string]string, error) {
	key, greedy := strings.CutPrefix(req.URL.Path, "/objects/")
	if !greedy || key == "" {
		return c.router.FindRoute(req)
	}
	r := req.Clone(req.Context())
	r.URL.Path, r.URL.RawPath = "/objects/key", ""
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		return nil, nil, err
	}
	params["key"] = key
	return route, params, nil
}

// Truncated shortens s to 300 bytes for a failure message.
func Truncated(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
