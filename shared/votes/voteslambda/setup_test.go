package voteslambda

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn/lambdafntest"
)

var (
	counterVars = map[string]string{
		"COUNTERS_TABLE": "counters", "LEDGER_TABLE_PREFIX": "ledger", "ARCHIVE_GRACE_DAYS": "2",
		"REJECTS_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/000000000000/rejects", "VOTES_VISIBILITY_TIMEOUT": "360", "VOTES_MAX_RECEIVE_COUNT": "20",
		"VOTES_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/000000000000/votes", "ARCHIVE_BUCKET": "archive",
	}
	tallyVars    = map[string]string{"COUNTERS_TABLE": "counters", "LEDGER_TABLE_PREFIX": "ledger"}
	votesAPIVars = map[string]string{"COUNTERS_TABLE": "counters", "COUNTER_SHARDS": "8", "LEDGER_TABLE_PREFIX": "ledger"}
)

func TestSetupCounter(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want []string // variables the error must name; none: a handler
	}{
		{"valid", counterVars, nil},
		{"nothing set", nil, []string{"COUNTERS_TABLE", "LEDGER_TABLE_PREFIX", "ARCHIVE_GRACE_DAYS", "REJECTS_QUEUE_URL", "VOTES_VISIBILITY_TIMEOUT", "VOTES_MAX_RECEIVE_COUNT", "ARCHIVE_BUCKET"}},
		{"no archive bucket", lambdafntest.With(counterVars, map[string]string{"ARCHIVE_BUCKET": ""}), []string{"ARCHIVE_BUCKET"}},
		{"visibility of 0 s", lambdafntest.With(counterVars, map[string]string{"VOTES_VISIBILITY_TIMEOUT": "0"}), []string{`VOTES_VISIBILITY_TIMEOUT="0"`}},
		{"no table", lambdafntest.With(counterVars, map[string]string{"COUNTERS_TABLE": ""}), []string{"COUNTERS_TABLE"}},
		{"blank prefix", lambdafntest.With(counterVars, map[string]string{"LEDGER_TABLE_PREFIX": "  "}), []string{"LEDGER_TABLE_PREFIX"}},
		{"no rejects queue", lambdafntest.With(counterVars, map[string]string{"REJECTS_QUEUE_URL": ""}), []string{"REJECTS_QUEUE_URL"}},
		{"grace of 0 days", lambdafntest.With(counterVars, map[string]string{"ARCHIVE_GRACE_DAYS": "0"}), []string{`ARCHIVE_GRACE_DAYS="0"`}},
		{"grace of 28 days", lambdafntest.With(counterVars, map[string]string{"ARCHIVE_GRACE_DAYS": "28"}), []string{`ARCHIVE_GRACE_DAYS="28"`}},
		{"clock file missing", lambdafntest.With(counterVars, map[string]string{"DDBPIPE_CLOCK_FILE": "/nonexistent/offset"}), []string{"DDBPIPE_CLOCK_FILE"}},
		{"two problems", lambdafntest.With(counterVars, map[string]string{"ARCHIVE_GRACE_DAYS": "", "COUNTERS_TABLE": ""}), []string{"COUNTERS_TABLE", "ARCHIVE_GRACE_DAYS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := lambdafntest.Env(t, tt.vars)
			h, err := SetupCounter(context.Background(), env)
			checkSetup(t, h, err, tt.want)
			if tt.want == nil {
				if _, ok := h.(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)); !ok {
					t.Errorf("handler is a %T, want an SQS batch handler", h)
				}
			}
		})
	}
}

func TestSetupTally(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want []string
	}{
		{"valid", tallyVars, nil},
		{"nothing set", nil, []string{"COUNTERS_TABLE", "LEDGER_TABLE_PREFIX"}},
		{"clock file missing", lambdafntest.With(tallyVars, map[string]string{"DDBPIPE_CLOCK_FILE": "/nonexistent/offset"}), []string{"DDBPIPE_CLOCK_FILE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := lambdafntest.Env(t, tt.vars)
			h, err := SetupTally(context.Background(), env)
			checkSetup(t, h, err, tt.want)
			if tt.want == nil {
				if _, ok := h.(func(context.Context, events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error)); !ok {
					t.Errorf("handler is a %T, want a tumbling-window stream handler", h)
				}
			}
		})
	}
}

