// Package tests holds the integration and end-to-end tests. They run
// against the real local servers (DynamoDB Local, fauxqs, versitygw), which
// stacktest starts once for the package. Without Java or Node they skip,
// unless DDBPIPE_REQUIRE_STACK=1 (set by `make test`) makes that a failure.
package tests

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// TestMain gives the package the servers. The tests that mostly wait on
// the pipeline (visibility timeouts, batching windows, a 1,000-vote load)
// call t.Parallel: they run together once the quick ones are done. Each
// names its own stack, tables, queues and buckets, so they share the
// servers safely; make test runs the package with -parallel 4.
func TestMain(m *testing.M) { stacktest.Main(m) }

// seq makes names unique within the test binary.
var seq atomic.Int64

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
	stacktest.Need(tb)
}

// newClients builds clients for the package's servers; endpoints override
// the defaults (e.g. to go through a proxy).
func newClients(tb testing.TB, endpoints map[string]string) clients {
	tb.Helper()
	cfg := stacktest.Config(tb, stacktest.Need(tb), endpoints)
	return clients{
		cfg: cfg, db: dynamodb.NewFromConfig(cfg), streams: dynamodbstreams.NewFromConfig(cfg),
		sqs: sqs.NewFromConfig(cfg), s3: awsenv.S3(cfg),
	}
}

// unique returns a name no other test uses.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

// eventuallyBackoff spaces eventually's checks: soon at first (most
// conditions hold within a second), then at most once a second. A check
// is a round trip through the stack (the results through the API are 8
// shard reads, signed and judged); at a fixed 50 ms, a proof that waits
// 100 s for its redeliveries made 2,000 of them.
var eventuallyBackoff = retry.Backoff{Base: 50 * time.Millisecond, Max: time.Second, Jitter: retry.NoJitter}

// eventually polls cond until it holds or the limit passes. Limits are
// generous: tests assert behaviour, never speed. A timeout's message ends
// with what each detail says it last saw.
func eventually(tb testing.TB, limit time.Duration, what string, cond func() bool, detail ...func() string) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for n := 1; !cond(); n++ {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", limit, what)
			for _, d := range detail {
				msg += ": " + d()
			}
			tb.Fatal(msg)
		}
		time.Sleep(eventuallyBackoff.Delay(n))
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
