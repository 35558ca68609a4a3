package archivelambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveesm"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// RotatorConfig is the rotator's configuration (its environment in
// template.yaml; flags and local.env for `ddbpipe tables rotate`).
type RotatorConfig struct {
	LedgerPrefix        string // LEDGER_TABLE_PREFIX
	Bucket              string // ARCHIVE_BUCKET
	GraceDays           int    // ARCHIVE_GRACE_DAYS
	Archiver            string // ARCHIVER_FUNCTION: name or ARN
	Tally               string // TALLY_FUNCTION: name or ARN
	TallyWindowSeconds  int    // TALLY_WINDOW_SECONDS: the tally's tumbling window
	TallyBatchWindow    int    // TALLY_BATCHING_WINDOW_SECONDS
	CountersTable       string // COUNTERS_TABLE: where the tally's checkpoints are
	FailureQueueARN     string // STREAM_FAILURES_QUEUE_ARN
	MaxRetryAttempts    int    // STREAM_MAX_RETRY_ATTEMPTS
	MaxRecordAgeSeconds int    // STREAM_MAX_RECORD_AGE_SECONDS
	WindowSeconds       int    // ARCHIVE_BATCHING_WINDOW_SECONDS: the subscriptions' batching window
	// The bounds of a month's table's warm throughput (units per second;
	// zero: archive.RotationPolicy's defaults).
	WarmWriteMin int // LEDGER_WARM_WRITE_UNITS_MIN
	WarmWriteMax int // LEDGER_WARM_WRITE_UNITS_MAX
	WarmReadMin  int // LEDGER_WARM_READ_UNITS_MIN
	WarmReadMax  int // LEDGER_WARM_READ_UNITS_MAX
}

// maxWarmUnits bounds the warm throughput variables: far above DynamoDB's
// default table quota (40,000), a guard against a typo's extra digits.
const maxWarmUnits = 1_000_000

func rotatorConfig(getenv func(string) string) (RotatorConfig, error) {
	v := lambdafn.NewVars(getenv)
	c := RotatorConfig{
		LedgerPrefix:        v.String("LEDGER_TABLE_PREFIX"),
		Bucket:              v.String("ARCHIVE_BUCKET"),
		GraceDays:           v.Int("ARCHIVE_GRACE_DAYS", 1, 27),
		Archiver:            v.String("ARCHIVER_FUNCTION"),
		Tally:               v.String("TALLY_FUNCTION"),
		TallyWindowSeconds:  v.Int("TALLY_WINDOW_SECONDS", 1, 900),
		TallyBatchWindow:    v.Int("TALLY_BATCHING_WINDOW_SECONDS", 0, 300),
		CountersTable:       v.String("COUNTERS_TABLE"),
		FailureQueueARN:     v.String("STREAM_FAILURES_QUEUE_ARN"),
		MaxRetryAttempts:    v.Int("STREAM_MAX_RETRY_ATTEMPTS", 0, 10000),
		MaxRecordAgeSeconds: v.Int("STREAM_MAX_RECORD_AGE_SECONDS", 60, 604800),
		WindowSeconds:       v.Int("ARCHIVE_BATCHING_WINDOW_SECONDS", 0, 300),
		WarmWriteMin:        v.Int("LEDGER_WARM_WRITE_UNITS_MIN", 1, maxWarmUnits),
		WarmWriteMax:        v.Int("LEDGER_WARM_WRITE_UNITS_MAX", 1, maxWarmUnits),
		WarmReadMin:         v.Int("LEDGER_WARM_READ_UNITS_MIN", 1, maxWarmUnits),
		WarmReadMax:         v.Int("LEDGER_WARM_READ_UNITS_MAX", 1, maxWarmUnits),
	}
	if err := v.Err(); err != nil {
		return c, err
	}
	var errs []error
	if c.WarmWriteMax < c.WarmWriteMin {
		errs = append(errs, fmt.Errorf("archivelambda: rotator: LEDGER_WARM_WRITE_UNITS_MAX=%d is below LEDGER_WARM_WRITE_UNITS_MIN=%d", c.WarmWriteMax, c.WarmWriteMin))
	}
	if c.WarmReadMax < c.WarmReadMin {
		errs = append(errs, fmt.Errorf("archivelambda: rotator: LEDGER_WARM_READ_UNITS_MAX=%d is below LEDGER_WARM_READ_UNITS_MIN=%d", c.WarmReadMax, c.WarmReadMin))
	}
	return c, errors.Join(errs...)
}

