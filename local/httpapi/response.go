package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// response is what goes back to the client.
type response struct {
	status  int
	header  http.Header
	body    []byte
	dropped []string // headers left out because they were unsafe
}

// lambdaResponse is the 2.0 response format. Fields are raw so that wrong
// types are reported rather than silently zeroed.
type lambdaResponse struct {
	StatusCode        json.RawMessage `json:"statusCode"`
	Headers           map[string]string
	MultiValueHeaders map[string][]string
	Cookies           []string
	Body              *string
	IsBase64Encoded   bool
}

// Headers API Gateway owns: the function cannot set them.
var managedHeaders = map[string]bool{
	"connection": true, "content-length": true, "keep-alive": true, "proxy-connection": true,
	"te": true, "trailer": true, "transfer-encoding": true, "upgrade": true, "apigw-requestid": true,
}

// response maps a function's output to the client response.
func (s *Server) response(out []byte) (*response, error) {
	if len(out) > s.cfg.maxResponseBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errResponseTooLarge, len(out), s.cfg.maxResponseBytes)
	}
	trimmed := bytes.TrimSpace(out)
	if !json.Valid(trimmed) {
		return nil, errInvalidJSON
	}
	inferred := func(body []byte) *response {
		return &response{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: body}
	}
	switch trimmed[0] {
	case '"': // "Hello from Lambda!" is the body Hello from Lambda!
		var str string
		if err := json.Unmarshal(trimmed, &str); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadResponse, err)
		}
		return inferred([]byte(str)), nil
	case '{':
	default:
		return inferred(trimmed), nil
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &probe); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadResponse, err)
	}
	if _, ok := probe["statusCode"]; !ok {
		return inferred(trimmed), nil
	}

	var lr lambdaResponse
	if err := json.Unmarshal(trimmed, &lr); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadResponse, err)
	}
	var status int
	if err := json.Unmarshal(lr.StatusCode, &status); err != nil || status < 100 || status > 599 {
		return nil, fmt.Errorf("%w: statusCode %s is not an HTTP status", errBadResponse, lr.StatusCode)
	}
	resp := &response{status: status, header: http.Header{}}
	if lr.Body != nil {
		resp.body = []byte(*lr.Body)
		if lr.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(*lr.Body)
			if err != nil {
				return nil, fmt.Errorf("%w: body is not base64: %w", errBadResponse, err)
			}
			resp.body = b
		}
	}
	for name, v := range lr.Headers {
		resp.add(name, v, false)
	}
	for name, vs := range lr.MultiValueHeaders {
		for _, v := range vs {
			resp.add(name, v, true)
		}
	}
	for _, c := range lr.Cookies {
		resp.add("Set-Cookie", c, true)
	}
	if len(resp.dropped) > 0 {
		s.cfg.log.Warn("httpapi dropped response headers", "headers", resp.dropped)
	}
	return resp, nil
}

// add sets or appends a header unless it is API Gateway's to set or could
// split the response (a bad name, or CR, LF or another control in the value).
func (r *response) add(name, value string, appendValue bool) {
	lower := strings.ToLower(name)
	if managedHeaders[lower] || !validHeaderName(name) || !validHeaderValue(value) {
		r.dropped = append(r.dropped, fmt.Sprintf("%q", name))
		return
	}
	if appendValue {
		if !slices.Contains(r.header.Values(name), value) {
			r.header.Add(name, value)
		}
		return
	}
	r.header.Set(name, value)
}

func (r *response) write(w http.ResponseWriter) {
	h := w.Header()
	for name, vs := range r.header {
		h[name] = vs
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // no sniffing: send what the function sent
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body) // a client gone away is not our error
}

// validHeaderName: an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue: no control characters but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
