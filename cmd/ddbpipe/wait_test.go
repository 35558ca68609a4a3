package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestWaitSettled: -wait returns only when two checks a settle apart found
// nothing behind, with nothing behind between them; it gives up at the
// limit only while something is behind.
func TestWaitSettled(t *testing.T) {
	const settle = 30 * time.Millisecond
	broken := errors.New("the queue's attributes: access denied")
	for _, tc := range []struct {
		name    string
		answers []string // "" caught up; "!" the check fails
		limit   time.Duration
		calls   int    // checks made before it returned
		err     string // in the error, "" for none
	}{
		{name: "caught up at once", answers: []string{"", ""}, limit: time.Minute, calls: 2},
		{name: "behind, then caught up", answers: []string{"3 votes still in the votes queue", "", ""}, limit: time.Minute, calls: 3},
		{name: "a record shows after the first clear check", answers: []string{"", "1 stream records of ledger not counted yet", "", ""}, limit: time.Minute, calls: 4},
		{name: "confirmed past a short limit", answers: []string{"", ""}, limit: time.Nanosecond, calls: 2},
		{name: "never caught up", answers: []string{"2 votes still in the votes queue"}, limit: 600 * time.Millisecond, err: "waited 600ms: 2 votes still in the votes queue"},
		{name: "a check fails", answers: []string{"", "!"}, limit: time.Minute, calls: 2, err: broken.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var at []time.Time
			check := func() (string, error) {
				at = append(at, time.Now())
				a := tc.answers[min(len(at), len(tc.answers))-1]
				if a == "!" {
					return "", broken
				}
				return a, nil
			}
			err := waitSettled(context.Background(), check, tc.limit, settle, io.Discard)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if tc.calls > 0 && len(at) != tc.calls {
				t.Errorf("%d checks, want %d", len(at), tc.calls)
			}
			if err == nil {
				// The two last checks found nothing behind, a settle apart.
				if gap := at[len(at)-1].Sub(at[len(at)-2]); gap < settle {
					t.Errorf("confirmed %s after the first clear check, want ≥ %s", gap, settle)
				}
			}
		})
	}
}

// TestWaitSettledStopsWithItsContext: a cancelled command stops waiting.
func TestWaitSettledStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := waitSettled(ctx, func() (string, error) {
		if calls++; calls == 2 {
			cancel()
		}
		return "1 votes still in the votes queue", nil
	}, time.Hour, time.Second, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
