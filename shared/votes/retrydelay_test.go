package votes

import (
	"math/rand/v2"
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

func TestRetryLate(t *testing.T) {
	r := Retry{Most: 360 * time.Second, MaxReceives: 20}
	for _, tt := range []struct {
		name     string
		receives int
		age      time.Duration
		ahead    int
		rate     float64
		want     time.Duration
	}{
		{"the first late vote at 10/s: the shortest wait", 1, 0, 0, 10, MinRetryDelay},
		{"the 100th at 10/s", 1, 0, 99, 10, 10 * time.Second},
		{"the 1,000th at 2/s: the visibility timeout", 1, 0, 999, 2, 360 * time.Second},
		{"nothing written: RetryDelay", 3, 0, 0, 0, 40 * time.Second},
		// 60 min − 10 min − (20 − 12) × 6 min = 2 min at least.
		{"the 12th delivery, 10 minutes old: the budget's floor", 12, 10 * time.Minute, 0, 10, 120 * time.Second},
		{"the last delivery: the visibility timeout", 20, 0, 0, 10, 360 * time.Second},
	} {
		if got := r.Late(tt.receives, tt.age, tt.ahead, tt.rate); got != tt.want {
			t.Errorf("%s: Late(%d, %s, %d, %g) = %s, want %s", tt.name, tt.receives, tt.age, tt.ahead, tt.rate, got, tt.want)
		}
	}
}

// However short the store's answers make each wait, a vote given back on
// every delivery stays deliverable for the budget: its waits until the
// delivery after MaxReceives (the dead-letter queue) add up to at least
// RetryBudget, when MaxReceives × Most can hold it.
func TestRetryKeepsTheBudget(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, r := range []Retry{
		{Most: 360 * time.Second, MaxReceives: 20},
		{Most: 360 * time.Second, MaxReceives: 10},
		{Most: 30 * time.Minute, MaxReceives: 2},
		{Most: 60 * time.Second, MaxReceives: 1000},
	} {
		for range 200 {
			var age time.Duration
			for receives := 1; receives <= r.MaxReceives; receives++ {
				if rnd.IntN(4) == 0 {
					age += r.Failed(receives, age)
				} else {
					age += r.Late(receives, age, rnd.IntN(1000), 1+rnd.Float64()*1000)
				}
			}
			if age < RetryBudget {
				t.Fatalf("%+v: lost after %s, want at least %s", r, age, RetryBudget)
			}
		}
	}
}
