package objectslambda

import (
	"context"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// list serves GET /objects: one page of a listing by prefix.
func (h *HTTP) list(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	q := req.QueryStringParameters
	for name := range q {
		switch name {
		case "prefix", "delimiter", "limit", "cursor":
		default:
			return events.APIGatewayV2HTTPResponse{}, apigw.Refuse(apigw.Invalid, objectsapi.ReasonBadQuery,
				"unknown query parameter %q: a listing takes prefix, delimiter, limit and cursor", apigw.Clip(name, 32))
		}
	}
	o := objects.ListOptions{Prefix: q["prefix"], Delimiter: q["delimiter"], Cursor: q["cursor"]}
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, apigw.Refuse(apigw.Invalid, string(objects.ReasonBadLimit),
				"limit %q is not a number: 1 to %d", apigw.Clip(s, 32), objects.MaxListLimit)
		}
		if n == 0 {
			n = -1 // 0 means the default in ListOptions; in the query it is out of range
		}
		o.Limit = n
	}
	page, err := h.List.List(ctx, o)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := objectsapi.Listing{Prefix: o.Prefix, Delimiter: o.Delimiter, Objects: make([]objectsapi.Entry, len(page.Entries)),
		CommonPrefixes: page.Prefixes, Cursor: page.Cursor}
	for i, e := range page.Entries {
		out.Objects[i] = objectsapi.Entry{Key: e.Key, Version: e.Version, Size: e.Size, SHA256: e.SHA256.String(),
			ContentType: e.ContentType, Modified: e.Modified.UTC()}
	}
	return apigw.JSON(http.StatusOK, out), nil
}
