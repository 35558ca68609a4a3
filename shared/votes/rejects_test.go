package votes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// memRecorder is an in-memory RejectRecorder keyed as the store is: by
// message id and sent time.
type memRecorder struct {
	recorded map[[2]string]Rejected
	fail     bool
}

var _ RejectRecorder = (*memRecorder)(nil)

func (m *memRecorder) RecordRejects(_ context.Context, rs []Rejected) error {
	if m.fail {
		return errors.New("counters table unavailable")
	}
	if m.recorded == nil {
		m.recorded = map[[2]string]Rejected{}
	}
	for _, r := range rs {
		m.recorded[[2]string{r.MessageID, r.SentAt.String()}] = r
	}
	return nil
}

func (m *memRecorder) ids() []string {
	var ids []string
	for _, r := range m.recorded {
		ids = append(ids, r.MessageID+":"+r.PollID+":"+string(r.Reason))
	}
	slices.Sort(ids)
	return ids
}

// failingPolls is a store whose poll lookups fail.
type failingPolls struct{ *memStore }

func (failingPolls) Polls(context.Context, []string) (map[string]Poll, error) {
	return nil, errors.New("poll lookup throttled")
}

func rejectBatch() []Message {
	sent := time.Date(2026, 11, 21, 10, 0, 1, 0, time.UTC)
	m := func(id string, body []byte) Message { return Message{ID: id, SentAt: sent, Body: body} }
	return []Message{
		m("ok", vote("v1", "p", "a", "u1")),
		m("late-cast", voteAt("v2", "p", "a", "u2", "2099-01-01T00:00:00Z")),
		m("option", vote("v3", "p", "zzz", "u3")),
		m("missing", []byte(`{"voteId":"v4","pollId":"p","optionId":"a"}`)),
		m("trailing", append(vote("v5", "p", "a", "u5"), " {}"...)),
		m("not-utf8", []byte("{\"voteId\":\"v6\",\"pollId\":\"p\",\"optionId\":\"a\",\"voterId\":\"\xff\"}")),
		m("garbage", []byte("garbage")),
		m("no-poll", vote("v7", "nope", "a", "u7")),
		m("odd-poll", []byte(`{"voteId":"v8","pollId":"p#0","optionId":"a"}`)),
		m("null-poll", []byte(`{"voteId":"v9","pollId":null}`)),
	}
}

