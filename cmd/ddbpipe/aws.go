package main

import (
	"context"
	"errors"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// cliAWS is the commands' AWS configuration: awsenv's, with a retryer that
// gives up at once on a refused connection. Nothing listening is the local
// stack being down (or an old local.env), and the SDK's retries only
// delayed saying so (7.8 s for `votes results`); AWS's endpoints do not
// refuse connections.
func cliAWS(ctx context.Context, getenv func(string) string) (aws.Config, error) {
	cfg, err := awsenv.FromVars(ctx, getenv)
	if err != nil {
		return cfg, err
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.Retryables = append([]retry.IsErrorRetryable{refusedIsFinal}, o.Retryables...)
		})
	}
	return cfg, nil
}

var refusedIsFinal = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
})
