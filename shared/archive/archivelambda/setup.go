package archivelambda

import (
	"context"

	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// SetupArchiver wires the archiver function, which writes DynamoDB stream records as Parquet to the archive bucket.
func SetupArchiver(_ context.Context, env lambdafn.Env) (any, error) {
	v := lambdafn.NewVars(env.Getenv)
	bucket := v.String("ARCHIVE_BUCKET")
	if err := v.Err(); err != nil {
		return nil, err
	}
	w := archives3.Writer{S3: awsenv.S3(env.AWS), Bucket: bucket}
	a := &Archiver{
		Files:      w,
		Quarantine: w,
		Log:        env.Log,
		Metrics:    lambdafn.NewMetrics(env, "archiver"),
	}
	return a.Handle, nil
}
