package objectslambda

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

const uploadShape = `{"size":N,"sha256":"<64 hex>","contentType":"type/subtype","ifMatch":n}`

// uploadBody is POST …?uploads' body.
var uploadBody = apigw.JSONBody{Limit: maxJSONBody, Want: uploadShape, Malformed: "malformed JSON (%s): want " + uploadShape}

func (h *HTTP) beginUpload(ctx context.Context, req events.APIGatewayV2HTTPRequest, key string) (events.APIGatewayV2HTTPResponse, error) {
	if err := objects.ValidateKey(key); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	var in objectsapi.UploadRequest
	if err := apigw.DecodeJSON(req, &in, uploadBody); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if in.Size == nil {
		return events.APIGatewayV2HTTPResponse{}, apigw.Refuse(apigw.Invalid, apigw.ReasonInvalidJSON, "size is missing: want %s", uploadShape)
	}
	sum, err := objects.ParseSum(strings.ToLower(in.SHA256))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, apigw.Refuse(apigw.Invalid, string(objects.ReasonBadSHA256), "sha256 must be 64 hex characters (the document's SHA-256)")
	}
	g, err := h.Uploads.Begin(ctx, key, objects.UploadRequest{Size: *in.Size, SHA256: sum, ContentType: in.ContentType, IfMatch: in.IfMatch})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	h.emit(emf.Metric{Name: "UploadsGranted", Unit: emf.Count, Value: 1})
	resp := apigw.JSON(http.StatusCreated, granted(g, objectsapi.UploadPath(key, g.Upload.ID)))
	resp.Headers["location"] = objectsapi.UploadPath(key, g.Upload.ID)
	return resp, nil
}

func (h *HTTP) uploadStatus(ctx context.Context, key, id string) (events.APIGatewayV2HTTPResponse, error) {
	up, err := h.Uploads.Status(ctx, key, id)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return apigw.JSON(http.StatusOK, status(up)), nil
}

const completeShape = `{"parts":[{"partNumber":1,"etag":"…"},…]}`

// completeBody is POST …?uploadId=ID's body.
var completeBody = apigw.JSONBody{Limit: maxJSONBody, Want: completeShape, Malformed: "malformed JSON (%s): want " + completeShape}

func (h *HTTP) completeUpload(ctx context.Context, req events.APIGatewayV2HTTPRequest, key, id string) (events.APIGatewayV2HTTPResponse, error) {
	var in objectsapi.CompleteRequest
	if err := apigw.DecodeJSON(req, &in, completeBody); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	up, err := h.Uploads.Complete(ctx, key, id, parts(in.Parts))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	code := http.StatusAccepted // the finalizer commits it
	if up.State == objects.UploadCommitted {
		code = http.StatusOK // completed before: its outcome
	}
	resp := apigw.JSON(code, status(up))
	resp.Headers["location"] = objectsapi.UploadPath(key, id)
	return resp, nil
}
