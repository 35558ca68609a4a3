// Package searchlambda is the search flow's Lambda side: the indexer's
// stream handler, with its Setup.
package searchlambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// Indexer handles the objects table's stream: every change of a key's
// latest version item (v0) becomes a change of its search document. Other
// items (history, chunks, uploads) are skipped.
type Indexer struct {
	Indexer *search.Indexer
	// Aliases makes sure the index and its aliases exist, before the
	// first batch (a new stack's first change creates them).
	Aliases Aliases
	Log     *slog.Logger
	Metrics *emf.Writer // optional
	Now     func() time.Time

	ensured atomic.Bool
}

// Aliases creates the index and its aliases when they do not exist yet
// (searchos.Engine satisfies it).
type Aliases interface {
	Ensure(ctx context.Context) error
}

// errMalformed marks a stream record the indexer cannot read.
var errMalformed = errors.New("searchlambda: malformed record")

// Batch is what one stream batch came to.
type Batch struct {
	search.Result
	Skipped  int
	FailedAt string // the sequence number Lambda resumes at; "" when none
	// Lag is from the newest change's write (the version's CreatedAt) to
	// its document written: the stream's delay and the indexer's.
	Lag time.Duration
}

// Handle is the Lambda handler. The changes before the first record that
// cannot be read are indexed and that record is reported as the batch's
// failure, so Lambda bisects down to it and sends it to the failures
// destination; a batch the index did not take (unreachable, or a payload
// not readable yet) is reported failed at its first record and retried
// whole: external versions make the repeat harmless. It never returns an
// error.
func (h *Indexer) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	b := h.Index(ctx, ev.Records)
	h.report(ctx, b)
	if b.FailedAt == "" {
		return events.DynamoDBEventResponse{}, nil
	}
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: b.FailedAt}}}, nil
}

// Index reads the batch's records and applies their changes.
func (h *Indexer) Index(ctx context.Context, records []events.DynamoDBEventRecord) Batch {
	var (
		b       Batch
		changes []search.Change
		last    time.Time
	)
	for _, rec := range records {
		c, ok, err := change(rec)
		if err != nil {
			b.FailedAt = rec.Change.SequenceNumber
			b.Err = fmt.Errorf("record %s (sequence %s): %w", rec.EventID, b.FailedAt, err)
			break
		}
		if !ok {
			b.Skipped++
			continue
		}
		changes = append(changes, c)
		if t := c.Record.CreatedAt; t.After(last) {
			last = t // the write's own time: the stream's is whole seconds (a minute, in DynamoDB Local)
		}
	}
	if len(changes) == 0 {
		return b
	}
	if !h.ensured.Load() && h.Aliases != nil {
		if err := h.Aliases.Ensure(ctx); err != nil {
			b.Changes, b.FailedAt = len(changes), records[0].Change.SequenceNumber
			b.Err = errors.Join(fmt.Errorf("searchlambda: the index's aliases: %w", err), b.Err)
			return b
		}
		h.ensured.Store(true)
	}
	res := h.Indexer.Apply(ctx, changes)
	if res.Err != nil {
		res.Err = errors.Join(res.Err, b.Err)
		b.Result, b.FailedAt = res, records[0].Change.SequenceNumber
		return b
	}
	res.Err = b.Err
	b.Result = res
	if !last.IsZero() {
		b.Lag = h.now().Sub(last)
	}
	return b
}

func (h *Indexer) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// change reads one stream record: ok is false for a record of an item
// that is not a key's latest version.
func change(rec events.DynamoDBEventRecord) (search.Change, bool, error) {
	image := rec.Change.NewImage
	switch rec.EventName {
	case string(events.DynamoDBOperationTypeInsert), string(events.DynamoDBOperationTypeModify):
	case string(events.DynamoDBOperationTypeRemove):
		image = rec.Change.OldImage
	default:
		return search.Change{}, false, fmt.Errorf("%w: event name %q", errMalformed, rec.EventName)
	}
	if len(image) == 0 {
		return search.Change{}, false, fmt.Errorf("%w: %s without its image (is the stream view NEW_AND_OLD_IMAGES?)", errMalformed, rec.EventName)
	}
	item, err := ddbstream.LambdaToDynamo(image)
	if err != nil {
		return search.Change{}, false, fmt.Errorf("%w: %w", errMalformed, err)
	}
	r, ok, err := objectsddb.LatestRecord(item)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("%w: %w", errMalformed, err)
		}
		return search.Change{}, false, err
	}
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		r.Deleted = true // the key's latest item is gone: so is its document
	}
	return search.Change{Record: r}, true, nil
}

// report logs a batch and writes its metrics: the one place a Batch
// becomes a log line and an EMF line.
func (h *Indexer) report(ctx context.Context, b Batch) {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	attrs := []any{"changes", b.Changes, "documents", b.Documents, "deletes", b.Deletes, "newer", b.Newer,
		"textless", b.TextLess, "refused", len(b.Refused), "skipped", b.Skipped, "requests", b.Requests,
		"ms", b.Took.Milliseconds(), "lagMs", b.Lag.Milliseconds()}
	switch {
	case errors.Is(b.Err, errMalformed):
		log.ErrorContext(ctx, "record cannot be indexed: the batch fails at it", append(attrs, "failedAt", b.FailedAt, "err", b.Err)...)
	case b.Err != nil:
		log.WarnContext(ctx, "batch not indexed; it is retried", append(attrs, "failedAt", b.FailedAt, "err", b.Err)...)
	case b.Changes > 0:
		log.InfoContext(ctx, "indexed batch", attrs...)
	}
	if h.Metrics == nil || b.Changes == 0 && b.Err == nil {
		return
	}
	failed := 0.0
	if b.Err != nil {
		failed = 1
	}
	if err := h.Metrics.Emit([]emf.Metric{
		{Name: "DocumentsIndexed", Unit: emf.Count, Value: float64(b.Documents - b.Deletes)},
		{Name: "DocumentsDeleted", Unit: emf.Count, Value: float64(b.Deletes)},
		{Name: "StaleWritesRefused", Unit: emf.Count, Value: float64(b.Newer)},
		{Name: "DocumentsRefused", Unit: emf.Count, Value: float64(len(b.Refused))},
		{Name: "BulkRequests", Unit: emf.Count, Value: float64(b.Requests)},
		{Name: "IndexBatchesFailed", Unit: emf.Count, Value: failed},
		{Name: "IndexLag", Unit: emf.Milliseconds, Value: float64(b.Lag.Milliseconds())},
	}, nil); err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
