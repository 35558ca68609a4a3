package votes

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A new poll's id is one URL path segment: no '/' or '\', not "." or ".."
// alone; control characters and '#' stay refused.
func TestPollValidateIDIsOnePathSegment(t *testing.T) {
	tests := []struct {
		name string
		id   string
		rule string // in the error; "" means valid
	}{
		{"plain", "ok-id", ""},
		{"dot inside", "a.b", ""},
		{"three dots", "...", ""},
		{"dot prefix", ".hidden", ""},
		{"dot-dot prefix without a slash", "..x", ""},
		{"percent and question mark", "50%?", ""},
		{"traversal", "../x", "one URL path segment"},
		{"slash", "a/b", "one URL path segment"},
		{"trailing slash", "a/", "one URL path segment"},
		{"slash alone", "/", "one URL path segment"},
		{"dot-dot", "..", "one URL path segment"},
		{"dot", ".", "one URL path segment"},
		{"backslash", `a\b`, "one URL path segment"},
		{"backslash traversal", `..\x`, "one URL path segment"},
		{"hash", "a#b", "'#' are not allowed"},
		{"control character", "a\x7fb", "control characters"},
		{"empty", "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Poll{ID: tt.id, Options: []string{"a"}, Shards: 1}.Validate()
			if tt.rule == "" {
				if err != nil {
					t.Errorf("Validate(%q) = %v, want nil", tt.id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.rule) {
				t.Fatalf("Validate(%q) = %v, want an error naming %q", tt.id, err, tt.rule)
			}
			if !errors.Is(err, ErrRejected) {
				t.Errorf("Validate(%q) = %v, want a rejection with its reason", tt.id, err)
			}
		})
	}
}

// Polls created before the path-segment rule keep working: their votes
// parse and are accepted (the rule is only in Validate).
func TestPollLegacyIDsStillTakeVotes(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{"a/b", "../x", "..", ".", `a\b`} {
		t.Run(id, func(t *testing.T) {
			body := fmt.Sprintf(`{"voteId":"v1","pollId":%q,"optionId":"a","voterId":"u1","castAt":"2026-11-23T12:00:00Z"}`, id)
			v, err := Parse([]byte(body), at)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if v.PollID != id {
				t.Errorf("pollId %q, want %q", v.PollID, id)
			}
			p := Poll{ID: id, Options: []string{"a"}, Shards: 1, CreatedAt: at.Add(-24 * time.Hour)}
			if err := p.Accepts(v); err != nil {
				t.Errorf("Accepts: %v", err)
			}
		})
	}
}

// A vote cast before its poll was created, by more than the allowed clock
// skew, is rejected as poll-not-open; a poll with no createdAt (created
// before it was recorded) skips the check.
func TestPollAcceptsEarlyVotes(t *testing.T) {
	created := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		created time.Time
		opens   time.Time
		castAt  time.Time
		want    Reason
	}{
		{"1970", created, time.Time{}, time.Unix(0, 0).UTC(), ReasonPollNotOpen},
		{"year 1", created, time.Time{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), ReasonPollNotOpen},
		{"2 years before creation", created, time.Time{}, created.AddDate(-2, 0, 0), ReasonPollNotOpen},
		{"just past the skew", created, time.Time{}, created.Add(-MaxClockSkew - time.Second), ReasonPollNotOpen},
		{"at the skew", created, time.Time{}, created.Add(-MaxClockSkew), ""},
		{"30 min before creation (within the skew)", created, time.Time{}, created.Add(-30 * time.Minute), ""},
		{"at creation", created, time.Time{}, created, ""},
		{"after creation", created, time.Time{}, created.Add(time.Hour), ""},
		{"no createdAt: 1970", time.Time{}, time.Time{}, time.Unix(0, 0).UTC(), ""},
		{"no createdAt: year 1", time.Time{}, time.Time{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"opensAt before creation: vote between", created, created.AddDate(0, -1, 0), created.AddDate(0, 0, -7), ReasonPollNotOpen},
		{"opensAt after creation: vote before opening", created, created.Add(48 * time.Hour), created.Add(24 * time.Hour), ReasonPollNotOpen},
		{"opensAt after creation: vote after opening", created, created.Add(48 * time.Hour), created.Add(72 * time.Hour), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Poll{ID: "p", Options: []string{"a"}, Shards: 1, CreatedAt: tt.created, Opens: tt.opens}
			err := p.Accepts(Vote{VoteID: "v", PollID: "p", OptionID: "a", VoterID: "u", CastAt: tt.castAt})
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("got %q (%v), want %q", got, err, tt.want)
			}
			if tt.want == "" || !tt.opens.IsZero() {
				return
			}
			// The detail names both times.
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("%v is not a *RejectError", err)
			}
			for _, ts := range []time.Time{tt.created, tt.castAt} {
				if s := ts.Format(time.RFC3339); !strings.Contains(re.Detail, s) {
					t.Errorf("detail %q does not name %s", re.Detail, s)
				}
			}
		})
	}
}
