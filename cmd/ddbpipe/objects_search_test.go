package main

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "1024": 1024, "500KB": 500_000, "1MB": 1_000_000, "2GiB": 2 << 30, "3 mib": 3 << 20, "7B": 7} {
		if got, err := parseSize("-min-size", in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "1.5MB", "MB", "1TB", "99999999999GiB", "1e6"} {
		if got, err := parseSize("-min-size", in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-01":           time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"2026-11-02T03:04:05Z": time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"36h":                  now.Add(-36 * time.Hour),
	} {
		if got, err := parseSince("-since", in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-5d", "-1h", "2026-13-01"} {
		if _, err := parseSince("-since", in, now); err == nil {
			t.Errorf("parseSince(%q): want an error", in)
		}
	}
}