// NewRotation wires the rotation domain to DynamoDB, DynamoDB Streams,
// Lambda and S3. A local DynamoDB endpoint (awsenv.Overridden) lets the
// table adapter skip what DynamoDB Local lacks (PITR, tags, warm
// throughput), with a note.
func NewRotation(cfg aws.Config, c RotatorConfig, log *slog.Logger) *archive.Rotator {
	return &archive.Rotator{
		Policy: archive.RotationPolicy{Prefix: c.LedgerPrefix, GraceDays: c.GraceDays,
			WarmFloor:   archive.Warm{Read: int64(c.WarmReadMin), Write: int64(c.WarmWriteMin)},
			WarmCeiling: archive.Warm{Read: int64(c.WarmReadMax), Write: int64(c.WarmWriteMax)},
		},
		Tables:  &archiveddb.Tables{DB: awsenv.DynamoDB(cfg), Local: awsenv.Overridden(cfg, "DynamoDB"), Log: log},
		Streams: &archiveddb.Streams{API: dynamodbstreams.NewFromConfig(cfg)},
		Subscriptions: archiveesm.Readers{
			{
				Lambda: lambda.NewFromConfig(cfg), Function: c.Archiver, OnFailure: c.FailureQueueARN,
				MaxRetryAttempts: int32(c.MaxRetryAttempts), MaxRecordAgeSeconds: int32(c.MaxRecordAgeSeconds),
				WindowSeconds: int32(c.WindowSeconds),
			},
			{
				Lambda: lambda.NewFromConfig(cfg), Function: c.Tally, OnFailure: c.FailureQueueARN,
				MaxRetryAttempts: int32(c.MaxRetryAttempts), MaxRecordAgeSeconds: int32(c.MaxRecordAgeSeconds),
				WindowSeconds: int32(c.TallyBatchWindow), TumblingWindowSeconds: int32(c.TallyWindowSeconds),
			},
		},
		Counted: &archiveddb.TallyCheckpoints{DB: awsenv.DynamoDB(cfg), Table: c.CountersTable},
		Archive: &archives3.Partitions{S3: awsenv.S3(cfg), Bucket: c.Bucket, Log: log},
		// A month's retirement is held by one run at a time, whichever
		// runs it: the scheduled function or an operator's CLI.
		Leases: &archiveddb.Leases{DB: awsenv.DynamoDB(cfg), Table: c.CountersTable},
		Log:    log,
	}
}

// holder names a run of the rotator function in its leases: the function
// and the invocation's request id.
func holder(ctx context.Context, function string) string {
	if function == "" {
		function = "the rotator function"
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return fmt.Sprintf("%s (request %s)", function, lc.AwsRequestID)
	}
	return function
}

// SetupRotator wires the rotator function, which creates the coming months' ledger tables, keeps them subscribed to
// the archiver, and retires verified cold months (archive.Rotator). It runs
// daily; the rotation works from the clock, not the event's time.
func SetupRotator(_ context.Context, env lambdafn.Env) (any, error) {
	c, err := rotatorConfig(env.Getenv)
	if err != nil {
		return nil, err
	}
	r := NewRotation(env.AWS, c, env.Log)
	r.Now = lambdafn.NewVars(env.Getenv).Clock() // DDBPIPE_CLOCK_FILE, for rehearsals
	r.Clock = r.Now
	metrics := lambdafn.NewMetrics(env, "rotator")
	function := env.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		run := *r // its own run id, made by Run
		run.Holder = holder(ctx, function)
		if dl, ok := ctx.Deadline(); ok {
			// Leave time for verification and compaction after the waits.
			run.Policy.DrainWait = min(5*time.Minute, time.Until(dl)/3)
		}
		rep := run.Run(ctx)
		ReportRotation(ctx, env.Log, metrics, rep)
		if err := rep.Err(); err != nil {
			// The schedule retries; every step is idempotent.
			return fmt.Errorf("rotation at %s: %w", rep.Now.Format(time.RFC3339), err)
		}
		return nil
	}, nil
}

