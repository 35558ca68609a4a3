package objectslambda

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// fail answers a failed request (apigw.Fail), counting conflicts and
// checksum failures.
func (h *HTTP) fail(ctx context.Context, req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	e := classify(err)
	switch e.ErrorBody.Error {
	case objectsapi.ReasonConflict:
		h.emit(emf.Metric{Name: "Conflicts", Unit: emf.Count, Value: 1})
	case objectsapi.ReasonChecksum:
		h.emit(emf.Metric{Name: "ChecksumFailures", Unit: emf.Count, Value: 1})
	}
	return apigw.Fail(ctx, h.Log, req, e)
}

// classify is the objects API's error model: the answer each error gets.
// The adapter's own refusals are *apigw.Error already; the objects and
// search domains' errors are named here, once; anything else is 500
// internal, its detail logged and never answered.
func classify(err error) *apigw.Error {
	var (
		ae *apigw.Error
		ie *objects.InvalidError
		ce *objects.ConflictError
		se *search.InvalidError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ce):
		e := apigw.Wrap(apigw.Conflict, objectsapi.ReasonConflict, conflictMessage(ce), err)
		cur := ce.Current
		e.CurrentVersion, e.Deleted = &cur, ce.Deleted
		return e
	case errors.As(err, &ie):
		return apigw.Wrap(invalidKind(ie.Reason), string(ie.Reason), ie.Detail, err)
	case errors.As(err, &se):
		return apigw.Wrap(apigw.Invalid, string(se.Reason), se.Detail, err)
	case errors.Is(err, search.ErrDisabled):
		return apigw.Wrap(apigw.Unavailable, objectsapi.ReasonSearchDisabled, "this stack runs without search", err)
	case errors.Is(err, search.ErrUnavailable), errors.Is(err, search.ErrNoIndex):
		return apigw.Wrap(apigw.Unavailable, objectsapi.ReasonSearchUnavailable, "the search index cannot answer now; retry shortly", err)
	case errors.Is(err, objects.ErrNotFound):
		return apigw.Wrap(apigw.NotFound, apigw.ReasonNotFound, "no such object, version or upload", err)
	case errors.Is(err, objects.ErrThrottled), errors.Is(err, objects.ErrUploadBusy):
		return apigw.Wrap(apigw.Unavailable, apigw.ReasonThrottled, "busy; retry shortly", err)
	case errors.Is(err, objects.ErrChecksum):
		return apigw.Wrap(apigw.Internal, objectsapi.ReasonChecksum, "the stored document failed verification; it is not returned", err)
	}
	return apigw.InternalError(err)
}

// invalidKind is the kind of an input rule's refusal: 400 unless the rule
// is about the body's size, its type, an upload's state or a range.
func invalidKind(r objects.Reason) apigw.Kind {
	switch r {
	case objects.ReasonTooLarge, objects.ReasonTooLargeForTable:
		return apigw.TooLarge
	case objects.ReasonBadContentType:
		return apigw.UnsupportedMedia
	case objects.ReasonUploadClosed:
		return apigw.Conflict
	case objects.ReasonRangeNotSatisfiable, objects.ReasonMultipleRanges:
		return apigw.RangeNotSatisfiable
	}
	return apigw.Invalid
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
