package archivelambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Archiver writes a DynamoDB stream's batches to the archive. It works for
// any table's stream (the monthly ledgers, the objects table): the
// partition comes from the table name in each record's eventSourceARN.
// It is the handler only: records in, archive.Group, one Files.WriteObject
// per object, the batch-failure response out.
type Archiver struct {
	Files   archive.ObjectWriter // archives3.Writer in the function
	Log     *slog.Logger
	Metrics *emf.Writer      // optional
	Now     func() time.Time // optional, for the archive lag; time.Now by default
}

// StreamHandler is the Lambda handler type the Archiver serves.
type StreamHandler = func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

var _ StreamHandler = (*Archiver)(nil).Handle

// Result is what one batch came to.
type Result struct {
	Records  int            // in the batch
	Archived int            // written to the archive
	Files    []archive.File // objects written, in order
	// FailedAt is the sequence number of the first record not archived
	// ("" when the whole batch was archived); the event source resumes there.
	FailedAt string
	Poison   bool  // the failure is a record that cannot be archived
	Err      error // why FailedAt
}

// Bytes is the size of the objects written.
func (r Result) Bytes() int64 {
	var n int64
	for _, f := range r.Files {
		n += f.Bytes
	}
	return n
}

// Archive archives a batch in order. Records go into one object per run of
// records of one stream and partition (archive.Group), written one after the
// other; the first object that cannot be written, or the first record that
// cannot be converted (a poison record), ends the batch: everything before it
// is archived, and Result.FailedAt is its first sequence number. A retry then
// starts at that record and rewrites the same object key, so nothing is
// archived twice.
func (a *Archiver) Archive(ctx context.Context, batch []events.DynamoDBEventRecord) Result {
	res := Result{Records: len(batch)}
	recs := make([]archive.Record, 0, len(batch))
	poison := -1
	var poisonErr error
	for i, r := range batch {
		rec, err := FromLambda(r)
		if err != nil {
			poison, poisonErr = i, err
			break
		}
		recs = append(recs, rec)
	}
	objs, err := archive.Group(recs)
	var re *archive.RecordError
	if errors.As(err, &re) {
		poison, poisonErr = re.Index, re.Err
	} else if err != nil {
		poison, poisonErr = 0, err // Group fails only with *RecordError; stay safe
	}
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			res.FailedAt, res.Err = o.FirstSequence, fmt.Errorf("archivelambda: batch stopped before %s: %w", o.Key, err)
			return res
		}
		f, err := a.Files.WriteObject(ctx, o)
		if err != nil {
			res.FailedAt, res.Err = o.FirstSequence, err
			return res
		}
		res.Files = append(res.Files, f)
		res.Archived += len(o.Rows)
	}
	if poison >= 0 {
		res.FailedAt, res.Poison = batch[poison].Change.SequenceNumber, true
		res.Err = fmt.Errorf("archivelambda: poison record %q at sequence %s: %w", batch[poison].EventID, res.FailedAt, poisonErr)
	}
	return res
}

// Handle is the Lambda handler: it archives the batch and reports the first
// record not archived by its sequence number (never its event id), so that
// Lambda resumes there; retries, bisection and the on-failure destination
// then deal with a poison record, and the shard moves on. It never returns
// an error: every failure is a batch item failure.
func (a *Archiver) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	res := a.Archive(ctx, ev.Records)
	a.report(ctx, ev.Records, res)
	if res.FailedAt == "" && res.Err == nil {
		return events.DynamoDBEventResponse{}, nil
	}
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: res.FailedAt}}}, nil
}

// report logs the batch and writes its metrics: the one place a Result
// becomes a log line and an EMF line.
func (a *Archiver) report(ctx context.Context, batch []events.DynamoDBEventRecord, res Result) {
	log := a.Log
	if log == nil {
		log = slog.Default()
	}
	var lag float64
	if n := len(batch); n > 0 {
		now := time.Now
		if a.Now != nil {
			now = a.Now
		}
		lag = max(0, now().Sub(batch[n-1].Change.ApproximateCreationDateTime.Time).Seconds())
	}
	attrs := []any{"records", res.Records, "archived", res.Archived, "files", len(res.Files), "bytes", res.Bytes(), "lagSeconds", lag}
	switch {
	case res.Poison:
		log.ErrorContext(ctx, "poison record: batch fails at it", append(attrs, "failedAt", res.FailedAt, "err", res.Err)...)
	case res.Err != nil:
		log.WarnContext(ctx, "archive batch failed; it will be retried", append(attrs, "failedAt", res.FailedAt, "err", res.Err)...)
	default:
		log.InfoContext(ctx, "archived batch", attrs...)
	}
	if a.Metrics == nil {
		return
	}
	failed := 0.0
	if res.Err != nil && !res.Poison {
		failed = 1
	}
	poison := 0.0
	if res.Poison {
		poison = 1
	}
	err := a.Metrics.Emit([]emf.Metric{
		{Name: "RecordsArchived", Unit: emf.Count, Value: float64(res.Archived)},
		{Name: "ArchiveBytes", Unit: emf.Bytes, Value: float64(res.Bytes())},
		{Name: "ArchiveFiles", Unit: emf.Count, Value: float64(len(res.Files))},
		{Name: "PoisonRecords", Unit: emf.Count, Value: poison},
		{Name: "ArchiveWriteFailures", Unit: emf.Count, Value: failed},
		{Name: "ArchiveLagSeconds", Unit: emf.Seconds, Value: lag},
	}, nil)
	if err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
