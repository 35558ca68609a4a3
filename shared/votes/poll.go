package votes

import (
	"fmt"
	"strings"
	"time"
)

// Poll limits.
const (
	MaxOptions = 100
	MaxShards  = 1000
)

// Poll is what a vote is checked against: its options, its write shards, its
// counting mode and its open window.
type Poll struct {
	ID      string   `json:"pollId"`
	Options []string `json:"options"`
	// Shards is N: each counter increment goes to one of N shard items
	// chosen at random, so no key takes more than about 1/N of the writes.
	Shards int `json:"shards"`
	// OneVotePerVoter keys the ledger by (poll, voter): a second vote by
	// the same voter is rejected as duplicate-voter.
	OneVotePerVoter bool      `json:"oneVotePerVoter"`
	Opens           time.Time `json:"opensAt,omitzero"`  // zero: open from creation
	Closes          time.Time `json:"closesAt,omitzero"` // zero: never closes
	CreatedAt       time.Time `json:"createdAt,omitzero"`
}

// Validate checks a poll before it is created. Only new polls are checked:
// a poll created before a rule was added keeps its id, and its votes and
// results keep working. Its errors are *PollError.
func (p Poll) Validate() error {
	if err := checkID("pollId", p.ID); err != nil {
		return &PollError{Detail: "poll", Err: err}
	}
	if err := checkPathSegment("pollId", p.ID); err != nil {
		return &PollError{Detail: "poll", Err: err}
	}
	if len(p.Options) == 0 || len(p.Options) > MaxOptions {
		return pollError("poll %s: needs 1 to %d options, got %d", p.ID, MaxOptions, len(p.Options))
	}
	seen := map[string]bool{}
	for _, o := range p.Options {
		if err := checkID("optionId", o); err != nil {
			return &PollError{Detail: "poll " + p.ID, Err: err}
		}
		if seen[o] {
			return pollError("poll %s: option %q is listed twice", p.ID, o)
		}
		seen[o] = true
	}
	if p.Shards < 1 || p.Shards > MaxShards {
		return pollError("poll %s: shards must be 1 to %d, got %d", p.ID, MaxShards, p.Shards)
	}
	if !p.Opens.IsZero() && !p.Closes.IsZero() && !p.Closes.After(p.Opens) {
		return pollError("poll %s: closesAt %s is not after opensAt %s", p.ID, p.Closes.Format(time.RFC3339), p.Opens.Format(time.RFC3339))
	}
	return nil
}

// PollError is a poll Validate refuses: what is wrong with it, and the
// *RejectError when its id or an option's is refused.
type PollError struct {
	Detail string
	Err    error
}

func (e *PollError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("votes: %s: %v", e.Detail, e.Err)
	}
	return "votes: " + e.Detail
}

func (e *PollError) Unwrap() error { return e.Err }

func pollError(format string, args ...any) *PollError {
	return &PollError{Detail: fmt.Sprintf(format, args...)}
}

// checkPathSegment enforces the rules of one URL path segment, so that a
// poll's id can be its path in /polls/{id}: no '/' or '\' (which some
// clients and proxies read as '/'), and not "." or ".." alone (which clients
// resolve away). checkID has already refused control characters and '#'.
func checkPathSegment(name, s string) error {
	if s == "." || s == ".." {
		return reject(ReasonBadID, "%s %q is a dot segment: a poll id is one URL path segment, and \".\" or \"..\" alone is not allowed", name, s)
	}
	if i := strings.IndexAny(s, `/\`); i >= 0 {
		return reject(ReasonBadID, "%s %q contains %q: a poll id is one URL path segment, and '/' and '\\' are not allowed", name, s, s[i])
	}
	return nil
}

// optionList names the poll's first n options, and how many more there are.
func (p Poll) optionList(n int) string {
	if len(p.Options) <= n {
		return strings.Join(p.Options, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(p.Options[:n], ", "), len(p.Options)-n)
}

// HasOption reports whether o is one of the poll's options.
func (p Poll) HasOption(o string) bool {
	for _, x := range p.Options {
		if x == o {
			return true
		}
	}
	return false
}

// Accepts checks a parsed vote against the poll: option and window (by the
// vote's castAt, so a vote cast before closing that arrives late still counts).
// A vote cast before the poll existed, less MaxClockSkew for the producer's
// clock, is not open either; a poll with no CreatedAt (created before it was
// recorded) skips that check.
func (p Poll) Accepts(v Vote) error {
	if !p.HasOption(v.OptionID) {
		return reject(ReasonUnknownOption, "poll %s has no option %q; its options are %s", p.ID, v.OptionID, p.optionList(20))
	}
	if !p.Opens.IsZero() && v.CastAt.Before(p.Opens) {
		return reject(ReasonPollNotOpen, "poll %s opens at %s; vote cast at %s", p.ID, p.Opens.Format(time.RFC3339), v.CastAt.Format(time.RFC3339))
	}
	if !p.CreatedAt.IsZero() && v.CastAt.Before(p.CreatedAt.Add(-MaxClockSkew)) {
		return reject(ReasonPollNotOpen, "poll %s was created at %s; vote cast at %s, more than %s (the allowed clock skew) earlier",
			p.ID, p.CreatedAt.UTC().Format(time.RFC3339), v.CastAt.UTC().Format(time.RFC3339), MaxClockSkew)
	}
	if !p.Closes.IsZero() && !v.CastAt.Before(p.Closes) {
		return reject(ReasonPollClosed, "poll %s closed at %s; vote cast at %s", p.ID, p.Closes.Format(time.RFC3339), v.CastAt.Format(time.RFC3339))
	}
	return nil
}
