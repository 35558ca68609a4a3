package functions

import (
	"context"

	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

// ObjectsReaper deletes blobs of removed references. Skeleton: acknowledges.
func ObjectsReaper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	v.String("OBJECTS_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	return streamSkeleton(env.Log), nil
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
