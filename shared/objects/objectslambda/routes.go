package objectslambda

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// Handle serves one request; every error it meets becomes a response in
// fail.
func (h *HTTP) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	resp, err := h.route(ctx, req)
	if err != nil {
		return h.fail(ctx, req, err), nil
	}
	return resp, nil
}

// route dispatches a request by its route, the resource it names and its
// method.
func (h *HTTP) route(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	switch req.RouteKey {
	case "GET /health":
		return apigw.JSON(http.StatusOK, map[string]string{"status": "ok", "function": "objects-api"}), nil
	case "GET /objects":
		if _, ok := req.QueryStringParameters[objectsapi.QuerySearch]; ok {
			return h.find(ctx, req)
		}
		return h.list(ctx, req)
	}
	key := req.PathParameters["key"]
	res, id, err := target(req.QueryStringParameters)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	switch method := req.RequestContext.HTTP.Method; {
	case res == document && (method == http.MethodGet || method == http.MethodHead):
		return h.get(ctx, req, key, method == http.MethodHead)
	case res == document && method == http.MethodPut:
		return h.put(ctx, req, key)
	case res == document && method == http.MethodDelete:
		return h.delete(ctx, req, key)
	case res == versions && method == http.MethodGet:
		return h.versions(ctx, key)
	case res == uploads && method == http.MethodPost:
		return h.beginUpload(ctx, req, key)
	case res == upload && method == http.MethodGet:
		return h.uploadStatus(ctx, key, id)
	case res == upload && method == http.MethodPost:
		return h.completeUpload(ctx, req, key, id)
	default:
		return events.APIGatewayV2HTTPResponse{}, apigw.Refuse(apigw.NotAllowed, objectsapi.ReasonNoMethod,
			"%s is not allowed here; allowed: %s", apigw.Clip(method, 16), allowed[res]).WithHeader("allow", allowed[res])
	}
}

// resource is what a path names.
type resource int

const (
	document resource = iota
	versions
	uploads
	upload // ?uploadId=ID: GET its status, POST its completion
)

// target reads what a request names: the key is the whole path parameter
// (any string, so nothing in the path can name a sub-resource), and a
// sub-resource is a query parameter, as S3's are: ?versions, ?uploads,
// ?uploadId=ID. Each resource takes its own parameters and no others.
func target(q map[string]string) (res resource, uploadID string, err error) {
	var subs []string
	for _, name := range []string{objectsapi.QueryVersions, objectsapi.QueryUploads, objectsapi.QueryUploadID} {
		if _, ok := q[name]; ok {
			subs = append(subs, name)
		}
	}
	if len(subs) > 1 {
		return 0, "", apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadQuery, "?%s and ?%s name two sub-resources; send one", subs[0], subs[1])
	}
	res = document
	if len(subs) == 1 {
		switch subs[0] {
		case objectsapi.QueryVersions:
			res = versions
		case objectsapi.QueryUploads:
			res = uploads
		default:
			res, uploadID = upload, q[objectsapi.QueryUploadID]
		}
	}
	for name := range q {
		if !slices.Contains(params[res], name) {
			return 0, "", apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadQuery, "unknown query parameter %q: %s takes %s",
				apigw.Clip(name, 32), resourceName[res], strings.Join(params[res], ", "))
		}
	}
	return res, uploadID, nil
}

// params are the query parameters each resource takes.
var params = map[resource][]string{
	document: {"version", "placement"},
	versions: {objectsapi.QueryVersions},
	uploads:  {objectsapi.QueryUploads},
	upload:   {objectsapi.QueryUploadID},
}

var resourceName = map[resource]string{
	document: "an object",
	versions: "?versions",
	uploads:  "?uploads",
	upload:   "?uploadId",
}

var allowed = map[resource]string{
	document: "GET, HEAD, PUT, DELETE",
	versions: "GET",
	uploads:  "POST",
	upload:   "GET, POST",
}
