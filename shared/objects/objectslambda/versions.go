package objectslambda

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

func (h *HTTP) versions(ctx context.Context, key string) (events.APIGatewayV2HTTPResponse, error) {
	recs, err := h.Docs.Versions(ctx, key)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := objectsapi.VersionList{Key: key, Versions: make([]objectsapi.Meta, len(recs))}
	for i, r := range recs {
		out.Versions[i] = meta(r)
	}
	return apigw.JSON(http.StatusOK, out), nil
}
