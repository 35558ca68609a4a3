package voteslambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Tallier counts a shard's ledger records; *votes.Tally satisfies it.
type Tallier interface {
	Count(ctx context.Context, s votes.StreamShard, recs []votes.LedgerRecord) votes.TallyResult
}

var _ Tallier = (*votes.Tally)(nil)

// ErrNoShard is an event without a shard id: the tally's event source
// mapping must have a tumbling window (TumblingWindowInSeconds), the only
// form of Lambda's DynamoDB event that names the stream shard its records
// come from, and the checkpoint is per shard.
var ErrNoShard = errors.New("voteslambda: the event names no stream shard (the tally's mapping needs TumblingWindowInSeconds)")

// Stream is the tally function's handler: a ledger table's stream, in
// tumbling windows (for the shard id; each invocation commits on its own).
type Stream struct {
	Tally   Tallier
	Metrics *emf.Writer
	Log     *slog.Logger
}

// Handle counts the batch and reports the first record not counted, from
// which Lambda delivers the shard again.
func (h *Stream) Handle(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	resp := events.DynamoDBTimeWindowEventResponse{}
	resp.State = map[string]string{}
	if len(ev.Records) == 0 {
		return resp, nil // the window's final invocation: nothing is carried between invocations
	}
	if ev.ShardID == "" {
		return resp, ErrNoShard
	}
	arn := ev.EventSourceARN
	if arn == "" {
		arn = ev.Records[0].EventSourceArn
	}
	table, _, err := ledger.StreamTable(arn)
	if err != nil {
		return resp, fmt.Errorf("voteslambda: %w", err)
	}
	recs := make([]votes.LedgerRecord, 0, len(ev.Records))
	invalid := 0
	for _, r := range ev.Records {
		rec, ok := LedgerRecordOf(r)
		if !ok && r.EventName == "INSERT" {
			invalid++
		}
		recs = append(recs, rec)
	}
	res := h.Tally.Count(ctx, votes.StreamShard{Table: table, Shard: ev.ShardID}, recs)
	if res.RetryFrom != "" {
		resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: res.RetryFrom}}
	}
	h.record(ctx, table, ev.ShardID, len(recs), invalid, res)
	return resp, nil
}

// LedgerRecordOf reads a ledger stream record, by the attribute names of
// shared/ledger. ok is false for an INSERT that is not a vote (no pollId or
// optionId): it counts nothing, and Handle logs and measures it.
func LedgerRecordOf(r events.DynamoDBEventRecord) (rec votes.LedgerRecord, ok bool) {
	rec.Seq = r.Change.SequenceNumber
	if r.EventName != "INSERT" {
		return rec, true
	}
	img := r.Change.NewImage
	s := func(name string) string {
		if v, found := img[name]; found && v.DataType() == events.DataTypeString {
			return v.String()
		}
		return ""
	}
	rec.PollID, rec.OptionID = s(ledger.AttrPollID), s(ledger.AttrOptionID)
	if rec.PollID == "" || rec.OptionID == "" {
		return rec, false
	}
	rec.Vote = true
	if t, err := time.Parse(time.RFC3339Nano, s(ledger.AttrCountedAt)); err == nil {
		rec.WrittenAt = t
	}
	return rec, true
}

// record is the one place a batch's outcome is logged and measured.
func (h *Stream) record(ctx context.Context, table, shard string, records, invalid int, res votes.TallyResult) {
	var lag float64
	for _, l := range res.Lags {
		lag = max(lag, l.Seconds())
	}
	attrs := []any{"table", table, "shard", shard, "records", records, "counted", res.Counted, "replayed", res.Replayed,
		"ignored", res.Ignored, "notVotes", invalid, "commits", res.Commits, "checkpointMoved", res.Moved,
		"throttles", res.Throttles, "conflicts", res.Conflicts, "retryFrom", res.RetryFrom, "stoppedForDeadline", res.Deadline, "lagSeconds", lag}
	if invalid > 0 {
		h.Log.WarnContext(ctx, "ledger records that are not votes were skipped", attrs...)
	} else {
		h.Log.InfoContext(ctx, "batch tallied", attrs...)
	}
	if h.Metrics == nil {
		return
	}
	metrics := []emf.Metric{
		{Name: "VotesCounted", Unit: emf.Count, Value: float64(res.Counted)},
		{Name: "TallyReplayed", Unit: emf.Count, Value: float64(res.Replayed)},
		{Name: "TallyCommits", Unit: emf.Count, Value: float64(res.Commits)},
		{Name: "TallyCheckpointMoved", Unit: emf.Count, Value: float64(res.Moved)},
		{Name: "Throttles", Unit: emf.Count, Value: float64(res.Throttles)},
		{Name: "TallyConflicts", Unit: emf.Count, Value: float64(res.Conflicts)},
		{Name: "LedgerRecordsNotVotes", Unit: emf.Count, Value: float64(invalid)},
	}
	if len(res.Lags) > 0 {
		metrics = append(metrics, emf.Metric{Name: "TallyLag", Unit: emf.Seconds, Value: slices.Max(res.Lags).Seconds()})
	}
	if err := h.Metrics.Emit(metrics, nil); err != nil {
		h.Log.WarnContext(ctx, "metrics not written", "err", err)
	}
}
