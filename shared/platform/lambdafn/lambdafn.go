// Package lambdafn is how a ddbpipe function comes to life. A function is a
// Setup: it reads its typed configuration, builds its clients and returns its
// handler. In AWS, functions/<name>/main.go passes the Setup to Start, which
// runs it once at cold start and hands the handler to lambda.Start. Locally,
// the runner calls the very same Setup in-process with the function's
// environment from template.yaml and invokes the handler through
// aws-lambda-go's own JSON path.
package lambdafn

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Env is what a Setup may use: its environment variables (never os.Getenv
// directly), the AWS configuration and a logger.
type Env struct {
	Getenv func(string) string
	AWS    aws.Config
	Log    *slog.Logger
	// Metrics receives Embedded Metric Format lines: stdout in Lambda
	// (CloudWatch Logs extracts the metrics), the function log locally.
	Metrics io.Writer
}

// Setup builds a function's handler once, at cold start. The handler is any
// function lambda.NewHandler accepts.
type Setup func(ctx context.Context, env Env) (handler any, err error)

// Start runs setup and serves the handler with the Lambda runtime. A setup
// error is logged and ends the process, which Lambda reports as an init error.
func Start(setup Setup) {
	log := lambdacontext.NewLogger()
	if err := run(context.Background(), setup, log); err != nil {
		log.Error("function setup failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, setup Setup, log *slog.Logger) error {
	cfg, err := awsenv.Load(ctx)
	if err != nil {
		return err
	}
	h, err := setup(ctx, Env{Getenv: os.Getenv, AWS: cfg, Log: log, Metrics: os.Stdout})
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	lambda.Start(h)
	return nil
}

// NewMetrics is a function's EMF writer: namespace ddbpipe, dimensions
// Function and, when DDBPIPE_STACK is set (the template's Globals set it),
// Stack, so two stacks in one account and region keep their metrics apart.
// The template's alarms and dashboard use the same two dimensions.
func NewMetrics(env Env, function string) *emf.Writer {
	dims := map[string]string{"Function": function}
	if stack := env.Getenv("DDBPIPE_STACK"); stack != "" {
		dims["Stack"] = stack
	}
	return emf.New(env.Metrics, "ddbpipe", dims)
}
