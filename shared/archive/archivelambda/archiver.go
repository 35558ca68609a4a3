package archivelambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Archiver writes a DynamoDB stream's batches to the archive. It works for
// any table's stream (the monthly ledgers, the objects table): the
// partition comes from the table name in each record's eventSourceARN.
// It is the handler only: records in, archive.Group, one Files.WriteObject
// per object, the batch-failure response out.
type Archiver struct {
	Files      archive.ObjectWriter     // archives3.Writer in the function
	Quarantine archive.QuarantineWriter // archives3.Writer in the function; nil: a poison record fails the batch
	Log        *slog.Logger
	Metrics    *emf.Writer      // optional
	Now        func() time.Time // optional, for the archive lag; time.Now by default
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
	Poison   bool // the failure is a record that cannot be archived (only without a Quarantine)
	// Quarantined are the sequence numbers of the poison records kept in
	// the quarantine instead of the archive.
	Quarantined []string
	Err         error // why FailedAt
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
// other. A record that can never be archived (a poison record: it fails
// conversion or grouping) is written whole, with every reason, to
// Quarantine, and the batch goes on without it: its good neighbours are
// archived. Only a transient failure ends the batch: the first object or
// quarantined record that cannot be written. Everything before it is done,
// and Result.FailedAt is the first sequence number not done; a retry starts
// there and rewrites the same keys, so nothing is archived twice.
//
// Without a Quarantine, a poison record ends the batch as a transient
// failure does (Result.Poison).
func (a *Archiver) Archive(ctx context.Context, batch []events.DynamoDBEventRecord) Result {
	res := Result{Records: len(batch)}
	recs := make([]archive.Record, 0, len(batch))
	at := make([]int, 0, len(batch)) // the batch index of each of recs
	// stop ends the batch at batch[i]: what comes from i on is left to the retry.
	stop := func(i int, poison bool, err error) {
		res.FailedAt, res.Poison, res.Err = batch[i].Change.SequenceNumber, poison, err
		n := 0
		for n < len(at) && at[n] < i {
			n++
		}
		recs, at = recs[:n], at[:n]
	}
	// poisoned quarantines batch[i]; false when the batch must stop there.
	poisoned := func(i int, why error) bool {
		if a.Quarantine == nil {
			stop(i, true, fmt.Errorf("archivelambda: poison record %q at sequence %s: %w", batch[i].EventID, batch[i].Change.SequenceNumber, why))
			return false
		}
		if err := a.quarantine(ctx, batch[i], why); err != nil {
			stop(i, false, err)
			return false
		}
		res.Quarantined = append(res.Quarantined, batch[i].Change.SequenceNumber)
		return true
	}
	for i, r := range batch {
		rec, err := FromLambda(r)
		if err != nil {
			if !poisoned(i, err) {
				break
			}
			continue
		}
		recs, at = append(recs, rec), append(at, i)
	}
	var objs []archive.Object
	for {
		var err error
		objs, err = archive.Group(recs)
		var re *archive.RecordError
		if err == nil {
			break
		}
		if !errors.As(err, &re) {
			re = &archive.RecordError{Index: 0, Err: err} // Group fails only with *RecordError; stay safe
		}
		i := at[re.Index]
		if !poisoned(i, re.Err) {
			objs, _ = archive.Group(recs) // recs now end before i
			break
		}
		recs = append(recs[:re.Index:re.Index], recs[re.Index+1:]...)
		at = append(at[:re.Index:re.Index], at[re.Index+1:]...)
	}
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			res.FailedAt, res.Poison, res.Err = o.FirstSequence, false, fmt.Errorf("archivelambda: batch stopped before %s: %w", o.Key, err)
			return res
		}
		f, err := a.Files.WriteObject(ctx, o)
		if err != nil {
			res.FailedAt, res.Poison, res.Err = o.FirstSequence, false, err
			return res
		}
		res.Files = append(res.Files, f)
		res.Archived += len(o.Rows)
	}
	return res
}

// rawRecord is r as JSON, as Lambda delivered it. aws-lambda-go panics on
// some values no JSON decodes to (a zero attribute value); such a record is
// kept as Go's rendering of it instead, so it is never lost.
func rawRecord(r events.DynamoDBEventRecord) (raw []byte) {
	defer func() {
		if recover() != nil {
			raw = fmt.Appendf(nil, "%+v", r)
		}
	}()
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Appendf(nil, "%+v", r)
	}
	return raw
}

// quarantine keeps a poison record whole with its reasons.
func (a *Archiver) quarantine(ctx context.Context, r events.DynamoDBEventRecord, why error) error {
	raw := rawRecord(r)
	reasons := []string{why.Error()}
	var pe *PoisonError
	if errors.As(why, &pe) {
		reasons = pe.Reasons
	}
	table, _, _ := ledger.StreamTable(r.EventSourceArn)
	return a.Quarantine.Quarantine(ctx, archive.Quarantined{Table: table, SequenceNumber: r.Change.SequenceNumber, Record: raw, Reasons: reasons})
}

// Handle is the Lambda handler: it archives the batch, quarantining poison
// records, and reports the first record not archived by its sequence
// number (never its event id), so that Lambda resumes there: only a
// transient failure (S3 throttling or 5xx, a deadline) is reported, and
// its retry completes the batch. It never returns an error: every failure
// is a batch item failure.
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
	case len(res.Quarantined) > 0 && res.Err == nil:
		log.ErrorContext(ctx, "poison records quarantined; the rest of the batch archived", append(attrs, "quarantined", res.Quarantined)...)
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
	poison := float64(len(res.Quarantined))
	if res.Poison {
		poison++
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
