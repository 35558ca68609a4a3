// Package apigw writes the answers of Lambda functions behind an API
// Gateway HTTP API (payload format 2.0).
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
