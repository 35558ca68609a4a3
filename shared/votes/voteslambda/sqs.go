// Package voteslambda adapts the votes domain to Lambda events: the SQS
// handler of the counter function, the ledger stream handler of the tally
// function and the HTTP API handler of polls and results. Handlers only translate: event in, domain call, response out.
package voteslambda

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Counter counts a batch; *votes.Counter satisfies it.
type Counter interface {
	Count(ctx context.Context, msgs []votes.Message) votes.Result
}

var _ Counter = (*votes.Counter)(nil)

// SQS is the counter function's handler.
type SQS struct {
	Counter Counter
	Metrics *emf.Writer
	Log     *slog.Logger
}

// Handle counts the batch and reports the messages to deliver again.
func (h *SQS) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	msgs := make([]votes.Message, len(ev.Records))
	for i, r := range ev.Records {
		msgs[i] = votes.Message{ID: r.MessageId, Body: []byte(r.Body)}
	}
	res := h.Counter.Count(ctx, msgs)
	var resp events.SQSEventResponse
	for _, id := range res.Failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	h.record(ctx, len(msgs), res)
	return resp, nil
}

// record is the one place a batch's outcome is logged and measured.
func (h *SQS) record(ctx context.Context, messages int, res votes.Result) {
	rejected := 0
	reasons := map[string]int{}
	for r, n := range res.Rejected {
		rejected += n
		reasons[string(r)] = n
	}
	attrs := []any{"messages", messages, "accepted", res.Accepted, "duplicates", res.Duplicates,
		"rejected", rejected, "rejectReasons", reasons, "failed", len(res.Failed), "puts", res.Puts,
		"retries", res.Retries, "throttles", res.Throttles, "stoppedForDeadline", res.Deadline, "parallel", res.Parallel}
	if res.LastError != "" {
		attrs = append(attrs, "lastError", res.LastError)
	}
	h.Log.InfoContext(ctx, "batch written", attrs...)
	if h.Metrics == nil {
		return
	}
	metrics := []emf.Metric{
		{Name: "VotesAccepted", Unit: emf.Count, Value: float64(res.Accepted)},
		{Name: "VotesDuplicate", Unit: emf.Count, Value: float64(res.Duplicates)},
		{Name: "VotesRejected", Unit: emf.Count, Value: float64(rejected)},
		{Name: "VotesRetried", Unit: emf.Count, Value: float64(len(res.Failed))},
		{Name: "LedgerPuts", Unit: emf.Count, Value: float64(res.Puts)},
		{Name: "LedgerRetries", Unit: emf.Count, Value: float64(res.Retries)},
		{Name: "Throttles", Unit: emf.Count, Value: float64(res.Throttles)},
		{Name: "CounterParallel", Unit: emf.Count, Value: float64(res.Parallel)},
	}
	if err := h.Metrics.Emit(metrics, map[string]any{"rejectReasons": reasons}); err != nil {
		h.Log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
