package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

func TestDelayDoublesWithinItsCap(t *testing.T) {
	b := retry.Backoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	tests := []struct {
		n    int
		step time.Duration
	}{
		{0, 10 * time.Millisecond}, {1, 10 * time.Millisecond}, {2, 20 * time.Millisecond},
		{3, 40 * time.Millisecond}, {4, 80 * time.Millisecond}, {5, 80 * time.Millisecond}, {1000, 80 * time.Millisecond},
	}
	for _, tt := range tests {
		for range 200 {
			if got := b.Delay(tt.n); got < tt.step/2 || got > tt.step {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", tt.n, got, tt.step/2, tt.step)
			}
		}
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
