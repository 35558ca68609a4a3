package objectslambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Reaper handles the objects table's stream: each REMOVE of a history
// item becomes an objects.Removed for the domain's Reaper, which deletes
// its payload. Every other record (inserts, modifies, v0, chunk items,
// pending uploads, any item that is not a version) frees nothing and is
// skipped; a record that cannot be read fails the batch at its sequence
// number (objects.ErrMalformed).
type Reaper struct {
	Reaper  *objects.Reaper
	Log     *slog.Logger
	Metrics *emf.Writer // optional
}

// ReapResult is what one stream batch came to: the domain's result, and
// the sequence number of the first record that failed ("" when none did),
// where the event source resumes.
type ReapResult struct {
	objects.ReapResult
	FailedAt string
}

// Reap reads the batch's records and reaps them.
func (r *Reaper) Reap(ctx context.Context, batch []events.DynamoDBEventRecord) ReapResult {
	removed := make([]objects.Removed, len(batch))
	for i, rec := range batch {
		removed[i] = removedItem(rec)
	}
	res := ReapResult{ReapResult: r.Reaper.Reap(ctx, removed)}
	if i := res.Failed; i >= 0 {
		res.FailedAt = batch[i].Change.SequenceNumber
		res.Err = fmt.Errorf("record %s (sequence %s): %w", batch[i].EventID, res.FailedAt, res.Err)
	}
	return res
}

// removedItem reads one stream record: the old image of a removed
// history item, or a record that frees nothing.
func removedItem(rec events.DynamoDBEventRecord) objects.Removed {
	if rec.EventName != string(events.DynamoDBOperationTypeRemove) {
		if rec.EventName == "" {
			return objects.Removed{Err: fmt.Errorf("%w: no event name", objects.ErrMalformed)}
		}
		return objects.Removed{Skip: true}
	}
	if len(rec.Change.OldImage) == 0 {
		return objects.Removed{Err: fmt.Errorf("%w: a REMOVE without an old image (is the stream view NEW_AND_OLD_IMAGES?)", objects.ErrMalformed)}
	}
	image, err := ddbstream.LambdaToDynamo(rec.Change.OldImage)
	if err != nil {
		return objects.Removed{Err: fmt.Errorf("%w: old image: %w", objects.ErrMalformed, err)}
	}
	r, ok, err := objectsddb.HistoryRecord(image)
	if err != nil {
		return objects.Removed{Err: fmt.Errorf("%w: %w", objects.ErrMalformed, err)}
	}
	return objects.Removed{Record: r, Skip: !ok}
}

// Handle is the Lambda handler: it reaps the batch and reports the first
// failed record by its sequence number, so that Lambda resumes there. It
// never returns an error: every failure is a batch item failure.
func (r *Reaper) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	res := r.Reap(ctx, ev.Records)
	r.report(ctx, res)
	if res.Err == nil {
		return events.DynamoDBEventResponse{}, nil
	}
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: res.FailedAt}}}, nil
}

// report logs a batch and writes its metrics: the one place a ReapResult
// becomes a log line and an EMF line.
func (r *Reaper) report(ctx context.Context, res ReapResult) {
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	attrs := []any{"records", res.Records, "blobs", res.Blobs, "chunks", res.Chunks, "bytes", res.Bytes, "skipped", res.Skipped, "failures", res.Failures, "ms", res.Took.Milliseconds()}
	switch {
	case errors.Is(res.Err, objects.ErrMalformed) || errors.Is(res.Err, objects.ErrForeignBlob):
		log.ErrorContext(ctx, "record cannot be reaped: the batch fails at it", append(attrs, "failedAt", res.FailedAt, "err", res.Err)...)
	case res.Err != nil:
		log.WarnContext(ctx, "reap failed; the batch is retried from the failed record", append(attrs, "failedAt", res.FailedAt, "err", res.Err)...)
	default:
		log.InfoContext(ctx, "reaped batch", attrs...)
	}
	if r.Metrics == nil {
		return
	}
	if err := r.Metrics.Emit([]emf.Metric{
		{Name: "BlobsReaped", Unit: emf.Count, Value: float64(res.Blobs)},
		{Name: "ChunksReaped", Unit: emf.Count, Value: float64(res.Chunks)},
		{Name: "BytesReaped", Unit: emf.Bytes, Value: float64(res.Bytes)},
		{Name: "ReapFailures", Unit: emf.Count, Value: float64(res.Failures)},
	}, nil); err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