// ReportRotation logs a run's outcome and writes its metrics: the one place
// an archive.RotationReport becomes a log line and an EMF line. RotationAlarms is
// the alarm input: a month whose archive did not match its table;
// CountersDiffer another: the votes by which a retiring month's counters
// differ from its archive.
func ReportRotation(ctx context.Context, log *slog.Logger, metrics *emf.Writer, rep archive.RotationReport) {
	var verifiedOK, verifiedBad, merged, notDrained, failed int
	var lag float64
	var differ int64
	for _, t := range rep.Retirements {
		if t.Verification != nil {
			if t.Verification.OK() {
				verifiedOK++
			} else {
				verifiedBad++
			}
		}
		if t.Compaction != nil {
			merged += t.Compaction.Merged
		}
		switch t.Outcome {
		case archive.NotDrained:
			notDrained++
		case archive.Failed:
			failed++
		}
		lag = max(lag, t.LagSeconds)
		attrs := []any{"table", t.Table, "outcome", string(t.Outcome), "archiveRows", t.ArchiveRows,
			"verifyMs", t.VerifyTook.Milliseconds(), "scanMs", t.ScanTook.Milliseconds(), "lagSeconds", t.LagSeconds}
		if t.Verification != nil {
			attrs = append(attrs, "verification", t.Verification.String())
		}
		if t.Compaction != nil {
			attrs = append(attrs, "filesBefore", t.Compaction.FilesBefore, "filesAfter", t.Compaction.FilesAfter)
		}
		if !t.HeldBy.IsZero() {
			attrs = append(attrs, "heldBy", t.HeldBy.String())
		}
		if c := t.Counters; c != nil {
			attrs = append(attrs, "tallied", c.Tallied, "countersDiffer", c.Differ())
			if c.Differ() != 0 {
				differ += max(c.Differ(), -c.Differ())
				log.ErrorContext(ctx, "ALARM: "+c.String(), attrs...)
			}
		}
		switch t.Outcome {
		case archive.Alarm:
			log.ErrorContext(ctx, "ALARM: cold month's archive did not match its table; snapshot exported, table kept", attrs...)
		case archive.Failed:
			log.ErrorContext(ctx, "retirement failed; the next run resumes", append(attrs, "err", t.Err)...)
		default:
			log.InfoContext(ctx, "retirement", attrs...)
		}
	}
	log.InfoContext(ctx, "rotation done", "now", rep.Now, "created", rep.Created, "warmed", rep.Warmed, "subscribed", rep.Subscribed,
		"retired", rep.Retired(), "alarms", rep.Alarms(), "failedSteps", rep.FailedSteps(), "notDrained", notDrained, "errors", len(rep.Errors))
	if metrics == nil {
		return
	}
	err := metrics.Emit([]emf.Metric{
		{Name: "TablesCreated", Unit: emf.Count, Value: float64(len(rep.Created))},
		{Name: "TablesSubscribed", Unit: emf.Count, Value: float64(len(rep.Subscribed))},
		{Name: "VerificationsPassed", Unit: emf.Count, Value: float64(verifiedOK)},
		{Name: "VerificationsFailed", Unit: emf.Count, Value: float64(verifiedBad)},
		{Name: "RotationAlarms", Unit: emf.Count, Value: float64(rep.Alarms())},
		{Name: "CountersDiffer", Unit: emf.Count, Value: float64(differ)},
		{Name: "TablesRetired", Unit: emf.Count, Value: float64(rep.Retired())},
		{Name: "TablesNotDrained", Unit: emf.Count, Value: float64(notDrained)},
		{Name: "RotationFailures", Unit: emf.Count, Value: float64(failed + len(rep.Errors))},
		{Name: "FilesCompacted", Unit: emf.Count, Value: float64(merged)},
		{Name: "ArchiveLagSeconds", Unit: emf.Seconds, Value: lag},
	}, nil)
	if err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
