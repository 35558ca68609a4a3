package functions

import (
	"context"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objectsmaint"
	"github.com/ddbpipe/ddbpipe/shared/objectstore"
	"github.com/ddbpipe/ddbpipe/shared/s3blob"
)

// ObjectsReaper deletes the payloads (blobs, chunk items) of object versions
// removed from the objects table, read from its stream.
func ObjectsReaper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("OBJECTS_TABLE")
	bucket := v.String("OBJECTS_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	items := objectstore.New(awsenv.DynamoDB(env.AWS), table)
	r := &objectsmaint.Reaper{
		Store:   &objects.Store{Items: items, Chunks: items, Blobs: s3blob.New(awsenv.S3(env.AWS), nil, bucket), Log: env.Log},
		Bucket:  bucket,
		Log:     env.Log,
		Metrics: newMetrics(env, "objects-reaper"),
	}
	return r.Handle, nil
}

// ObjectsSweeper removes orphan payloads: blobs and chunk items that no
// reference names, older than the grace period.
func ObjectsSweeper(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	table := v.String("OBJECTS_TABLE")
	bucket := v.String("OBJECTS_BUCKET")
	grace := v.Int("ORPHAN_GRACE_MINUTES", 1, 1<<20)
	if err := v.Err(); err != nil {
		return nil, err
	}
	s := &objectsmaint.Sweeper{
		Table:   objectstore.NewRefs(awsenv.DynamoDB(env.AWS), table),
		Blobs:   objectsmaint.NewBucket(awsenv.S3(env.AWS), bucket),
		Grace:   time.Duration(grace) * time.Minute,
		Now:     time.Now,
		Log:     env.Log,
		Metrics: newMetrics(env, "objects-sweeper"),
	}
	return s.Handle, nil
}