func TestSetupVotesAPI(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want []string
	}{
		{"valid", votesAPIVars, nil},
		{"one shard", lambdafntest.With(votesAPIVars, map[string]string{"COUNTER_SHARDS": "1"}), nil},
		{"nothing set", nil, []string{"COUNTERS_TABLE", "COUNTER_SHARDS", "LEDGER_TABLE_PREFIX"}},
		{"no table", lambdafntest.With(votesAPIVars, map[string]string{"COUNTERS_TABLE": ""}), []string{"COUNTERS_TABLE"}},
		{"no prefix", lambdafntest.With(votesAPIVars, map[string]string{"LEDGER_TABLE_PREFIX": ""}), []string{"LEDGER_TABLE_PREFIX"}},
		{"shards not a number", lambdafntest.With(votesAPIVars, map[string]string{"COUNTER_SHARDS": "eight"}), []string{`COUNTER_SHARDS="eight"`}},
		{"zero shards", lambdafntest.With(votesAPIVars, map[string]string{"COUNTER_SHARDS": "0"}), []string{`COUNTER_SHARDS="0"`}},
		{"too many shards", lambdafntest.With(votesAPIVars, map[string]string{"COUNTER_SHARDS": "1001"}), []string{`COUNTER_SHARDS="1001"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := lambdafntest.Env(t, tt.vars)
			h, err := SetupVotesAPI(context.Background(), env)
			checkSetup(t, h, err, tt.want)
			if tt.want == nil {
				if _, ok := h.(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)); !ok {
					t.Errorf("handler is a %T, want an HTTP API handler", h)
				}
			}
		})
	}
}

// checkSetup checks a Setup's answer: a handler and no error when want is
// empty, else no handler and an error naming each of want.
func checkSetup(t *testing.T, h any, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil || h == nil {
			t.Fatalf("Setup = %v, %v; want a handler", h, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("Setup = %T, nil; want an error naming %v", h, want)
	}
	if h != nil {
		t.Errorf("Setup returned a handler (%T) with its error", h)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}

// The votes functions link the votes flow and the platform only: no
// objects or archive package and nothing of the local AWS, so their
// binaries stay small.
func TestFunctionsLinkOnlyTheVotesFlow(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", "../../../functions/counter", "../../../functions/tally", "../../../functions/votes-api").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/ddbpipe/ddbpipe/"
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"shared/objects", "shared/archive", "local", "tools", "cmd", "bench"} {
			if p := mod + banned; pkg == p || strings.HasPrefix(pkg, p+"/") {
				t.Errorf("the votes functions link %s", pkg)
			}
		}
	}
}

// Cold-start work of the votes functions, as lambdafn.Start does it: the
// AWS configuration from the environment (region and static credentials;
// no shared files needed), then the Setup. No request is sent.
// LoadDefaultConfig also reads the process environment: a custom CA bundle
// (AWS_CA_BUNDLE, which Lambda does not set) is parsed at every load and
// costs milliseconds, so the benchmark runs without one.
func BenchmarkSetupCounter(b *testing.B) {
	benchmarkSetup(b, SetupCounter, counterVars)
}

func BenchmarkSetupTally(b *testing.B) {
	benchmarkSetup(b, SetupTally, tallyVars)
}

func BenchmarkSetupVotesAPI(b *testing.B) {
	benchmarkSetup(b, SetupVotesAPI, votesAPIVars)
}

func benchmarkSetup(b *testing.B, setup lambdafn.Setup, vars map[string]string) {
	b.Setenv("AWS_CA_BUNDLE", "")
	vars = lambdafntest.With(vars, map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"})
	getenv := func(k string) string { return vars[k] }
	ctx := context.Background()
	b.Run("config+setup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cfg, err := awsenv.FromVars(ctx, getenv)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := setup(ctx, lambdafn.Env{Getenv: getenv, AWS: cfg, Log: slog.New(slog.DiscardHandler), Metrics: io.Discard}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("setup", func(b *testing.B) {
		cfg, err := awsenv.FromVars(ctx, getenv)
		if err != nil {
			b.Fatal(err)
		}
		env := lambdafn.Env{Getenv: getenv, AWS: cfg, Log: slog.New(slog.DiscardHandler), Metrics: io.Discard}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := setup(ctx, env); err != nil {
				b.Fatal(err)
			}
		}
	})
}
