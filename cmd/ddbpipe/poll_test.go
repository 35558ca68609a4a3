package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPollUntil(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := pollUntil(ctx, time.Minute, func(bool) (bool, error) { calls++; return calls == 3, nil })
	if err != nil || calls != 3 {
		t.Errorf("done on the third try: %d calls, %v", calls, err)
	}
	boom := errors.New("boom")
	calls = 0
	if err := pollUntil(ctx, time.Minute, func(bool) (bool, error) { calls++; return false, boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("a failed try: %d calls, %v; want it at once", calls, err)
	}
	lastSeen := false
	calls = 0
	err = pollUntil(ctx, 250*time.Millisecond, func(last bool) (bool, error) { calls++; lastSeen = last; return false, nil })
	if err != nil || !lastSeen || calls < 2 {
		t.Errorf("never done: %d calls, last %v, %v; want tries until a last one at the deadline", calls, lastSeen, err)
	}
}
