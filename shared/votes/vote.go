// Package votes is the counting domain: what a vote is, which votes a poll
// accepts and which months take votes (the fence), how the counter writes
// each valid vote once into its month's ledger, and how the tally folds the
// ledger's stream into write-sharded counters so that each vote is counted
// exactly once. It imports no AWS package; the stores it needs are
// small interfaces implemented by adapters (votesddb, votessqs).
package votes

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/platform/refusal"
)

// Limits of the public message contract (schemas/vote.schema.json).
const (
	MaxIDLength   = 128       // voteId, pollId, optionId, voterId
	MaxBodyBytes  = 16 << 10  // a vote is ~150 bytes; anything near this is not a vote
	MaxClockSkew  = time.Hour // castAt may be this far in the future (producer clocks drift)
	castAtPattern = time.RFC3339Nano
)

// Vote is one vote as producers send it.
type Vote struct {
	VoteID   string    `json:"voteId"`
	PollID   string    `json:"pollId"`
	OptionID string    `json:"optionId"`
	VoterID  string    `json:"voterId"`
	CastAt   time.Time `json:"castAt"`
}

// Reason says why a vote was rejected. The values are stable: they appear in
// the rejects queue, in metrics and in docs/producers.md.
type Reason string

// Reject reasons.
const (
	ReasonTooLarge       Reason = "too-large"
	ReasonInvalidUTF8    Reason = "invalid-utf8"
	ReasonMalformedJSON  Reason = "malformed-json"
	ReasonMissingField   Reason = "missing-field"
	ReasonWrongType      Reason = "wrong-type"
	ReasonEmptyID        Reason = "empty-id"
	ReasonIDTooLong      Reason = "id-too-long"
	ReasonBadID          Reason = "bad-id"
	ReasonBadCastAt      Reason = "bad-cast-at"
	ReasonFutureCastAt   Reason = "cast-at-in-future"
	ReasonUnknownPoll    Reason = "unknown-poll"
	ReasonUnknownOption  Reason = "unknown-option"
	ReasonPollNotOpen    Reason = "poll-not-open"
	ReasonPollClosed     Reason = "poll-closed"
	ReasonDuplicateVoter Reason = "duplicate-voter"
	ReasonMonthClosed    Reason = "month-closed"
)

// ErrRejected is matched by every *RejectError with errors.Is.
var ErrRejected = errors.New("votes: rejected")

// Refused is ErrRejected: errors.Is(err, ErrRejected) holds for every
// *RejectError.
func (Reason) Refused() error { return ErrRejected }

// RejectError is a vote that must not be counted, with its reason.
type RejectError = refusal.Error[Reason]

var reject = refusal.New[Reason]

// ReasonOf returns the reject reason of err, or "" if err is not a rejection.
func ReasonOf(err error) Reason { return refusal.ReasonOf[Reason](err) }

// Parse reads a vote message and checks its own fields (not the poll).
// Unknown fields are ignored. now is for the clock-skew check on castAt.
func Parse(body []byte, now time.Time) (Vote, error) {
	if len(body) > MaxBodyBytes {
		return Vote{}, reject(ReasonTooLarge, "body is %d bytes, the limit is %d", len(body), MaxBodyBytes)
	}
	if !utf8.Valid(body) {
		return Vote{}, reject(ReasonInvalidUTF8, "body is not valid UTF-8")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return Vote{}, reject(ReasonMalformedJSON, "body is not a JSON object: %v", err)
	}
	if dec.More() {
		return Vote{}, reject(ReasonMalformedJSON, "body has data after the JSON object")
	}
	var v Vote
	fields := []struct {
		name string
		dst  *string
	}{{"voteId", &v.VoteID}, {"pollId", &v.PollID}, {"optionId", &v.OptionID}, {"voterId", &v.VoterID}}
	for _, f := range fields {
		s, err := stringField(raw, f.name)
		if err != nil {
			return Vote{}, err
		}
		if err := checkID(f.name, s); err != nil {
			return Vote{}, err
		}
		*f.dst = s
	}
	cast, err := stringField(raw, "castAt")
	if err != nil {
		return Vote{}, err
	}
	t, err := time.Parse(castAtPattern, cast)
	if err != nil {
		return Vote{}, reject(ReasonBadCastAt, "castAt %q is not an RFC 3339 time", truncate(cast, 64))
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		// "0000-01-01T00:00:00+01:00" is year -1 in UTC: no ledger month.
		return Vote{}, reject(ReasonBadCastAt, "castAt %q is outside the years 0001 to 9999 in UTC", truncate(cast, 64))
	}
	if t.After(now.Add(MaxClockSkew)) {
		return Vote{}, reject(ReasonFutureCastAt, "castAt %s is more than %s in the future", t.UTC().Format(time.RFC3339), MaxClockSkew)
	}
	v.CastAt = t.UTC()
	return v, nil
}

func stringField(raw map[string]json.RawMessage, name string) (string, error) {
	r, ok := raw[name]
	if !ok || string(r) == "null" {
		return "", reject(ReasonMissingField, "%s is missing", name)
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		return "", reject(ReasonWrongType, "%s must be a string, got %s", name, truncate(string(r), 32))
	}
	return s, nil
}

// checkID enforces the id rules: 1–128 characters, printable, no '#'
// (the key separator of the stores).
func checkID(name, s string) error {
	switch {
	case s == "":
		return reject(ReasonEmptyID, "%s is empty", name)
	case len(s) > MaxIDLength:
		return reject(ReasonIDTooLong, "%s is %d bytes, the limit is %d", name, len(s), MaxIDLength)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '#' {
			return reject(ReasonBadID, "%s contains %q (control characters and '#' are not allowed)", name, r)
		}
	}
	return nil
}

// ValidID reports whether s is usable as a poll, option, vote or voter id.
func ValidID(s string) error { return checkID("id", s) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
