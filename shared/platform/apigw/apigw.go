// Package apigw is the HTTP edge of the functions behind an API Gateway
// HTTP API (payload format 2.0), the same for every route of both APIs:
//
//   - one error type, *Error: a Kind that decides the status
//     (Kind.Status, the one place a refusal gets its status), the
//     ErrorBody the client reads, and the headers the answer carries;
//   - one answer to a failed request, Fail, which logs what the client
//     must not see;
//   - one header lookup, Header, that ignores the case of the name (API
//     Gateway lower-cases names; direct invocations, the local stack and
//     tests may not);
//   - one body reader, Body, with its limit, and one strict JSON body
//     reader on top of it, DecodeJSON;
//   - and on the client's side, ReadError, which reads any error answer
//     (a function's ErrorBody or API Gateway's own) into the same *Error.
//
// The domains keep their own error kinds (objects.InvalidError,
// search.InvalidError, votes.ErrNoPoll, …) and import nothing from here:
// each function's adapter says once which *Error each of them is.
package apigw

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// JSON answers status with body as JSON, without HTML escaping: messages
// quote what the client sent, and "&" or "<" read as themselves. A body
// that cannot be encoded answers 500 with the API's internal error.
func JSON(status int, body any) events.APIGatewayV2HTTPResponse {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	out := ""
	if err := enc.Encode(body); err != nil {
		status, out = http.StatusInternalServerError, `{"error":"internal","message":"internal error"}`
	} else {
		out = strings.TrimSuffix(b.String(), "\n")
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{"content-type": "application/json"}, Body: out}
}
