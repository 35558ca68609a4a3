package functions

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

// ObjectsAPI serves the large-object store. Skeleton: /health answers, the rest is 501.
func ObjectsAPI(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	v.String("OBJECTS_TABLE")
	v.String("OBJECTS_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	return apiSkeleton("objects-api", env.Log), nil
}

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

// ObjectsFinalize turns finished uploads into references. Skeleton: logs the keys.
func ObjectsFinalize(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	v.String("OBJECTS_TABLE")
	if err := v.Err(); err != nil {
		return nil, err
	}
	log := env.Log
	return func(ctx context.Context, ev events.S3Event) error {
		for _, r := range ev.Records {
			log.InfoContext(ctx, "object created", "bucket", r.S3.Bucket.Name, "key", r.S3.Object.Key, "size", r.S3.Object.Size)
		}
		return nil
	}, nil
}

// ObjectsReaper deletes blobs of removed references. Skeleton: acknowledges.
func ObjectsReaper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	v.String("OBJECTS_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	return streamSkeleton(env.Log), nil
}

func streamSkeleton(log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		log.InfoContext(ctx, "stream records received", "records", len(ev.Records))
		return events.DynamoDBEventResponse{}, nil
	}
}

// ObjectsSweeper removes orphan blobs. Skeleton: logs the tick.
func ObjectsSweeper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	v.String("OBJECTS_TABLE")
	v.String("OBJECTS_BUCKET")
	v.Int("ORPHAN_GRACE_MINUTES", 1, 1<<20)
	if err := v.Err(); err != nil {
		return nil, err
	}
	return scheduleSkeleton(env.Log), nil
}

// Rotator creates and retires monthly tables. Skeleton: logs the tick.
func Rotator(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	v.String("LEDGER_TABLE_PREFIX")
	v.String("ARCHIVE_BUCKET")
	v.String("ARCHIVER_FUNCTION")
	if err := v.Err(); err != nil {
		return nil, err
	}
	return scheduleSkeleton(env.Log), nil
}

func scheduleSkeleton(log *slog.Logger) func(context.Context, events.EventBridgeEvent) error {
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		log.InfoContext(ctx, "scheduled tick", "time", ev.Time, "resources", ev.Resources)
		return nil
	}
}
