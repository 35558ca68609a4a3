// Package voteslambda adapts the votes domain to Lambda events: the SQS
// handler of the counter function, the ledger stream handler of the tally
// function and the HTTP API handler of polls and results. Handlers only translate: event in, domain call, response out.
package voteslambda

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// Counter counts a batch; *votes.Counter satisfies it.
type Counter interface {
	Count(ctx context.Context, msgs []votes.Message) votes.Result
}

var _ Counter = (*votes.Counter)(nil)

// Requeuer sets when messages given back are delivered again;
// *votessqs.Requeue satisfies it.
type Requeuer interface {
	Delay(ctx context.Context, msgs []votessqs.Delayed) error
}

var _ Requeuer = (*votessqs.Requeue)(nil)

// SQS is the counter function's handler.
type SQS struct {
	Counter Counter
	// Requeue, when set, has a message given back delivered again after
	// Retry's wait rather than the queue's whole visibility timeout.
	Requeue Requeuer
	Retry   votes.Retry
	Metrics *emf.Writer
	Log     *slog.Logger
}

// Handle counts the batch and reports the messages to deliver again.
func (h *SQS) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	msgs := make([]votes.Message, len(ev.Records))
	for i, r := range ev.Records {
		msgs[i] = votes.Message{ID: r.MessageId, SentAt: sentAt(r), Body: []byte(r.Body)}
	}
	res := h.Counter.Count(ctx, msgs)
	var resp events.SQSEventResponse
	for _, id := range res.Failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	h.requeue(ctx, ev, res)
	h.record(ctx, len(msgs), res)
	return resp, nil
}

// sentAt is when SQS took the message (its SentTimestamp, the same on every
// delivery), or the zero time when the record does not say.
func sentAt(r events.SQSMessage) time.Time {
	ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// requeue sets when the messages given back come again: a late one when
// the store, at the rate the batch saw, would reach it; one given back for
// a cause soon after a first failure, later after each next one (Retry).
func (h *SQS) requeue(ctx context.Context, ev events.SQSEvent, res votes.Result) {
	if h.Requeue == nil || len(res.Failed) == 0 {
		return
	}
	back := make(map[string]bool, len(res.Failed))
	for _, id := range res.Failed {
		back[id] = true
	}
	ahead := make(map[string]int, len(res.Late)) // late votes of the batch before each
	for i, id := range res.Late {
		ahead[id] = i
	}
	var rate float64
	if res.WriteTime > 0 {
		rate = float64(res.Accepted+res.Duplicates) / res.WriteTime.Seconds()
	}
	now := time.Now()
	var msgs []votessqs.Delayed
	for _, r := range ev.Records {
		if !back[r.MessageId] || r.ReceiptHandle == "" {
			continue
		}
		receives, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		receives = max(receives, 1)
		var age time.Duration
		if sent := sentAt(r); !sent.IsZero() {
			age = max(now.Sub(sent), 0)
		}
		delay := h.Retry.Failed(receives, age)
		if i, late := ahead[r.MessageId]; late {
			delay = h.Retry.Late(receives, age, i, rate)
		}
		msgs = append(msgs, votessqs.Delayed{ReceiptHandle: r.ReceiptHandle, Delay: delay})
	}
	// On the invocation's own context, past the counter's margin: a few
	// calls at most. A failure leaves the queue's timeout, nothing lost.
	if err := h.Requeue.Delay(ctx, msgs); err != nil {
		h.Log.WarnContext(ctx, "messages given back keep the queue's visibility timeout", "err", err)
	}
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
		"rejected", rejected, "rejectReasons", reasons, "rejectsRecorded", res.Recorded, "failed", len(res.Failed), "puts", res.Puts,
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
		{Name: "RejectsRecorded", Unit: emf.Count, Value: float64(res.Recorded)},
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
