// Package objectsmaint keeps the objects store clean: the reaper deletes
// the payloads of version items removed from the table (its stream), the
// sweeper deletes payloads that no reference names (a schedule), and Check
// proves the store's invariants for tests. It adapts the objects domain to
// Lambda's stream and schedule events, S3 version listings and the
// table's references (objectsddb.Refs).
//
// # What the reaper deletes
//
// A version's payload lives as long as its history item vN (v0 is a copy
// always backed by vN). So a REMOVE of a history item on the table's
// stream, a pruned version or a deleted object's, frees its blob or its
// chunks, and the reaper hands the old image to objects.Store.Reap. Every
// other record (inserts, modifies, v0, chunk items, pending uploads, any
// item that is not a version) frees nothing and is skipped. Deleting twice
// is harmless, so a retried batch, or a record delivered twice, is fine.
//
// # What the sweeper deletes
//
// See Sweeper.
package objectsmaint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Reaping is what the reaper needs from the domain; *objects.Store
// satisfies it.
type Reaping interface {
	Reap(ctx context.Context, removed objects.Record) error
}

var _ Reaping = (*objects.Store)(nil)

// Prefixes the objects bucket holds payloads under: the store's blobs, and
// presigned uploads (a finalized upload's reference names its key).
var Prefixes = []string{objects.BlobPrefix, objects.UploadPrefix}

// ErrMalformed marks a stream record the reaper cannot read: it is
// reported as a failure (the stream's retries, bisection and on-failure
// destination then deal with it), never skipped silently.
var ErrMalformed = errors.New("objectsmaint: malformed record")

// ErrForeignBlob marks a reference to a blob outside the objects bucket's
// payload prefixes: the reaper never deletes it.
var ErrForeignBlob = errors.New("objectsmaint: blob outside the objects bucket's prefixes")

// Reaper is the objects table's stream handler.
type Reaper struct {
	Store Reaping
	// Bucket is the objects bucket; a reference to another bucket, or to a
	// key outside Prefixes, is refused (ErrForeignBlob).
	Bucket string
	// Parallelism bounds the records reaped at once (default 16).
	Parallelism int
	Log         *slog.Logger
	Metrics     *emf.Writer // optional
}

// DefaultReapParallelism is Reaper.Parallelism's default.
const DefaultReapParallelism = 16

// Outcome is what one record came to.
type Outcome int

// Outcomes.
const (
	Skipped Outcome = iota // frees nothing
	ReapedBlob
	ReapedChunks
	ReapedNothing // a removed history item with an inline payload
	Failed
)

// ReapResult is what one batch came to.
type ReapResult struct {
	Records  int
	Blobs    int   // blobs deleted (or already gone)
	Chunks   int   // chunk items deleted (or already gone)
	Bytes    int64 // stored bytes freed
	Skipped  int
	Failures int
	// FailedAt is the sequence number of the first record that failed (""
	// when none did); the event source resumes there. Err says why.
	FailedAt string
	Err      error
	Took     time.Duration
}

// Reap reaps a batch. Records are reaped in parallel (each is independent
// and idempotent); the first failed record in stream order is the one
// reported, and the retry from it reaps again what came after it, which
// is harmless.
func (r *Reaper) Reap(ctx context.Context, batch []events.DynamoDBEventRecord) ReapResult {
	start := time.Now()
	res := ReapResult{Records: len(batch)}
	type result struct {
		out Outcome
		rec objects.Record
		err error
	}
	results := make([]result, len(batch))
	n := r.Parallelism
	if n <= 0 {
		n = DefaultReapParallelism
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, rec := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, removed, err := r.reapOne(ctx, rec)
			results[i] = result{out: out, rec: removed, err: err}
		})
	}
	wg.Wait()
	for i, x := range results {
		switch x.out {
		case Skipped, ReapedNothing:
			res.Skipped++
		case ReapedBlob:
			res.Blobs++
			res.Bytes += x.rec.Blob.Size
		case ReapedChunks:
			res.Chunks += x.rec.Manifest.Count
			res.Bytes += x.rec.Manifest.Size
		case Failed:
			res.Failures++
			if res.Err == nil { // the first in stream order
				res.FailedAt = batch[i].Change.SequenceNumber
				res.Err = fmt.Errorf("record %s (sequence %s): %w", batch[i].EventID, res.FailedAt, x.err)
			}
		}
	}
	res.Took = time.Since(start)
	return res
}

// reapOne reaps one record.
func (r *Reaper) reapOne(ctx context.Context, rec events.DynamoDBEventRecord) (Outcome, objects.Record, error) {
	if rec.EventName != string(events.DynamoDBOperationTypeRemove) {
		if rec.EventName == "" {
			return Failed, objects.Record{}, fmt.Errorf("%w: no event name", ErrMalformed)
		}
		return Skipped, objects.Record{}, nil
	}
	if len(rec.Change.OldImage) == 0 {
		return Failed, objects.Record{}, fmt.Errorf("%w: a REMOVE without an old image (is the stream view NEW_AND_OLD_IMAGES?)", ErrMalformed)
	}
	image, err := ddbstream.LambdaToDynamo(rec.Change.OldImage)
	if err != nil {
		return Failed, objects.Record{}, fmt.Errorf("%w: old image: %w", ErrMalformed, err)
	}
	removed, ok, err := objectsddb.HistoryRecord(image)
	if err != nil {
		return Failed, objects.Record{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !ok {
		return Skipped, objects.Record{}, nil
	}
	out := ReapedNothing
	switch removed.Kind {
	case objects.InS3:
		if removed.Blob == nil || removed.Blob.Key == "" {
			return Failed, removed, fmt.Errorf("%w: %s v%d is in S3 without a blob key", ErrMalformed, removed.Key, removed.Version)
		}
		if err := r.ours(*removed.Blob); err != nil {
			return Failed, removed, fmt.Errorf("%s v%d: %w", removed.Key, removed.Version, err)
		}
		out = ReapedBlob
	case objects.Chunked:
		if removed.Manifest == nil {
			return Failed, removed, fmt.Errorf("%w: %s v%d is chunked without a manifest", ErrMalformed, removed.Key, removed.Version)
		}
		if err := removed.Manifest.Validate(); err != nil {
			return Failed, removed, fmt.Errorf("%w: %s v%d: %w", ErrMalformed, removed.Key, removed.Version, err)
		}
		out = ReapedChunks
	}
	if err := r.Store.Reap(ctx, removed); err != nil {
		return Failed, removed, err
	}
	return out, removed, nil
}

// ours checks that a reference names a payload of the objects bucket.
func (r *Reaper) ours(ref objects.BlobRef) error {
	if ref.Bucket != "" && r.Bucket != "" && ref.Bucket != r.Bucket {
		return fmt.Errorf("%w: s3://%s/%s", ErrForeignBlob, ref.Bucket, ref.Key)
	}
	for _, p := range Prefixes {
		if strings.HasPrefix(ref.Key, p) && len(ref.Key) > len(p) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrForeignBlob, ref.Key)
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
	case errors.Is(res.Err, ErrMalformed) || errors.Is(res.Err, ErrForeignBlob):
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
