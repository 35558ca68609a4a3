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
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// lazy is servers started once for the test binary, on first use.
type lazy struct {
	once  sync.Once
	stack *servers.Stack
	err   error
}

var localServers, searchEngine lazy

// get returns the servers: attached ones (attach, when given, names them),
// else ones start starts once. It skips under -short, and skips when they
// cannot start, or fails under DDBPIPE_REQUIRE_STACK=1.
func (l *lazy) get(tb testing.TB, what string, attach func() (*servers.Stack, bool),
	start func(context.Context, servers.Options) (*servers.Stack, error)) *servers.Stack {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("needs %s (-short)", what)
	}
	l.once.Do(func() {
		if attach != nil {
			if st, ok := attach(); ok {
				l.stack = st
				return
			}
		}
		root, err := servers.FindRoot(".")
		if err != nil {
			l.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		l.stack, l.err = start(ctx, servers.Options{Root: root, Log: os.Stderr})
	})
	if l.stack == nil {
		if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
			tb.Fatalf("%s did not start: %v", what, l.err)
		}
		tb.Skipf("%s not available: %v", what, l.err)
	}
	return l.stack
}

// stop stops servers the tests started.
func (l *lazy) stop() {
	if l.stack != nil && !l.stack.Attached() {
		_ = l.stack.Stop()
	}
}

// Main runs the tests, then the package's own cleanups (a stack built on
// the servers, say), then stops the servers if a test started them.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	localServers.stop()
	searchEngine.stop()
	os.Exit(code)
}

// Need returns the running servers: those the environment names, else ones
// it starts on first use. Tests share them, so each test names its own
// tables, queues and buckets and never assumes an empty server.
func Need(tb testing.TB) *servers.Stack {
	tb.Helper()
	return localServers.get(tb, "the local servers", func() (*servers.Stack, bool) { return servers.FromEnv(os.Getenv) }, servers.Start)
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
	now := time.Now()
	if wait := ledger.End(now).Sub(now); wait < within {
		tb.Logf("waiting %s for the month to turn", wait.Round(time.Second))
		time.Sleep(wait + time.Second)
	}
}

var buckets atomic.Int64

// Bucket creates a bucket of its own (named from prefix) on the servers'
// S3 and, when the test ends, empties and removes it.
func Bucket(tb testing.TB, prefix string) (*s3.Client, string) {
	tb.Helper()
	client := s3.NewFromConfig(Config(tb, Need(tb), nil), func(o *s3.Options) { o.UsePathStyle = true })
	name := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e10, buckets.Add(1))
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("CreateBucket %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx := context.Background()
		for p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(name)}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				break
			}
			for _, o := range page.Contents {
				_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		_, _ = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return client, name
}

// NeedSearch returns the search engine's root URL (ZincSearch; put
// local/searchproxy in front of it for OpenSearch's API): the one the
// environment names (servers.EnvSearch, as `make test` exports it), else
// an engine started alone once for the test binary (stopped by Main).
// Tests share it, so each names its own indexes.
func NeedSearch(tb testing.TB) string {
	tb.Helper()
	if url := os.Getenv(servers.EnvSearch); url != "" && !testing.Short() {
		return url
	}
	return searchEngine.get(tb, "the search engine", nil, servers.StartSearch).Search
}

// SoakVar set to 1 (make soak sets it) runs the load proofs: the tests
// that need minutes of load to prove their rule at size. Unset (make
// test), each runs at a size that proves the same rule in seconds, or
// skips where a faster test in the gate proves it.
const SoakVar = "DDBPIPE_SOAK"

// Soak reports whether make soak runs the tests (SoakVar).
func Soak() bool { return os.Getenv(SoakVar) == "1" }

// SoakOnly skips tb unless make soak runs it; fast names the gate's
// test of the same rule.
func SoakOnly(tb testing.TB, fast string) {
	tb.Helper()
	if !Soak() {
		tb.Skipf("a load proof of minutes: make soak runs it (%s=1); make test proves the rule with %s", SoakVar, fast)
	}
}
