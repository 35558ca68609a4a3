package functions

import (
	"context"

	"github.com/ddbpipe/ddbpipe/shared/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/parquetarchive"
)

// Archiver writes DynamoDB stream records as Parquet to the archive bucket.
func Archiver(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	bucket := v.String("ARCHIVE_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	a := &parquetarchive.Archiver{
		S3:      awsenv.S3(env.AWS),
		Bucket:  bucket,
		Log:     env.Log,
		Metrics: newMetrics(env, "archiver"),
	}
	return a.Handle, nil
}