func TestCountRecordsRejectsOfExistingPolls(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a", "b"}, Shards: 4})
	rej, rec := &memRejects{}, &memRecorder{}
	c := newCounter(store, rej)
	c.Record = rec
	res := c.Count(context.Background(), rejectBatch())
	want := []string{"late-cast:p:cast-at-in-future", "missing:p:missing-field", "not-utf8:p:invalid-utf8",
		"option:p:unknown-option", "trailing:p:malformed-json"}
	if got := rec.ids(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if res.Recorded != 5 || res.Accepted != 1 || len(res.Failed) != 0 || len(rej.got) != 9 {
		t.Errorf("result %+v, %d on the rejects queue; want 5 recorded, 1 accepted, 9 on the queue", res, len(rej.got))
	}
	r := rec.recorded[[2]string{"option", "2026-11-21 10:00:01 +0000 UTC"}]
	if r.VoteID != "v3" || r.OptionID != "zzz" || r.SentAt.IsZero() {
		t.Errorf("the unknown option's record %+v: want its vote, option and sent time", r)
	}
	// The whole batch again: the same records, nothing more.
	c.Count(context.Background(), rejectBatch())
	if len(rec.recorded) != 5 {
		t.Errorf("after a redelivery %d records, want 5", len(rec.recorded))
	}
}

func TestCountGivesBackRejectsNotRecorded(t *testing.T) {
	tests := []struct {
		name      string
		store     Store
		recorder  *memRecorder
		wantBack  []string
		wantQueue int
	}{
		{"record fails", newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1}), &memRecorder{fail: true},
			[]string{"late-cast", "missing", "not-utf8", "option", "trailing"}, 4},
		{"poll lookup fails", failingPolls{newMem()}, &memRecorder{},
			[]string{"late-cast", "missing", "no-poll", "not-utf8", "ok", "option", "trailing"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rej := &memRejects{}
			c := newCounter(tt.store, rej)
			c.Record = tt.recorder
			res := c.Count(context.Background(), rejectBatch())
			if fmt.Sprint(res.Failed) != fmt.Sprint(tt.wantBack) {
				t.Errorf("given back %v, want %v", res.Failed, tt.wantBack)
			}
			if len(rej.got) != tt.wantQueue || res.Recorded != 0 {
				t.Errorf("%d on the rejects queue, %d recorded; want %d and 0", len(rej.got), res.Recorded, tt.wantQueue)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	tests := []struct {
		name, body, poll, vote, option string
	}{
		{"vote", `{"pollId":"p","voteId":"v","optionId":"o"}`, "p", "v", "o"},
		{"trailing data", `{"pollId":"p"} junk`, "p", "", ""},
		{"not an object", `["p"]`, "", "", ""},
		{"number", `{"pollId":7}`, "", "", ""},
		{"hash", `{"pollId":"a#b","voteId":"v"}`, "", "v", ""},
		{"control character", `{"pollId":"a\u0001"}`, "", "", ""},
		{"too long", `{"pollId":"` + strings.Repeat("p", 129) + `"}`, "", "", ""},
		{"invalid UTF-8 in the id", "{\"pollId\":\"p\xff\"}", "", "", ""},
		{"invalid UTF-8 elsewhere", "{\"pollId\":\"p\",\"x\":\"\xff\"}", "p", "", ""},
		{"last of a repeated key", `{"pollId":"a","pollId":"b"}`, "b", "", ""},
		{"cut short", `{"voteId":"v","pollId":"p","optionId":"o","castAt":"2026-`, "p", "v", "o"},
		{"a bad value after the poll", `{"pollId":"p","voteId":"v","optionId":tru}`, "p", "v", ""},
		{"the poll after the break", `{"voteId":"v",,"pollId":"p"}`, "", "v", ""},
		{"a key that is not a string", `{"pollId":"p",7:"x","voteId":"v"}`, "p", "", ""},
		{"not JSON", `pollId=p`, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, v, o := named([]byte(tt.body))
			if p != tt.poll || v != tt.vote || o != tt.option {
				t.Errorf("named(%q) = %q, %q, %q; want %q, %q, %q", tt.body, p, v, o, tt.poll, tt.vote, tt.option)
			}
		})
	}
}

func TestRejectRecordExcerpt(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantText   int // bytes of excerpt
		wantBinary int // bytes of excerptBase64
	}{
		{"short", `{"a":1}`, 7, 0},
		{"huge", strings.Repeat("x", 1<<20), MaxRejectExcerpt, 0},
		{"cut before a character", strings.Repeat("x", MaxRejectExcerpt-1) + "é", MaxRejectExcerpt - 1, 0},
		{"not UTF-8", strings.Repeat("\xff", 2000), 0, MaxRejectExcerpt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rejected{MessageID: "m", Body: []byte(tt.body), Reason: ReasonTooLarge, Detail: strings.Repeat("d", 5000)}.Record()
			if len(r.Excerpt) != tt.wantText || len(r.ExcerptBase64) != tt.wantBinary || r.BodySize != len(tt.body) || len(r.Detail) != MaxRejectDetail {
				t.Errorf("excerpt %d bytes, binary %d, size %d, detail %d; want %d, %d, %d, %d",
					len(r.Excerpt), len(r.ExcerptBase64), r.BodySize, len(r.Detail), tt.wantText, tt.wantBinary, len(tt.body), MaxRejectDetail)
			}
		})
	}
}
