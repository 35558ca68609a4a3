package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

func TestDelayDoublesWithinItsCap(t *testing.T) {
	steps := []struct {
		n    int
		step time.Duration
	}{
		{0, 10 * time.Millisecond}, {1, 10 * time.Millisecond}, {2, 20 * time.Millisecond},
		{3, 40 * time.Millisecond}, {4, 80 * time.Millisecond}, {5, 80 * time.Millisecond}, {1000, 80 * time.Millisecond},
	}
	for _, tt := range []struct {
		name   string
		jitter retry.Jitter
		lo     func(step time.Duration) time.Duration // the shortest pause a step allows
		spread bool                                   // pauses under half the step are drawn too
	}{
		{"equal jitter", retry.EqualJitter, func(s time.Duration) time.Duration { return s / 2 }, false},
		{"full jitter", retry.FullJitter, func(time.Duration) time.Duration { return 0 }, true},
		{"no jitter", retry.NoJitter, func(s time.Duration) time.Duration { return s }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := retry.Backoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond, Jitter: tt.jitter}
			for _, s := range steps {
				under := 0
				for range 200 {
					got := b.Delay(s.n)
					if got < tt.lo(s.step) || got > s.step {
						t.Fatalf("Delay(%d) = %v, want in [%v, %v]", s.n, got, tt.lo(s.step), s.step)
					}
					if got < s.step/2 {
						under++
					}
				}
				if tt.spread && under == 0 {
					t.Errorf("Delay(%d): 200 pauses, none under half the step %v", s.n, s.step)
				}
			}
		})
	}
	if got := (retry.Backoff{}).Delay(3); got != 0 {
		t.Errorf("zero Backoff: Delay = %v, want 0", got)
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retry.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := retry.Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	if err := (retry.Backoff{Base: time.Millisecond, Max: time.Millisecond}).Wait(context.Background(), 1); err != nil {
		t.Errorf("Wait = %v", err)
	}
}
