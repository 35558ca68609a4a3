// Placeholder handlers for functions whose behaviour is not built yet.

package functions

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
)

func apiSkeleton(name string, log *slog.Logger) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		log.InfoContext(ctx, "request", "route", req.RouteKey)
		if req.RouteKey == "GET /health" {
			return jsonResponse(http.StatusOK, map[string]string{"status": "ok", "function": name}), nil
		}
		return jsonResponse(http.StatusNotImplemented, map[string]string{"message": "not implemented yet: " + req.RouteKey}), nil
	}
}

func jsonResponse(status int, body any) events.APIGatewayV2HTTPResponse {
	b, _ := json.Marshal(body) // maps of strings always marshal
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"content-type": "application/json"},
		Body:       string(b),
	}
}

func streamSkeleton(log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		log.InfoContext(ctx, "stream records received", "records", len(ev.Records))
		return events.DynamoDBEventResponse{}, nil
	}
}

func scheduleSkeleton(log *slog.Logger) func(context.Context, events.EventBridgeEvent) error {
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		log.InfoContext(ctx, "scheduled tick", "time", ev.Time, "resources", ev.Resources)
		return nil
	}
}
