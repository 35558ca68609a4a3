package votes_test

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// FuzzParse: any body is a vote or a reject with a reason, never a panic;
// an accepted vote has valid ids, a UTC castAt not too far ahead, and reads
// back unchanged from its own JSON.
func FuzzParse(f *testing.F) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, seed := range []string{
		`{"voteId":"v1","pollId":"p","optionId":"a","voterId":"u","castAt":"2026-11-23T11:59:00Z"}`,
		`{"voteId":"v1","pollId":"p","optionId":"a","voterId":"u","castAt":"2026-11-23T11:59:00.123456789+01:00","extra":[1,2]}`,
		`{"voteId":"","pollId":"p"}`, `{"voteId":1}`, `[]`, `{}`, `{"voteId":"v"}{}`, "\xff", `{"castAt":"2999-01-01T00:00:00Z"}`,
		`{"voteId":"../../etc","pollId":"p#1","optionId":"a\u0000","voterId":"u","castAt":"now"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := votes.Parse(body, now)
		if err != nil {
			if votes.ReasonOf(err) == "" {
				t.Fatalf("rejected without a reason: %v", err)
			}
			return
		}
		for _, id := range []string{v.VoteID, v.PollID, v.OptionID, v.VoterID} {
			if err := votes.ValidID(id); err != nil || !utf8.ValidString(id) {
				t.Fatalf("accepted an invalid id %q: %v", id, err)
			}
		}
		if v.CastAt.Location() != time.UTC || v.CastAt.After(now.Add(votes.MaxClockSkew)) {
			t.Fatalf("accepted castAt %v", v.CastAt)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := votes.Parse(again, now)
		if err != nil || back.VoteID != v.VoteID || back.PollID != v.PollID || back.OptionID != v.OptionID ||
			back.VoterID != v.VoterID || !back.CastAt.Equal(v.CastAt) {
			t.Fatalf("%s read back as %+v, %v; want %+v", again, back, err, v)
		}
	})
}
