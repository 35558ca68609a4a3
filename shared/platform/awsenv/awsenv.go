// Package awsenv builds AWS SDK clients from the standard environment: the
// default credential chain and region, and the SDK's service-specific endpoint
// variables (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_DYNAMODB_STREAMS,
// AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_S3). The same binaries run against
// the local stack, LocalStack or AWS by changing only the environment.
package awsenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
)

// Load returns the default AWS configuration, its HTTP client cutting each
// request body at its length (exactBodies says why).
func Load(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsenv: load aws config: %w", err)
	}
	withExactBodies(&cfg)
	return cfg, nil
}

// S3 returns an S3 client. It uses path-style addressing when the S3
// endpoint is overridden (local servers have no per-bucket DNS names).
func S3(cfg aws.Config) *s3.Client {
	pathStyle := cfg.BaseEndpoint != nil || Overridden(cfg, "S3")
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
}

// FromVars builds a configuration from a set of environment-style variables
// (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the
// AWS_ENDPOINT_URL_<SERVICE> endpoints) without touching the process
// environment, so several local stacks can live in one process (tests).
// It is for the CLI, the local stack and tests; the SDK's logger is off.
func FromVars(ctx context.Context, getenv func(string) string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if r := getenv("AWS_REGION"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	// The SDK's own log lines (a response body it could not drain, a
	// retried call) are noise against local servers: errors that matter
	// reach the caller.
	opts = append(opts, config.WithLogger(logging.Nop{}))
	if k := getenv("AWS_ACCESS_KEY_ID"); k != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(k, getenv("AWS_SECRET_ACCESS_KEY"), "")))
	}
	cfg, err := Load(ctx, opts...)
	if err != nil {
		return aws.Config{}, err
	}
	cfg.ConfigSources = append([]any{endpoints(getenv)}, cfg.ConfigSources...)
	return cfg, nil
}

// endpoints answers the SDK's per-service endpoint lookup from variables
// named as the SDK names them: AWS_ENDPOINT_URL_ + the service id in upper
// snake case ("DynamoDB Streams" → AWS_ENDPOINT_URL_DYNAMODB_STREAMS).
type endpoints func(string) string

func (e endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	name := "AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(sdkID, " ", "_"))
	if v := e(name); v != "" {
		return v, true, nil
	}
	if v := e("AWS_ENDPOINT_URL"); v != "" {
		return v, true, nil
	}
	return "", false, nil
}

// DynamoDB returns a DynamoDB client. Against an overridden endpoint (the
// local stack) it skips the x-amz-crc32 response check: DynamoDB Local
// answers a cancelled transaction without a valid checksum, which the SDK
// would log as a warning on every duplicate vote. Against AWS the check stays.
func DynamoDB(cfg aws.Config) *dynamodb.Client {
	local := cfg.BaseEndpoint != nil || Overridden(cfg, "DynamoDB")
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = local })
}

// Overridden reports whether the configuration names an endpoint for the
// service (sdkID as the SDK spells it: "DynamoDB", "S3", ...), the way the
// SDK itself looks it up in its configuration sources.
func Overridden(cfg aws.Config, sdkID string) bool {
	_, ok := Endpoint(cfg, sdkID)
	return ok
}

// Endpoint is the endpoint the configuration names for the service
// (AWS_ENDPOINT_URL_<SERVICE> in the environment or the variables), the
// way the SDK itself looks it up; ok is false when it names none. Clients
// the SDK does not build (OpenSearch's data plane) read it here.
func Endpoint(cfg aws.Config, sdkID string) (url string, ok bool) {
	for _, src := range cfg.ConfigSources {
		if p, ok := src.(interface {
			GetServiceBaseEndpoint(context.Context, string) (string, bool, error)
		}); ok {
			if v, found, err := p.GetServiceBaseEndpoint(context.Background(), sdkID); err == nil && found && v != "" {
				return v, true
			}
		}
	}
	return "", false
}
