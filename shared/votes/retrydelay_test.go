package votes

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	most := 360 * time.Second
	want := []time.Duration{10, 20, 40, 80, 160, 320, 360, 360}
	var budget time.Duration
	for i, w := range want {
		if got := RetryDelay(i+1, most); got != w*time.Second {
			t.Errorf("RetryDelay(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
	for r := 1; r <= 20; r++ {
		budget += RetryDelay(r, most)
	}
	// 20 receives: 10+20+…+320 = 630 s, then 14 × 360 s = 5,670 s.
	if budget != 5670*time.Second {
		t.Errorf("20 receives wait %s in all, want 1h34m30s", budget)
	}
	if got := RetryDelay(1, 5*time.Second); got != 5*time.Second {
		t.Errorf("a visibility timeout under the first delay: %s, want 5s", got)
	}
}
