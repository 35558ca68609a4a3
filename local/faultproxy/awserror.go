package faultproxy

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
)

// Error shapes. Each is what the service itself answers, checked against the
// aws-sdk-go-v2 deserializers and retryer (aws/retry's
// DefaultThrottleErrorCodes and DefaultRetryableHTTPStatusCodes):
//
// DynamoDB (awsJson1_0): status 400, Content-Type application/x-amz-json-1.0,
// x-amzn-RequestId, x-amz-crc32 (the SDK verifies it), x-amzn-ErrorType with
// the short code, and a body {"__type":"<namespace>#<Code>","message":...}.
// Throttles are ProvisionedThroughputExceededException (namespace
// com.amazonaws.dynamodb.v20120810) by default, or ThrottlingException
// (com.amazon.coral.availability) or RequestLimitExceeded, all typed errors
// of the SDK and throttle codes of its retryer. Server errors are 500
// InternalServerError (a typed error) and 503 ServiceUnavailable, retried for
// their status.
//
// SQS (awsJson1_0, query compatible): status 403 as the service model gives
// it (the SDK classifies by code, not status), x-amzn-query-error
// "RequestThrottled;Sender" and {"__type":"com.amazonaws.sqs#RequestThrottled",
// "message":...}: *types.RequestThrottled, a throttle code of the retryer.
// Query-protocol requests get the same code in an XML <ErrorResponse>.
// Server errors are 500 InternalFailure and 503 ServiceUnavailable.
//
// S3 (restXml): 503 <Error><Code>SlowDown</Code>...; server errors 500
// InternalError and 503 ServiceUnavailable; HEAD answers carry no body.

const (
	dynamoNamespace = "com.amazonaws.dynamodb.v20120810"
	sqsNamespace    = "com.amazonaws.sqs"
	hotKeyMessage   = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)

// awsError is an error answer in service-neutral form; writeError renders it
// in the wire shape of the proxy's service.
type awsError struct {
	status    int
	code      string // short code, e.g. "ProvisionedThroughputExceededException"
	namespace string // JSON __type namespace
	message   string
	sender    bool // the client's fault (SQS Sender) rather than the server's

	throttlingReasons   []throttlingReason
	cancellationReasons []cancellationReason
}

type throttlingReason struct {
	Reason   string `json:"reason"`
	Resource string `json:"resource"`
}

type cancellationReason struct {
	Code    string `json:"Code"`
	Message string `json:"Message,omitempty"`
}

var dynamoThrottles = map[string]awsError{
	ProvisionedThroughputExceeded: {
		status: http.StatusBadRequest, code: ProvisionedThroughputExceeded, namespace: dynamoNamespace, sender: true,
		message: "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
	},
	ThrottlingException: {
		status: http.StatusBadRequest, code: ThrottlingException, namespace: "com.amazon.coral.availability", sender: true,
		message: "Rate of requests exceeds the allowed throughput.",
	},
	RequestLimitExceeded: {
		status: http.StatusBadRequest, code: RequestLimitExceeded, namespace: dynamoNamespace, sender: true,
		message: "Throughput exceeds the current throughput limit for your account. Please contact AWS Support at https://aws.amazon.com/support request a limit increase",
	},
}

// throttleError is the service's throttling answer to op.
func (p *Proxy) throttleError(r *http.Request, op Operation) awsError {
	switch p.service {
	case DynamoDB:
		e := dynamoThrottles[p.dynamoThrottle]
		if e.code == ProvisionedThroughputExceeded && op.Table != "" {
			kind := "Read"
			if isDynamoWrite(op.Action) {
				kind = "Write"
			}
			e.throttlingReasons = []throttlingReason{{
				Reason:   "Table" + kind + "ProvisionedThroughputExceeded",
				Resource: tableARN(r, op.Table),
			}}
		}
		return e
	case SQS:
		return awsError{
			status: http.StatusForbidden, code: "RequestThrottled", namespace: sqsNamespace, sender: true,
			message: "Request is throttled.",
		}
	default:
		return awsError{status: http.StatusServiceUnavailable, code: "SlowDown", message: "Please reduce your request rate."}
	}
}

// serverError is the service's answer for an internal failure (status 500)
// or unavailability (503).
func (p *Proxy) serverError(status int) awsError {
	unavailable := status == http.StatusServiceUnavailable
	switch p.service {
	case DynamoDB:
		if unavailable {
			return awsError{status: status, code: "ServiceUnavailable", namespace: dynamoNamespace, message: "The service is currently unavailable or busy."}
		}
		return awsError{status: status, code: "InternalServerError", namespace: dynamoNamespace, message: "Internal server error"}
	case SQS:
		if unavailable {
			return awsError{status: status, code: "ServiceUnavailable", namespace: sqsNamespace, message: "The request has failed due to a temporary failure of the server."}
		}
		return awsError{status: status, code: "InternalFailure", namespace: sqsNamespace, message: "The request processing has failed because of an unknown error, exception or failure."}
	default:
		if unavailable {
			return awsError{status: status, code: "ServiceUnavailable", message: "Service is unable to handle request."}
		}
		return awsError{status: status, code: "InternalError", message: "We encountered an internal error. Please try again."}
	}
}

