package functions

import (
	"context"

	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

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
