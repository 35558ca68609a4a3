package archivelambda_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn/lambdafntest"
)

func TestSetupArchiverConfig(t *testing.T) {
	valid := map[string]string{"ARCHIVE_BUCKET": "ddbpipe-archive"}
	tests := []struct {
		name  string
		vars  map[string]string
		wants []string // what the error names; none for a valid environment
	}{
		{name: "valid", vars: valid},
		{name: "bucket missing", vars: lambdafntest.With(valid, map[string]string{"ARCHIVE_BUCKET": ""}), wants: []string{"ARCHIVE_BUCKET is not set"}},
		{name: "bucket blank", vars: lambdafntest.With(valid, map[string]string{"ARCHIVE_BUCKET": "  "}), wants: []string{"ARCHIVE_BUCKET is not set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, out := lambdafntest.Env(t, tt.vars)
			h, err := archivelambda.SetupArchiver(t.Context(), env)
			if len(tt.wants) > 0 {
				if err == nil {
					t.Fatalf("SetupArchiver = %T, nil; want an error naming %q", h, tt.wants)
				}
				for _, w := range tt.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("SetupArchiver error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("SetupArchiver: %v", err)
			}
			handle, ok := h.(func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error))
			if !ok {
				t.Fatalf("SetupArchiver returned a %T, want the stream handler", h)
			}
			// An empty batch writes nothing, and reports through the env's metrics.
			resp, err := handle(t.Context(), events.DynamoDBEvent{})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("handler(empty batch) = %+v, %v", resp, err)
			}
			if !strings.Contains(out.String(), `"Function":"archiver"`) {
				t.Errorf("no metrics line for the archiver in\n%s", out)
			}
		})
	}
}

