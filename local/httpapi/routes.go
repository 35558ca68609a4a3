package httpapi

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Route maps a route key to a function, as an HttpApi event in template.yaml
// does. Method is GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS or ANY
// (case-insensitive). Path is "/", literal segments and path variables:
// "/objects/{key}", "/polls/{id}/results", "/files/{proxy+}" (a greedy
// variable, last only). Path "$default" is the catch-all route; its Method
// must be empty or ANY.
type Route struct {
	Method   string
	Path     string
	Function string // logical id of the function the route invokes
	// Authorizer is AuthNone (or ""), AuthIAM or a JWT authorizer's name
	// (see WithIAM, WithJWTAuthorizer).
	Authorizer string
}

// ErrInvalidRoute is wrapped by every route error NewServer returns.
var ErrInvalidRoute = errors.New("httpapi: invalid route")

const defaultRouteKey = "$default"

var methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "ANY"}

type segmentKind int

// The order is the precedence: literal beats {param} beats {proxy+}.
const (
	literal segmentKind = iota
	param
	greedy
)

type segment struct {
	kind  segmentKind
	value string // the literal, or the variable's name
}

type route struct {
	Route
	key   string // routeKey: "PUT /objects/{key}" or "$default"
	segs  []segment
	index int // position in NewServer's list, the last tie-breaker
}

func (r *route) isDefault() bool { return r.key == defaultRouteKey }
func (r *route) isGreedy() bool  { return len(r.segs) > 0 && r.segs[len(r.segs)-1].kind == greedy }

func compileRoute(rt Route, index int) (*route, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q %q: %s", ErrInvalidRoute, rt.Method, rt.Path, fmt.Sprintf(format, args...))
	}
	if rt.Function == "" {
		return nil, bad("no function")
	}
	method := strings.ToUpper(rt.Method)
	if rt.Path == defaultRouteKey {
		if method != "" && method != "ANY" {
			return nil, bad("the $default route takes no method")
		}
		rt.Method = "ANY"
		return &route{Route: rt, key: defaultRouteKey, index: index}, nil
	}
	if !slices.Contains(methods, method) {
		return nil, bad("method must be one of %s", strings.Join(methods, ", "))
	}
	rt.Method = method
	if !strings.HasPrefix(rt.Path, "/") {
		return nil, bad("path must start with /")
	}
	r := &route{Route: rt, key: method + " " + rt.Path, index: index}
	if rt.Path == "/" {
		return r, nil
	}
	names := map[string]bool{}
	parts := strings.Split(rt.Path[1:], "/")
	for i, part := range parts {
		switch {
		case part == "":
			return nil, bad("empty path segment")
		case strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}"):
			name := part[1 : len(part)-1]
			kind := param
			if strings.HasSuffix(name, "+") {
				kind, name = greedy, strings.TrimSuffix(name, "+")
				if i != len(parts)-1 {
					return nil, bad("greedy variable {%s+} must be the last segment", name)
				}
			}
			if !validName(name) {
				return nil, bad("bad path variable name %q", name)
			}
			if names[name] {
				return nil, bad("path variable %q appears twice", name)
			}
			names[name] = true
			r.segs = append(r.segs, segment{kind: kind, value: name})
		case strings.ContainsAny(part, "{}"):
			return nil, bad("a path variable must be a whole segment: %q", part)
		default:
			lit, err := url.PathUnescape(part)
			if err != nil || !utf8.ValidString(lit) || strings.ContainsFunc(lit, isControlOrSpace) || strings.ContainsAny(lit, "?#") {
				return nil, bad("bad literal segment %q", part)
			}
			r.segs = append(r.segs, segment{kind: literal, value: lit})
		}
	}
	return r, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isControlOrSpace(r rune) bool { return r <= ' ' || r == 0x7f }

// shape is the route's path with variable names erased: two routes with the
// same method and shape can never be told apart.
func (r *route) shape() string {
	if r.isDefault() {
		return defaultRouteKey
	}
	var b strings.Builder
	for _, s := range r.segs {
		switch s.kind {
		case literal:
			b.WriteString("/" + url.PathEscape(s.value))
		case param:
			b.WriteString("/{}")
		case greedy:
			b.WriteString("/{+}")
		}
	}
	return b.String()
}

// compareSpecificity orders routes most specific first, the order in which
// API Gateway prefers them: any route before $default; a route without a
// greedy variable before one with; then segment by segment, a literal before
// a {param} before a {proxy+}; then a method before ANY; then the order given.
func compareSpecificity(a, b *route) int {
	if a.isDefault() != b.isDefault() {
		if a.isDefault() {
			return 1
		}
		return -1
	}
	if a.isGreedy() != b.isGreedy() {
		if a.isGreedy() {
			return 1
		}
		return -1
	}
	for i := 0; i < len(a.segs) && i < len(b.segs); i++ {
		if c := int(a.segs[i].kind) - int(b.segs[i].kind); c != 0 {
			return c
		}
	}
	// Among greedy routes the longer literal prefix is the more specific.
	if c := len(b.segs) - len(a.segs); c != 0 {
		return c
	}
	if (a.Method == "ANY") != (b.Method == "ANY") {
		if a.Method == "ANY" {
			return 1
		}
		return -1
	}
	return a.index - b.index
}

// match reports whether the request's path segments (decoded, split on the
// encoded path's slashes so that %2F stays inside its segment) fit the route,
// and returns the path variables.
func (r *route) match(segs []string) (params map[string]string, ok bool) {
	if r.isDefault() {
		return nil, true
	}
	if r.isGreedy() {
		if len(segs) < len(r.segs) {
			return nil, false
		}
	} else if len(segs) != len(r.segs) {
		return nil, false
	}
	for i, s := range r.segs {
		switch {
		case s.kind == greedy:
			rest := strings.Join(segs[i:], "/")
			if rest == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[s.value] = rest
		case segs[i] == "":
			return nil, false
		case s.kind == literal:
			if segs[i] != s.value {
				return nil, false
			}
		default:
			if params == nil {
				params = map[string]string{}
			}
			params[s.value] = segs[i]
		}
	}
	return params, true
}

// errBadPath: the path does not decode to UTF-8 text.
var errBadPath = errors.New("httpapi: path is not percent-encoded UTF-8")

// splitPath splits an escaped path such as "/objects/a%2Fb" into decoded
// segments ["objects", "a/b"]; "/" gives none.
func splitPath(escaped string) ([]string, error) {
	escaped = strings.TrimPrefix(escaped, "/")
	if escaped == "" {
		return nil, nil
	}
	raw := strings.Split(escaped, "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		v, err := url.PathUnescape(r)
		if err != nil || !utf8.ValidString(v) {
			return nil, errBadPath
		}
		segs[i] = v
	}
	return segs, nil
}