// accessDenied is the service's answer to a call its caller may not make.
func (p *Proxy) accessDenied(message string) awsError {
	switch p.service {
	case DynamoDB:
		return awsError{status: http.StatusBadRequest, code: "AccessDeniedException", namespace: "com.amazon.coral.service", sender: true, message: message}
	case SQS:
		return awsError{status: http.StatusForbidden, code: "AccessDenied", namespace: sqsNamespace, sender: true, message: message}
	default:
		return awsError{status: http.StatusForbidden, code: "AccessDenied", message: message}
	}
}

// writeError renders e in the wire shape of the proxy's service.
func (p *Proxy) writeError(w http.ResponseWriter, r *http.Request, e awsError) {
	seq := p.requestSeq.Add(1)
	switch p.service {
	case DynamoDB:
		writeJSONError(w, e, map[string]string{
			"X-Amzn-Requestid": fmt.Sprintf("FAULTPROXY%042X", seq),
			"X-Amzn-Errortype": e.code,
		})
	case SQS:
		fault := "Receiver"
		if e.sender {
			fault = "Sender"
		}
		requestID := fmt.Sprintf("00000000-0000-4000-8000-%012x", seq)
		if sqsJSON(r) {
			writeJSONError(w, e, map[string]string{
				"X-Amzn-Requestid":   requestID,
				"X-Amzn-Query-Error": e.code + ";" + fault,
			})
			return
		}
		body := `<?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error><Type>` +
			fault + `</Type><Code>` + xmlText(e.code) + `</Code><Message>` + xmlText(e.message) +
			`</Message><Detail/></Error><RequestId>` + requestID + `</RequestId></ErrorResponse>`
		writeBody(w, r, e.status, "text/xml", map[string]string{"X-Amzn-Requestid": requestID}, []byte(body))
	default:
		requestID := fmt.Sprintf("%016X", seq)
		hostID := fmt.Sprintf("faultproxy/%016x", seq)
		body := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>` + xmlText(e.code) +
			`</Code><Message>` + xmlText(e.message) + `</Message><RequestId>` + requestID +
			`</RequestId><HostId>` + hostID + `</HostId></Error>`
		writeBody(w, r, e.status, "application/xml", map[string]string{
			"X-Amz-Request-Id": requestID,
			"X-Amz-Id-2":       hostID,
		}, []byte(body))
	}
}

func writeJSONError(w http.ResponseWriter, e awsError, headers map[string]string) {
	doc := struct {
		Type                string               `json:"__type"`
		Message             string               `json:"message,omitempty"`
		MessageTitle        string               `json:"Message,omitempty"`
		ThrottlingReasons   []throttlingReason   `json:"ThrottlingReasons,omitempty"`
		CancellationReasons []cancellationReason `json:"CancellationReasons,omitempty"`
	}{
		Type:                e.namespace + "#" + e.code,
		ThrottlingReasons:   e.throttlingReasons,
		CancellationReasons: e.cancellationReasons,
	}
	// DynamoDB's TransactionCanceledException names its member "Message".
	if e.cancellationReasons != nil {
		doc.MessageTitle = e.message
	} else {
		doc.Message = e.message
	}
	body, err := json.Marshal(doc)
	if err != nil { // only strings and slices of them: cannot happen
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	for k, v := range headers {
		h.Set(k, v)
	}
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// writeBody writes an error document, leaving the body out for HEAD as the
// services do.
func writeBody(w http.ResponseWriter, r *http.Request, status int, contentType string, headers map[string]string, body []byte) {
	h := w.Header()
	for k, v := range headers {
		h.Set(k, v)
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// tableARN returns the ARN of table in the region the request was signed
// for (DynamoDB Local's account id, 000000000000).
func tableARN(r *http.Request, table string) string {
	if strings.HasPrefix(table, "arn:") {
		return table
	}
	return "arn:aws:dynamodb:" + signedRegion(r) + ":000000000000:table/" + table
}

// signedRegion returns the region of the request's SigV4 credential scope
// ("Credential=AKID/20240101/us-east-1/dynamodb/aws4_request"), or
// us-east-1.
func signedRegion(r *http.Request) string {
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return "us-east-1"
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) < 5 || parts[2] == "" {
		return "us-east-1"
	}
	return parts[2]
}
