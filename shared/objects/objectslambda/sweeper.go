package objectslambda

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// Sweeping is what the sweeper's handler needs; *objects.Sweeper
// satisfies it.
type Sweeping interface {
	Sweep(ctx context.Context) objects.SweepResult
}

var _ Sweeping = (*objects.Sweeper)(nil)

// Sweeper is the scheduled handler of the orphan sweeper (see
// objects.Sweeper).
type Sweeper struct {
	Sweeper Sweeping
	Log     *slog.Logger
	Metrics *emf.Writer // optional
}

// Handle is the scheduled handler. A sweep that could not finish (a
// failed scan or listing) is an error, for Lambda to retry; payloads that
// could not be deleted are logged and counted, and the next sweep retries
// them.
func (s *Sweeper) Handle(ctx context.Context, _ events.EventBridgeEvent) error {
	res := s.Sweeper.Sweep(ctx)
	s.report(ctx, res)
	return res.Err
}

// report logs a sweep and writes its metrics: the one place a SweepResult
// becomes a log line and an EMF line.
func (s *Sweeper) report(ctx context.Context, res objects.SweepResult) {
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	attrs := []any{"markedAt", res.MarkedAt, "items", res.Items, "references", res.References, "manifests", res.Manifests,
		"listed", res.Listed, "swept", res.Swept, "bytes", res.SweptBytes, "chunksMarked", res.ChunksMarked,
		"chunksSwept", res.ChunksSwept, "failures", res.Failures, "ms", res.Took.Milliseconds()}
	switch {
	case res.Err != nil:
		log.WarnContext(ctx, "sweep stopped early", attrs...) // the error is the handler's
	case res.DeleteErr != nil:
		log.ErrorContext(ctx, "sweep done; some orphans not deleted", append(attrs, "err", res.DeleteErr)...)
	default:
		log.InfoContext(ctx, "sweep done", attrs...)
	}
	if s.Metrics == nil {
		return
	}
	if err := s.Metrics.Emit([]emf.Metric{
		{Name: "OrphansSwept", Unit: emf.Count, Value: float64(res.Swept)},
		{Name: "OrphanBytesSwept", Unit: emf.Bytes, Value: float64(res.SweptBytes)},
		{Name: "OrphanChunksSwept", Unit: emf.Count, Value: float64(res.ChunksSwept)},
		{Name: "OrphanChunksMarked", Unit: emf.Count, Value: float64(res.ChunksMarked)},
		{Name: "SweepFailures", Unit: emf.Count, Value: float64(res.Failures)},
		{Name: "SweepSeconds", Unit: emf.Seconds, Value: res.Took.Seconds()},
	}, nil); err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
