// Package tests holds the integration and end-to-end tests. They run
// against the real local servers (DynamoDB Local, fauxqs, versitygw), which
// TestMain starts once for the package. Without Java or Node they skip,
// unless DDBPIPE_REQUIRE_STACK=1 (set by `make test`) makes that a failure.
package tests

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/localstack"
)

var (
	stack    *localstack.Stack
	stackErr error
	seq      atomic.Int64
)

func TestMain(m *testing.M) {
	code := func() int {
		if !testingShort() {
			root, _ := filepath.Abs("..")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			stack, stackErr = localstack.Start(ctx, localstack.Options{Root: root, Log: os.Stderr})
			cancel()
			if stack != nil {
				defer stack.Stop()
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

func testingShort() bool {
	for _, a := range os.Args {
		if a == "-test.short" || a == "-test.short=true" {
			return true
		}
	}
	return false
}

// clients are SDK clients pointed at the local servers (or at proxies).
type clients struct {
	cfg     aws.Config
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	sqs     *sqs.Client
	s3      *s3.Client
}

// needStack skips (or, under DDBPIPE_REQUIRE_STACK=1, fails) without servers.
func needStack(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the local stack (-short)")
	}
	if stack == nil {
		if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
			tb.Fatalf("local stack did not start: %v", stackErr)
		}
		tb.Skipf("local stack not available: %v", stackErr)
	}
}

// newClients builds clients for the given endpoints (defaults: the servers).
func newClients(tb testing.TB, endpoints map[string]string) clients {
	tb.Helper()
	vars := map[string]string{
		"AWS_REGION": localstack.Region, "AWS_ACCESS_KEY_ID": localstack.AccessKeyID, "AWS_SECRET_ACCESS_KEY": localstack.SecretAccessKey,
		"AWS_ENDPOINT_URL_DYNAMODB": stack.DynamoDB, "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": stack.DynamoDB,
		"AWS_ENDPOINT_URL_SQS": stack.SQS, "AWS_ENDPOINT_URL_S3": stack.S3,
	}
	for k, v := range endpoints {
		vars[k] = v
	}
	get := func(k string) string { return vars[k] }
	cfg, err := awsenv.FromVars(context.Background(), get)
	if err != nil {
		tb.Fatal(err)
	}
	return clients{
		cfg: cfg, db: dynamodb.NewFromConfig(cfg), streams: dynamodbstreams.NewFromConfig(cfg),
		sqs: sqs.NewFromConfig(cfg), s3: awsenv.S3(cfg, get),
	}
}

// unique returns a name no other test uses.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

// eventually polls cond until it holds or the limit passes. Limits are
// generous: tests assert behaviour, never speed.
func eventually(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}
