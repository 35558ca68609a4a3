package voteslambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

type failing struct{ failed []string }

func (f failing) Count(context.Context, []votes.Message) votes.Result {
	return votes.Result{Failed: f.failed, Rejected: map[votes.Reason]int{}}
}

type delays struct {
	got []votessqs.Delayed
	err error
}

func (d *delays) Delay(_ context.Context, msgs []votessqs.Delayed) error {
	d.got = append(d.got, msgs...)
	return d.err
}

// Only the messages given back are delayed, each by its receive count.
func TestHandleDelaysWhatItGivesBack(t *testing.T) {
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "a", ReceiptHandle: "ra", Attributes: map[string]string{"ApproximateReceiveCount": "1"}},
		{MessageId: "b", ReceiptHandle: "rb", Attributes: map[string]string{"ApproximateReceiveCount": "4"}},
		{MessageId: "c", ReceiptHandle: "rc", Attributes: map[string]string{"ApproximateReceiveCount": "30"}},
		{MessageId: "d", ReceiptHandle: "rd"},
	}}
	for _, tt := range []struct {
		name string
		err  error
	}{{"delayed", nil}, {"SQS refuses: the response is the same", errors.New("boom")}} {
		t.Run(tt.name, func(t *testing.T) {
			d := &delays{err: tt.err}
			h := &SQS{Counter: failing{failed: []string{"b", "c", "d"}}, Requeue: d, Retry: votes.Retry{Most: 360 * time.Second},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			resp, err := h.Handle(context.Background(), ev)
			if err != nil || len(resp.BatchItemFailures) != 3 {
				t.Fatalf("Handle: %v, %d failures", err, len(resp.BatchItemFailures))
			}
			want := map[string]time.Duration{"rb": 80 * time.Second, "rc": 360 * time.Second, "rd": 10 * time.Second}
			if len(d.got) != len(want) {
				t.Fatalf("delayed %v, want %v", d.got, want)
			}
			for _, m := range d.got {
				if want[m.ReceiptHandle] != m.Delay {
					t.Errorf("%s delayed %s, want %s", m.ReceiptHandle, m.Delay, want[m.ReceiptHandle])
				}
			}
		})
	}
}

type late struct{ votes.Result }

func (l late) Count(context.Context, []votes.Message) votes.Result { return l.Result }

// Votes given back late come again when the store, at the rate the batch
// saw, would reach them; one given back for a cause doubles its wait.
func TestHandleSpacesLateVotesByTheStoresRate(t *testing.T) {
	var ev events.SQSEvent
	for _, id := range []string{"ok1", "ok2", "late1", "late2", "late3", "failed"} {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, ReceiptHandle: "r" + id,
			Attributes: map[string]string{"ApproximateReceiveCount": "2"}})
	}
	d := &delays{}
	// 2 votes written in 4 s: the store took one every 2 s.
	res := votes.Result{Accepted: 2, WriteTime: 4 * time.Second, Rejected: map[votes.Reason]int{},
		Failed: []string{"failed", "late1", "late2", "late3"}, Late: []string{"late1", "late2", "late3"}}
	h := &SQS{Counter: late{res}, Requeue: d, Retry: votes.Retry{Most: 5 * time.Second},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := h.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"rlate1": 2 * time.Second, "rlate2": 4 * time.Second, "rlate3": 5 * time.Second, "rfailed": 5 * time.Second}
	got := map[string]time.Duration{}
	for _, m := range d.got {
		got[m.ReceiptHandle] = m.Delay
	}
	if !maps.Equal(got, want) {
		t.Errorf("delays %v, want %v (late: 2 s apart up to the 5 s timeout; failed on its 2nd receive: 20 s, at most 5 s)", got, want)
	}
}

func TestSentAt(t *testing.T) {
	tests := []struct {
		name, attr string
		want       time.Time
	}{
		{"SentTimestamp", "1763719200123", time.UnixMilli(1763719200123).UTC()},
		{"missing", "", time.Time{}},
		{"not a number", "yesterday", time.Time{}},
		{"negative", "-5", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := events.SQSMessage{Attributes: map[string]string{}}
			if tt.attr != "" {
				r.Attributes["SentTimestamp"] = tt.attr
			}
			if got := sentAt(r); !got.Equal(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// recording is a Counter that keeps the messages it was given and says it
// recorded each as a poll's reject.
type recording struct{ got []votes.Message }

func (r *recording) Count(_ context.Context, msgs []votes.Message) votes.Result {
	r.got = append(r.got, msgs...)
	return votes.Result{Rejected: map[votes.Reason]int{votes.ReasonUnknownOption: len(msgs)}, Recorded: len(msgs)}
}

// The counter gets each message's SentTimestamp; the batch's line of
// metrics counts the rejects recorded under their poll.
func TestHandleRecordsRejects(t *testing.T) {
	c := &recording{}
	var out bytes.Buffer
	h := &SQS{Counter: c, Metrics: emf.New(&out, "ddbpipe", map[string]string{"Function": "counter"}), Log: slog.New(slog.DiscardHandler)}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "a", Body: "{}", Attributes: map[string]string{"SentTimestamp": "1763719200123"}},
		{MessageId: "b", Body: "{}"},
	}}
	if _, err := h.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 2 || !c.got[0].SentAt.Equal(time.UnixMilli(1763719200123)) || !c.got[1].SentAt.IsZero() {
		t.Errorf("messages %+v: want a's SentTimestamp and no time for b", c.got)
	}
	var line struct{ RejectsRecorded, VotesRejected float64 }
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.RejectsRecorded != 2 || line.VotesRejected != 2 {
		t.Errorf("metrics %s (%v): want RejectsRecorded 2 and VotesRejected 2", out.String(), err)
	}
}
