// Package stacktest gives a package's integration tests the real local
// servers: the running ones that AWS_ENDPOINT_URL_DYNAMODB, _SQS and _S3 name
// (`make test` starts them once for every package with `ddbpipe local
// servers -- go test ./...`), else servers started once for the test binary
// on first use and stopped when it ends. Tests skip under -short, and skip
// when the servers cannot start (no Java or Node) unless
// DDBPIPE_REQUIRE_STACK=1 makes that a failure.
//
//	func TestMain(m *testing.M) { stacktest.Main(m) }
//	func TestX(t *testing.T) { st := stacktest.Need(t); ... st.DynamoDB ... }
package stacktest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

var (
	once  sync.Once
	stack *servers.Stack
	err   error
)

// Main runs the tests and stops the servers if a test started them.
func Main(m *testing.M) {
	code := m.Run()
	if stack != nil && !stack.Attached() {
		_ = stack.Stop()
	}
	os.Exit(code)
}

// Need returns the running servers: those the environment names, else ones
// it starts on first use. Tests share them, so each test names its own
// tables, queues and buckets and never assumes an empty server.
func Need(tb testing.TB) *servers.Stack {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the local servers (-short)")
	}
	once.Do(func() {
		if st, ok := servers.FromEnv(os.Getenv); ok {
			stack = st
			return
		}
		root, rerr := servers.FindRoot(".")
		if rerr != nil {
			err = rerr
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		stack, err = servers.Start(ctx, servers.Options{Root: root, Log: os.Stderr})
	})
	if stack == nil {
		if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
			tb.Fatalf("local servers did not start: %v", err)
		}
		tb.Skipf("local servers not available: %v", err)
	}
	return stack
}

// Config returns an AWS configuration for the servers; extra variables
// (e.g. an endpoint through a proxy) override the defaults.
func Config(tb testing.TB, st *servers.Stack, extra map[string]string) aws.Config {
	tb.Helper()
	vars := st.Vars()
	for k, v := range extra {
		vars[k] = v
	}
	cfg, cerr := awsenv.FromVars(context.Background(), func(k string) string { return vars[k] })
	if cerr != nil {
		tb.Fatal(cerr)
	}
	return cfg
}

// AfterMonthTurn waits past the turn of the UTC month when it is less than
// within away: a test that expects this month's ledger tables, or names
// this month with its votes, must not straddle it.
func AfterMonthTurn(tb testing.TB, within time.Duration) {
	tb.Helper()
	now := time.Now().UTC()
	turn := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if wait := turn.Sub(now); wait < within {
		tb.Logf("waiting %s for the month to turn", wait.Round(time.Second))
		time.Sleep(wait + time.Second)
	}
}
