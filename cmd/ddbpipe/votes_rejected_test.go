package main

import (
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

func TestRejectCounts(t *testing.T) {
	tests := []struct {
		name   string
		counts map[votes.Reason]int64
		want   string
	}{
		{"none", nil, "0 rejected"},
		{"one reason", map[votes.Reason]int64{votes.ReasonBadID: 2}, "2 rejected (bad-id 2)"},
		{"most first, then by name", map[votes.Reason]int64{votes.ReasonUnknownOption: 1, votes.ReasonBadCastAt: 1, votes.ReasonTooLarge: 5},
			"7 rejected (too-large 5, bad-cast-at 1, unknown-option 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rejectCounts(tt.counts); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A detail never reaches the terminal with its control characters.
func TestPrintableDetail(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"escape sequence", "a\x1b[2J", `a\x1b[2J`},
		{"quotes stay", `no option "hamster"`, `no option "hamster"`},
		{"backslash", `a\b`, `a\\b`},
		{"not UTF-8", "a\xff", `a\xff`},
		{"replacement character", "a\uFFFDb", "a\uFFFDb"},
		{"plain", "é ok", "é ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := printable(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
