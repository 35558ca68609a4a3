package functions

import (
	"context"

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
