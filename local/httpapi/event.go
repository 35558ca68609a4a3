package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// wireRequest marshals an events.APIGatewayV2HTTPRequest as API Gateway
// does. aws-lambda-go's requestContext.authentication is a struct, so it
// would always be sent, empty; API Gateway only sends it for mutual TLS. The
// outer fields shadow the embedded ones of the same JSON name.
type wireRequest struct {
	events.APIGatewayV2HTTPRequest
	RequestContext wireContext `json:"requestContext"`
}

type wireContext struct {
	events.APIGatewayV2HTTPRequestContext
	Authentication *events.APIGatewayV2HTTPRequestContextAuthentication `json:"authentication,omitempty"`
}

// checkHeaderSize applies the HTTP API quota on the request line and header
// values together.
func (s *Server) checkHeaderSize(r *http.Request) error {
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	n := len(r.Method) + 1 + len(uri) + 1 + len(r.Proto) + len(r.Host)
	for _, vs := range r.Header {
		for _, v := range vs {
			n += len(v)
		}
	}
	if n > s.cfg.maxHeaderBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", errHeadersTooLarge, n, s.cfg.maxHeaderBytes)
	}
	return nil
}

// event builds the payload format 2.0 event for r and marshals it.
func (s *Server) event(r *http.Request, reqID string, rt *route, params map[string]string, authz *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) ([]byte, error) {
	// No body can make an event smaller than itself, so reading one byte
	// past the limit is enough to know.
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.cfg.maxEventBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %w", errBadRequest, err)
	}
	if len(body) > s.cfg.maxEventBytes {
		return nil, fmt.Errorf("%w: body over %d bytes", errEventTooLarge, s.cfg.maxEventBytes)
	}

	path, err := url.PathUnescape(r.URL.EscapedPath())
	if err != nil || !utf8.ValidString(path) {
		return nil, fmt.Errorf("%w: %w", errBadRequest, errBadPath)
	}
	if path == "" {
		path = "/"
	}
	headers, cookies, err := eventHeaders(r, len(body))
	if err != nil {
		return nil, err
	}
	query, err := queryParameters(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              rt.key,
		RawPath:               path,
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext:        s.requestContext(r, reqID, rt, path, authz),
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) && utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	payload, err := json.Marshal(wireRequest{
		APIGatewayV2HTTPRequest: ev,
		RequestContext:          wireContext{APIGatewayV2HTTPRequestContext: ev.RequestContext},
	})
	if err != nil {
		return nil, fmt.Errorf("httpapi: marshal event: %w", err)
	}
	if len(payload) > s.cfg.maxEventBytes {
		return nil, fmt.Errorf("%w: event is %d bytes, limit %d", errEventTooLarge, len(payload), s.cfg.maxEventBytes)
	}
	return payload, nil
}

// requestContext is the event's requestContext: the stage, the request's
// id and time, the domain, the authorizer's answer and the HTTP details.
func (s *Server) requestContext(r *http.Request, reqID string, rt *route, path string, authz *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) events.APIGatewayV2HTTPRequestContext {
	now := s.cfg.now().UTC()
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	host := r.Host
	prefix := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		prefix = h
	}
	prefix, _, _ = strings.Cut(prefix, ".")
	return events.APIGatewayV2HTTPRequestContext{
		RouteKey:     rt.key,
		AccountID:    s.cfg.accountID,
		Stage:        "$default",
		RequestID:    reqID,
		APIID:        s.cfg.apiID,
		DomainName:   host,
		DomainPrefix: prefix,
		Time:         now.Format("02/Jan/2006:15:04:05 -0700"),
		TimeEpoch:    now.UnixMilli(),
		Authorizer:   authz,
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
			Method:    r.Method,
			Path:      path,
			Protocol:  r.Proto,
			SourceIP:  sourceIP,
			UserAgent: r.UserAgent(),
		},
	}
}

// isText reports whether API Gateway hands a body of this Content-Type to
// Lambda as text rather than base64.
func isText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	switch {
	case strings.HasPrefix(mt, "text/"):
		return true
	case mt == "application/json", mt == "application/xml", mt == "application/javascript":
		return true
	}
	return false
}

// eventHeaders lower-cases names, joins repeated values with commas, moves
// cookies out and adds the headers API Gateway adds.
func eventHeaders(r *http.Request, bodyLen int) (map[string]string, []string, error) {
	headers := make(map[string]string, len(r.Header)+5)
	var cookies []string
	for name, values := range r.Header {
		lower := strings.ToLower(name)
		for _, v := range values {
			if !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("%w: header %s is not UTF-8", errBadRequest, lower)
			}
		}
		switch lower {
		case "cookie":
			for _, v := range values {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
		case "content-length", "host":
			// Set below from what was actually received.
		default:
			headers[lower] = strings.Join(values, ",")
		}
	}
	if !utf8.ValidString(r.Host) {
		return nil, nil, fmt.Errorf("%w: host is not UTF-8", errBadRequest)
	}
	headers["host"] = r.Host
	headers["content-length"] = strconv.Itoa(bodyLen)
	proto, port := "http", "80"
	if r.TLS != nil {
		proto, port = "https", "443"
	}
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(addr.String()); err == nil {
			port = p
		}
	}
	client := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		client = host
	}
	if prior := headers["x-forwarded-for"]; prior != "" {
		client = prior + ", " + client
	}
	headers["x-forwarded-for"] = client
	headers["x-forwarded-proto"] = proto
	headers["x-forwarded-port"] = port
	return headers, cookies, nil
}

// queryParameters decodes the query string; repeated keys are joined with
// commas in the order given. Pairs that do not decode are kept as sent.
func queryParameters(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	params := map[string]string{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, v = unescapeQuery(k), unescapeQuery(v)
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: query parameter is not UTF-8", errBadRequest)
		}
		if prev, ok := params[k]; ok {
			v = prev + "," + v
		}
		params[k] = v
	}
	if len(params) == 0 {
		return nil, nil
	}
	return params, nil
}

func unescapeQuery(s string) string {
	if v, err := url.QueryUnescape(s); err == nil {
		return v
	}
	return s
}
