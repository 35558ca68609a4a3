package main

import (
	"strings"
	"testing"
	"time"
)

func TestLocalClockOffsets(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		arg     string
		current time.Duration
		want    time.Duration
		err     string
	}{
		{"now", 5 * time.Hour, 0, ""},
		{"+36h", time.Hour, 37 * time.Hour, ""},
		{"-90m", 0, -90 * time.Minute, ""},
		{"+3d", 0, 72 * time.Hour, ""},
		{"2026-12-04T02:00:00Z", 9 * time.Hour, 6*24*time.Hour + 4*time.Hour, ""},
		{"2026-12-01", 0, 3*24*time.Hour + 2*time.Hour, ""},
		{"month-end", 0, 3*24*time.Hour + 2*time.Hour, ""},
		{"month-end+50h", 0, 5*24*time.Hour + 4*time.Hour, ""},
		{"month-end+2d", 5 * 24 * time.Hour, 3*24*time.Hour + 2*time.Hour + 31*24*time.Hour + 2*24*time.Hour, ""}, // the clock is in December
		{"month-end50h", 0, 0, "want month-end or month-end+DURATION"},
		{"+3x", 0, 0, "want a duration"},
		{"+xd", 0, 0, "whole number of days"},
		{"tomorrow", 0, 0, "want an RFC 3339 time"},
	} {
		got, err := newOffset(tt.arg, tt.current, now)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want an error with %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s from %s: %s, %v; want %s", tt.arg, tt.current, got, err, tt.want)
		}
	}
}
