package objectslambda

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// apiError is a refusal decided by the adapter itself (the domain's own
// refusals are *objects.InvalidError).
type apiError struct {
	status int
	reason string
	msg    string
	header map[string]string
}

func (e *apiError) Error() string { return e.reason + ": " + e.msg }

// headedError is an error whose response carries a header (a 416's
// Content-Range); classify sees the error it wraps.
type headedError struct {
	err    error
	header map[string]string
}

func (e *headedError) Error() string { return e.err.Error() }
func (e *headedError) Unwrap() error { return e.err }

func withHeader(err error, name, value string) error {
	return &headedError{err: err, header: map[string]string{name: value}}
}

func refuse(status int, reason, format string, args ...any) *apiError {
	return &apiError{status: status, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// fail maps an error to a response: the one place errors become statuses.
// Clients see stable reasons and messages meant for them; anything else
// is logged and answered 500 without detail.
func (h *HTTP) fail(ctx context.Context, req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	st, e := classify(err)
	switch {
	case st == http.StatusConflict && e.Error == objectsapi.ReasonConflict:
		h.emit(emf.Metric{Name: "Conflicts", Unit: emf.Count, Value: 1})
	case e.Error == objectsapi.ReasonChecksum:
		h.emit(emf.Metric{Name: "ChecksumFailures", Unit: emf.Count, Value: 1})
	}
	switch {
	case st >= 500:
		h.Log.ErrorContext(ctx, "request failed", "method", req.RequestContext.HTTP.Method, "path", truncate(req.RawPath, 256), "status", st, "err", err)
	case st == http.StatusServiceUnavailable:
		h.Log.WarnContext(ctx, "request refused for load", "err", err)
	}
	resp := apigw.JSON(st, e)
	var ae *apiError
	if errors.As(err, &ae) {
		for k, v := range ae.header {
			resp.Headers[k] = v
		}
	}
	var he *headedError
	if errors.As(err, &he) {
		for k, v := range he.header {
			resp.Headers[k] = v
		}
	}
	if st == http.StatusServiceUnavailable {
		resp.Headers["retry-after"] = "1"
	}
	return resp
}

// classify is the error model: status and body for every error.
func classify(err error) (int, objectsapi.ErrorBody) {
	var ae *apiError
	var ie *objects.InvalidError
	var ce *objects.ConflictError
	var se *search.InvalidError
	switch {
	case errors.As(err, &ae):
		return ae.status, objectsapi.ErrorBody{Error: ae.reason, Message: ae.msg}
	case errors.As(err, &ce):
		cur := ce.Current
		body := objectsapi.ErrorBody{Error: objectsapi.ReasonConflict, Message: conflictMessage(ce), CurrentVersion: &cur}
		if ce.Deleted {
			body.Deleted = true
		}
		return http.StatusConflict, body
	case errors.As(err, &ie):
		body := objectsapi.ErrorBody{Error: string(ie.Reason), Message: ie.Detail}
		switch ie.Reason {
		case objects.ReasonTooLarge, objects.ReasonTooLargeForTable:
			return http.StatusRequestEntityTooLarge, body
		case objects.ReasonBadContentType:
			return http.StatusUnsupportedMediaType, body
		case objects.ReasonUploadClosed:
			return http.StatusConflict, body
		case objects.ReasonRangeNotSatisfiable, objects.ReasonMultipleRanges:
			return http.StatusRequestedRangeNotSatisfiable, body
		}
		return http.StatusBadRequest, body
	case errors.As(err, &se):
		return http.StatusBadRequest, objectsapi.ErrorBody{Error: string(se.Reason), Message: se.Detail}
	case errors.Is(err, search.ErrDisabled):
		return http.StatusServiceUnavailable, objectsapi.ErrorBody{Error: objectsapi.ReasonSearchDisabled, Message: "this stack runs without search"}
	case errors.Is(err, search.ErrUnavailable), errors.Is(err, search.ErrNoIndex):
		return http.StatusServiceUnavailable, objectsapi.ErrorBody{Error: objectsapi.ReasonSearchUnavailable, Message: "the search index cannot answer now; retry shortly"}
	case errors.Is(err, objects.ErrNotFound):
		return http.StatusNotFound, objectsapi.ErrorBody{Error: objectsapi.ReasonNotFound, Message: "no such object, version or upload"}
	case errors.Is(err, objects.ErrThrottled), errors.Is(err, objects.ErrUploadBusy):
		return http.StatusServiceUnavailable, objectsapi.ErrorBody{Error: objectsapi.ReasonThrottled, Message: "busy; retry shortly"}
	case errors.Is(err, objects.ErrChecksum):
		return http.StatusInternalServerError, objectsapi.ErrorBody{Error: objectsapi.ReasonChecksum, Message: "the stored document failed verification; it is not returned"}
	}
	return http.StatusInternalServerError, objectsapi.ErrorBody{Error: objectsapi.ReasonInternal, Message: "internal error"}
}

func conflictMessage(ce *objects.ConflictError) string {
	switch {
	case ce.Current == 0:
		return "the object does not exist"
	case ce.Deleted:
		return fmt.Sprintf("the object was deleted at version %d", ce.Current)
	case ce.Expected == 0:
		return fmt.Sprintf("the object exists, at version %d", ce.Current)
	case ce.Expected > 0:
		return fmt.Sprintf("expected version %d, the object is at version %d", ce.Expected, ce.Current)
	}
	return fmt.Sprintf("the object is at version %d", ce.Current)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
