package objectslambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/jsonerr"
)

// header returns a request header (API Gateway lower-cases names).
func header(req events.APIGatewayV2HTTPRequest, name string) string {
	return strings.TrimSpace(req.Headers[name])
}

// body returns the request body, base64-decoded if API Gateway encoded it,
// refusing more than limit bytes before decoding them.
func body(req events.APIGatewayV2HTTPRequest, limit int, hint string) ([]byte, error) {
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, refuse(http.StatusRequestEntityTooLarge, string(objects.ReasonTooLarge), "the body is %d bytes, the limit is %d%s", len(req.Body), limit, hint)
		}
		return []byte(req.Body), nil
	}
	if n := base64.StdEncoding.DecodedLen(len(req.Body)); n > limit+2 {
		return nil, refuse(http.StatusRequestEntityTooLarge, string(objects.ReasonTooLarge), "the body is about %d bytes, the limit is %d%s", n, limit, hint)
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, objectsapi.ReasonBadBody, "the body is marked base64 but does not decode")
	}
	if len(b) > limit {
		return nil, refuse(http.StatusRequestEntityTooLarge, string(objects.ReasonTooLarge), "the body is %d bytes, the limit is %d%s", len(b), limit, hint)
	}
	return b, nil
}

// decodeJSON reads a small JSON request body strictly.
func decodeJSON(req events.APIGatewayV2HTTPRequest, v any, want string) error {
	raw, err := body(req, maxJSONBody, "")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return refuse(http.StatusBadRequest, objectsapi.ReasonMissingBody, "missing body: want %s", want)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(http.StatusBadRequest, objectsapi.ReasonInvalidJSON, "malformed JSON (%s): want %s", truncate(jsonerr.Describe(err), 96), want)
	}
	if dec.More() {
		return refuse(http.StatusBadRequest, objectsapi.ReasonInvalidJSON, "more than one JSON value: want %s", want)
	}
	return nil
}
