package main

import (
	"math"
	"testing"
	"time"
)

// The votes due over any split of the load add up to the same total, and
// a producer's tick that comes after a whole burst has passed still owes
// that burst's votes.
func TestVotesDueKeepsTheBursts(t *testing.T) {
	s := &soak{cfg: Config{Duration: 30 * time.Second, Bursts: 2, BurstFor: time.Second},
		sizing: sizing{Ceiling: 100, Steady: 10, Burst: 200}}
	// Bursts at 10 s and 20 s, 1 s each: 30 s × 10 + 2 × 1 s × 190 more.
	want := 30*10.0 + 2*190.0
	tests := []struct {
		name  string
		ticks []time.Duration
	}{
		{"one tick", []time.Duration{30 * time.Second}},
		{"every 100 ms", nil},
		{"late across the first burst", []time.Duration{9500 * time.Millisecond, 11500 * time.Millisecond, 30 * time.Second}},
		{"inside the second burst", []time.Duration{20300 * time.Millisecond, 20700 * time.Millisecond, 30 * time.Second}},
	}
	for _, tt := range tests {
		ticks := tt.ticks
		if ticks == nil {
			for d := 100 * time.Millisecond; d <= 30*time.Second; d += 100 * time.Millisecond {
				ticks = append(ticks, d)
			}
		}
		var last time.Duration
		got := 0.0
		for _, d := range ticks {
			got += s.votesDue(last, d)
			last = d
		}
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: %g votes due, want %g", tt.name, got, want)
		}
	}
	if s.burstStart(0) != 10*time.Second || s.burstStart(1) != 20*time.Second {
		t.Errorf("bursts start at %v and %v, want 10s and 20s", s.burstStart(0), s.burstStart(1))
	}
	if (&soak{cfg: Config{Bursts: 2}}).burstStarts() != 0 {
		t.Error("a load of a fixed rate (no ceiling) has bursts")
	}
}
