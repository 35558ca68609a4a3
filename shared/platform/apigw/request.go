package apigw

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/jsonerr"
)

// Header returns the value of the request's header name, trimmed, whatever
// the case of the name in the request: API Gateway lower-cases header
// names in payload format 2.0, but a direct invocation (the local stack's,
// a test's, another caller's) may not. When names differing only in case
// are all present, the one written as asked wins, then the lower-case
// one, then the first in byte order, so the answer never depends on a
// map's order.
func Header(req events.APIGatewayV2HTTPRequest, name string) string {
	if v, ok := req.Headers[name]; ok {
		return strings.TrimSpace(v)
	}
	if v, ok := req.Headers[strings.ToLower(name)]; ok {
		return strings.TrimSpace(v)
	}
	var found []string
	for k := range req.Headers {
		if asciiEqualFold(k, name) {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return ""
	}
	sort.Strings(found)
	return strings.TrimSpace(req.Headers[found[0]])
}

// asciiEqualFold reports whether a and b are the same header name: equal
// but for the case of ASCII letters. Names are ASCII tokens (RFC 9110);
// Unicode's folding would find "content-type" under a name spelled with
// another script's letters (the Kelvin sign folds to k, the long s to s).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Body returns the request's body, base64-decoded if API Gateway encoded
// it, refusing one over limit bytes (413 too-large; hint ends the message)
// before decoding it, and one marked base64 that does not decode (400
// bad-body).
func Body(req events.APIGatewayV2HTTPRequest, limit int, hint string) ([]byte, error) {
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, tooLarge(fmt.Sprintf("the body is %d bytes", len(req.Body)), limit, hint)
		}
		return []byte(req.Body), nil
	}
	// DecodedLen counts the padding's bytes too: up to 2 over the size.
	if n := base64.StdEncoding.DecodedLen(len(req.Body)); n > limit+2 {
		return nil, tooLarge(fmt.Sprintf("the body is about %d bytes", n), limit, hint)
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, Refuse(Invalid, ReasonBadBody, "the body is marked base64 but does not decode")
	}
	if len(b) > limit {
		return nil, tooLarge(fmt.Sprintf("the body is %d bytes", len(b)), limit, hint)
	}
	return b, nil
}

func tooLarge(what string, limit int, hint string) *Error {
	return Refuse(TooLarge, ReasonTooLarge, "%s, the limit is %s%s", what, bytesOf(limit), hint)
}

// bytesOf writes a limit as it was chosen: 64 KiB, 4 MiB, 1000 bytes.
func bytesOf(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// JSONBody is the JSON body a route takes: its limit and the words of its
// refusals.
type JSONBody struct {
	Limit int // bytes, as Body counts them
	// Want is what the body holds, for "missing body: want <Want>".
	Want string
	// Malformed is the message of a body that is not the route's JSON; its
	// one %s is what is wrong, in the client's words (jsonerr).
	Malformed string
}

// DecodeJSON reads the request's body (Body, within b.Limit) into v
// strictly: one JSON value, no field v does not name. An empty body is 400
// missing-body; anything else that does not decode is 400 invalid-json.
func DecodeJSON(req events.APIGatewayV2HTTPRequest, v any, b JSONBody) error {
	raw, err := Body(req, b.Limit, "")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return Refuse(Invalid, ReasonMissingBody, "missing body: want %s", b.Want)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	what := ""
	switch err := dec.Decode(v); {
	case err != nil:
		what = Clip(jsonerr.Describe(err), 96)
	case dec.More():
		what = "more than one JSON value"
	default:
		return nil
	}
	return Refuse(Invalid, ReasonInvalidJSON, "%s", strings.Replace(b.Malformed, "%s", what, 1))
}