func TestSetupRotatorConfig(t *testing.T) {
	valid := map[string]string{
		"LEDGER_TABLE_PREFIX":             "ddbpipe-votes",
		"ARCHIVE_BUCKET":                  "ddbpipe-archive",
		"ARCHIVE_GRACE_DAYS":              "2",
		"ARCHIVER_FUNCTION":               "arn:aws:lambda:us-east-1:000000000000:function:archiver",
		"STREAM_FAILURES_QUEUE_ARN":       "arn:aws:sqs:us-east-1:000000000000:stream-failures",
		"STREAM_MAX_RETRY_ATTEMPTS":       "5",
		"STREAM_MAX_RECORD_AGE_SECONDS":   "21600",
		"ARCHIVE_BATCHING_WINDOW_SECONDS": "10",
		"TALLY_FUNCTION":                  "arn:aws:lambda:us-east-1:000000000000:function:tally",
		"TALLY_WINDOW_SECONDS":            "60",
		"TALLY_BATCHING_WINDOW_SECONDS":   "1",
		"COUNTERS_TABLE":                  "ddbpipe-counters",
		"LEDGER_WARM_WRITE_UNITS_MIN":     "4000",
		"LEDGER_WARM_WRITE_UNITS_MAX":     "40000",
		"LEDGER_WARM_READ_UNITS_MIN":      "12000",
		"LEDGER_WARM_READ_UNITS_MAX":      "40000",
	}
	set := func(k, v string) map[string]string { return lambdafntest.With(valid, map[string]string{k: v}) }
	outOfRange := func(k, v, bounds string) string { return k + `="` + v + `" is not an integer in ` + bounds }
	tests := []struct {
		name  string
		vars  map[string]string
		wants []string
	}{
		{name: "valid", vars: valid},
		{name: "bounds are inclusive", vars: lambdafntest.With(valid, map[string]string{"ARCHIVE_GRACE_DAYS": "27", "STREAM_MAX_RETRY_ATTEMPTS": "0",
			"STREAM_MAX_RECORD_AGE_SECONDS": "604800", "ARCHIVE_BATCHING_WINDOW_SECONDS": "0",
			"TALLY_WINDOW_SECONDS": "900", "TALLY_BATCHING_WINDOW_SECONDS": "300"})},
		{name: "nothing set", vars: map[string]string{}, wants: []string{
			"LEDGER_TABLE_PREFIX is not set", "ARCHIVE_BUCKET is not set", "ARCHIVE_GRACE_DAYS is not set", "ARCHIVER_FUNCTION is not set",
			"STREAM_FAILURES_QUEUE_ARN is not set", "STREAM_MAX_RETRY_ATTEMPTS is not set", "STREAM_MAX_RECORD_AGE_SECONDS is not set",
			"ARCHIVE_BATCHING_WINDOW_SECONDS is not set", "TALLY_FUNCTION is not set", "TALLY_WINDOW_SECONDS is not set",
			"TALLY_BATCHING_WINDOW_SECONDS is not set", "COUNTERS_TABLE is not set", "LEDGER_WARM_WRITE_UNITS_MIN is not set",
			"LEDGER_WARM_WRITE_UNITS_MAX is not set", "LEDGER_WARM_READ_UNITS_MIN is not set", "LEDGER_WARM_READ_UNITS_MAX is not set"}},
		{name: "prefix missing", vars: set("LEDGER_TABLE_PREFIX", ""), wants: []string{"LEDGER_TABLE_PREFIX is not set"}},
		{name: "bucket missing", vars: set("ARCHIVE_BUCKET", ""), wants: []string{"ARCHIVE_BUCKET is not set"}},
		{name: "archiver missing", vars: set("ARCHIVER_FUNCTION", ""), wants: []string{"ARCHIVER_FUNCTION is not set"}},
		{name: "tally missing", vars: set("TALLY_FUNCTION", ""), wants: []string{"TALLY_FUNCTION is not set"}},
		{name: "tally window 0", vars: set("TALLY_WINDOW_SECONDS", "0"), wants: []string{outOfRange("TALLY_WINDOW_SECONDS", "0", "[1, 900]")}},
		{name: "tally window 901", vars: set("TALLY_WINDOW_SECONDS", "901"), wants: []string{outOfRange("TALLY_WINDOW_SECONDS", "901", "[1, 900]")}},
		{name: "failure queue missing", vars: set("STREAM_FAILURES_QUEUE_ARN", ""), wants: []string{"STREAM_FAILURES_QUEUE_ARN is not set"}},
		{name: "grace days 0", vars: set("ARCHIVE_GRACE_DAYS", "0"), wants: []string{outOfRange("ARCHIVE_GRACE_DAYS", "0", "[1, 27]")}},
		{name: "grace days 28", vars: set("ARCHIVE_GRACE_DAYS", "28"), wants: []string{outOfRange("ARCHIVE_GRACE_DAYS", "28", "[1, 27]")}},
		{name: "grace days not a number", vars: set("ARCHIVE_GRACE_DAYS", "two"), wants: []string{outOfRange("ARCHIVE_GRACE_DAYS", "two", "[1, 27]")}},
		{name: "retry attempts -1", vars: set("STREAM_MAX_RETRY_ATTEMPTS", "-1"), wants: []string{outOfRange("STREAM_MAX_RETRY_ATTEMPTS", "-1", "[0, 10000]")}},
		{name: "retry attempts 10001", vars: set("STREAM_MAX_RETRY_ATTEMPTS", "10001"), wants: []string{outOfRange("STREAM_MAX_RETRY_ATTEMPTS", "10001", "[0, 10000]")}},
		{name: "record age 59", vars: set("STREAM_MAX_RECORD_AGE_SECONDS", "59"), wants: []string{outOfRange("STREAM_MAX_RECORD_AGE_SECONDS", "59", "[60, 604800]")}},
		{name: "record age 604801", vars: set("STREAM_MAX_RECORD_AGE_SECONDS", "604801"), wants: []string{outOfRange("STREAM_MAX_RECORD_AGE_SECONDS", "604801", "[60, 604800]")}},
		{name: "window 301", vars: set("ARCHIVE_BATCHING_WINDOW_SECONDS", "301"), wants: []string{outOfRange("ARCHIVE_BATCHING_WINDOW_SECONDS", "301", "[0, 300]")}},
		{name: "window -1", vars: set("ARCHIVE_BATCHING_WINDOW_SECONDS", "-1"), wants: []string{outOfRange("ARCHIVE_BATCHING_WINDOW_SECONDS", "-1", "[0, 300]")}},
		{name: "warm floor equal to the ceiling", vars: lambdafntest.With(valid, map[string]string{"LEDGER_WARM_WRITE_UNITS_MIN": "40000", "LEDGER_WARM_READ_UNITS_MAX": "12000"})},
		{name: "warm write units 0", vars: set("LEDGER_WARM_WRITE_UNITS_MIN", "0"), wants: []string{outOfRange("LEDGER_WARM_WRITE_UNITS_MIN", "0", "[1, 1000000]")}},
		{name: "warm read units 1000001", vars: set("LEDGER_WARM_READ_UNITS_MAX", "1000001"), wants: []string{outOfRange("LEDGER_WARM_READ_UNITS_MAX", "1000001", "[1, 1000000]")}},
		{name: "warm ceilings below the floors", vars: lambdafntest.With(valid, map[string]string{"LEDGER_WARM_WRITE_UNITS_MAX": "3999", "LEDGER_WARM_READ_UNITS_MIN": "40001"}),
			wants: []string{"LEDGER_WARM_WRITE_UNITS_MAX=3999 is below LEDGER_WARM_WRITE_UNITS_MIN=4000", "LEDGER_WARM_READ_UNITS_MAX=40000 is below LEDGER_WARM_READ_UNITS_MIN=40001"}},
		{name: "two problems, both named", vars: lambdafntest.With(valid, map[string]string{"ARCHIVE_BUCKET": "", "ARCHIVE_GRACE_DAYS": "99"}),
			wants: []string{"ARCHIVE_BUCKET is not set", outOfRange("ARCHIVE_GRACE_DAYS", "99", "[1, 27]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := lambdafntest.Env(t, tt.vars)
			h, err := archivelambda.SetupRotator(t.Context(), env)
			if len(tt.wants) > 0 {
				if err == nil {
					t.Fatalf("SetupRotator = %T, nil; want an error naming %q", h, tt.wants)
				}
				for _, w := range tt.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("SetupRotator error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("SetupRotator: %v", err)
			}
			if _, ok := h.(func(context.Context, events.EventBridgeEvent) error); !ok {
				t.Fatalf("SetupRotator returned a %T, want the scheduled handler", h)
			}
		})
	}
}
