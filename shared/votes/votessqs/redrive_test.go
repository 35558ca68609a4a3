package votessqs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Redrive moves every message once, whatever fails on the way: a message
// whose hold ends within the run (instantHold) is retried there; one whose
// hold outlasts it stays on the source, counted as failed, with an error.
func TestRedrive(t *testing.T) {
	for _, tc := range []struct {
		name        string
		instantHold bool
		fail        func(string, int) (map[string]bool, error)
		want        RedriveResult
		wantErr     bool
	}{
		{name: "no failure", want: RedriveResult{Moved: 25}},
		{name: "a send fails, retried in the run", instantHold: true, fail: failOn("SendMessageBatch", 2, errInjected),
			want: RedriveResult{Moved: 25, Retries: 1}},
		{name: "a send fails, left on the source", fail: failOn("SendMessageBatch", 2, errInjected),
			want: RedriveResult{Moved: 15, Failed: 10, Retries: 1}, wantErr: true},
		{name: "an entry refused, left on the source", fail: failOn("SendMessageBatch", 1, nil, "3"),
			want: RedriveResult{Moved: 24, Failed: 1, Retries: 1}, wantErr: true},
		{name: "a delete fails, deleted when it comes back", instantHold: true, fail: failOn("DeleteMessageBatch", 1, errInjected),
			want: RedriveResult{Moved: 25, Retries: 1}},
		{name: "a delete fails, left undeleted", fail: failOn("DeleteMessageBatch", 1, nil, "0", "4"),
			want: RedriveResult{Moved: 23, Undeleted: 2, Retries: 1}, wantErr: true},
		{name: "a receive fails", fail: failOn("ReceiveMessage", 2, errInjected),
			want: RedriveResult{Moved: 10}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newMemSQS(t, dlqURL, votesURL)
			q.put(dlqURL, reasonAttr("kept"), votesJSON(25)...)
			q.instantHold, q.fail = tc.instantHold, tc.fail
			var progress []RedriveResult
			got, err := Redrive(t.Context(), q, dlqURL, votesURL, RedriveOptions{Progress: func(r RedriveResult) { progress = append(progress, r) }})
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "votessqs: ") {
				t.Errorf("error %q lacks the package's prefix", err)
			}
			if len(progress) == 0 || progress[len(progress)-1].Moved != got.Moved {
				t.Errorf("progress %+v, want the last at %d moved", progress, got.Moved)
			}
			checkMovedOnce(t, q, 25, got.Moved, got.Undeleted)
		})
	}
}

// checkMovedOnce: the destination holds each body once, with its
// attributes; together with the source, every body of the n.
func checkMovedOnce(t *testing.T, q *memSQS, n, moved, undeleted int) {
	t.Helper()
	dst, src := q.bodies(votesURL), q.bodies(dlqURL)
	if len(dst) != moved+undeleted || len(src) != n-moved {
		t.Errorf("%d on the destination, %d left on the source; want %d, %d", len(dst), len(src), moved+undeleted, n-moved)
	}
	all := slices.Concat(dst, src)
	slices.Sort(all)
	if distinct := slices.Compact(all); !slices.Equal(distinct, sorted(votesJSON(n))) {
		t.Errorf("bodies on either queue: %d distinct, want the %d sent", len(distinct), n)
	}
	for _, m := range q.queues[votesURL] {
		if aws.ToString(m.attrs[ReasonAttribute].StringValue) != "kept" {
			t.Errorf("message %s lost its attributes: %v", m.id, m.attrs)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// A message that fails every attempt is left on the source; a run with
// Max moves that many.
func TestRedriveBounds(t *testing.T) {
	q := newMemSQS(t, dlqURL, votesURL)
	q.put(dlqURL, nil, votesJSON(25)...)
	q.instantHold = true
	q.fail = func(m string, _ int) (map[string]bool, error) {
		if m == "SendMessageBatch" {
			return map[string]bool{"0": true}, nil // the first of each batch
		}
		return nil, nil
	}
	got, err := Redrive(t.Context(), q, dlqURL, votesURL, RedriveOptions{Max: 12, Attempts: 2})
	// The first message fails twice, and is left: 11 moved, and the run
	// ends when a receive brings only it.
	if got.Moved != 11 || got.Failed != 1 || err == nil {
		t.Errorf("Max 12: %+v, %v; want 11 moved, 1 failed, an error", got, err)
	}
	if left := len(q.bodies(dlqURL)); left != 14 {
		t.Errorf("%d left on the source, want 14", left)
	}
	for _, method := range []string{"SendMessageBatch", "DeleteMessageBatch"} {
		q.fail = func(m string, _ int) (map[string]bool, error) {
			if m == method {
				return map[string]bool{"0": true, "1": true, "2": true}, nil
			}
			return nil, nil
		}
		before := q.calls[method]
		got, err = Redrive(t.Context(), q, dlqURL, votesURL, RedriveOptions{Attempts: 2})
		if got.Failed+got.Undeleted == 0 || err == nil || q.calls[method]-before > 20 {
			t.Errorf("%s always refused: %+v, %v after %d calls; want failures, an error, and an end", method, got, err, q.calls[method]-before)
		}
	}
}

// Batches hold at most MaxBatchBytes: big messages go fewer at a time.
func TestRedriveBatchesBySize(t *testing.T) {
	q := newMemSQS(t, dlqURL, votesURL)
	big := make([]string, 10)
	for i := range big {
		big[i] = fmt.Sprintf("%03d%s", i, strings.Repeat("x", 100<<10))
	}
	q.put(dlqURL, nil, big...)
	got, err := Redrive(t.Context(), q, dlqURL, votesURL, RedriveOptions{})
	if err != nil || got.Moved != 10 {
		t.Fatalf("got %+v, %v", got, err)
	}
	for i, entries := range q.sends {
		if len(entries) > 2 {
			t.Errorf("send %d: %d entries of 100 KiB", i+1, len(entries))
		}
	}
}

func TestRedriveRefuses(t *testing.T) {
	q := newMemSQS(t, dlqURL, votesURL)
	for _, tc := range []struct {
		name     string
		from, to string
		o        RedriveOptions
	}{
		{"to itself", dlqURL, dlqURL, RedriveOptions{}},
		{"negative max", dlqURL, votesURL, RedriveOptions{Max: -1}},
		{"hold too long", dlqURL, votesURL, RedriveOptions{Hold: 13 * time.Hour}},
	} {
		if _, err := Redrive(t.Context(), q, tc.from, tc.to, tc.o); err == nil || !strings.HasPrefix(err.Error(), "votessqs: ") {
			t.Errorf("%s: %v, want refused", tc.name, err)
		}
	}
	if len(q.calls) != 0 {
		t.Errorf("calls %v, want none", q.calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	q.put(dlqURL, nil, votesJSON(3)...)
	if got, err := Redrive(ctx, q, dlqURL, votesURL, RedriveOptions{}); !errors.Is(err, context.Canceled) || got.Moved != 0 {
		t.Errorf("cancelled: %+v, %v", got, err)
	}
}
