package voteslambda

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

// GET /polls/{id}/rejects answers a poll's rejects by reason and its
// latest records; results count them too; a bad limit is 400, an unknown
// or odd poll id 404, in the shared error shape.
func TestRejectsHTTP(t *testing.T) {
	db, table := countersTable(t)
	h := httpOn(db, table)
	if status, _, body := handle(t, h, request("POST /polls", "", `{"pollId":"r","options":["a"]}`)); status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	sent := time.Now().UTC().Add(-time.Minute)
	var rs []votes.Rejected
	for i := range 25 {
		rs = append(rs, votes.Rejected{MessageID: fmt.Sprint("m", i), SentAt: sent.Add(time.Duration(i) * time.Second), PollID: "r",
			Reason: votes.ReasonUnknownOption, Detail: "no option", Body: []byte(`{"pollId":"r","x":"` + strings.Repeat("<", 2000) + `"}`)})
	}
	if err := votesddb.New(db, table, table+"-ledger").RecordRejects(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id, limit string
		status          int
		recent          int
		reason          string // the error's
	}{
		{"default limit", "r", "", 200, votes.DefaultRejectSample, ""},
		{"limit 3", "r", "3", 200, 3, ""},
		{"limit 100", "r", "100", 200, 25, ""},
		{"limit -1", "r", "-1", 400, 0, ReasonBadLimit},
		{"limit 0", "r", "0", 400, 0, ReasonBadLimit},
		{"limit abc", "r", "abc", 400, 0, ReasonBadLimit},
		{"limit 100000", "r", "100000", 400, 0, ReasonBadLimit},
		{"unknown poll", "nope", "", 404, 0, ReasonUnknownPoll},
		{"odd poll id", "r#0", "", 404, 0, ReasonUnknownPoll},
		{"long poll id", strings.Repeat("r", 3000), "", 404, 0, ReasonUnknownPoll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request("GET /polls/{id}/rejects", tt.id, "")
			if tt.limit != "" {
				req = withQuery(req, "limit", tt.limit)
			}
			status, _, body := handle(t, h, req)
			if status != tt.status {
				t.Fatalf("got %d %s, want %d", status, body, tt.status)
			}
			if tt.reason != "" {
				var e apigw.ErrorBody
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error != tt.reason || e.Message == "" {
					t.Errorf("error %s, want reason %s with a message", body, tt.reason)
				}
				return
			}
			var got votes.PollRejects
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if got.PollID != "r" || got.Rejected[votes.ReasonUnknownOption] != 25 || len(got.Recent) != tt.recent {
				t.Errorf("got %d recent, counts %v; want %d and 25 unknown-option", len(got.Recent), got.Rejected, tt.recent)
			}
			if len(got.Recent) > 0 && (got.Recent[0].MessageID != "m24" || len(got.Recent[0].Excerpt) != votes.MaxRejectExcerpt) {
				t.Errorf("newest %+v: want m24 with a %d-byte excerpt", got.Recent[0], votes.MaxRejectExcerpt)
			}
		})
	}
	_, _, body := handle(t, h, withQuery(request("GET /polls/{id}/results", "r", ""), "maxAge", "0"))
	var res votes.Totals
	if err := json.Unmarshal([]byte(body), &res); err != nil || res.Rejected[votes.ReasonUnknownOption] != 25 {
		t.Errorf("results %s: want 25 unknown-option rejects", body)
	}
	// Cached totals keep the counts too.
	_, _, body = handle(t, h, withQuery(request("GET /polls/{id}/results", "r", ""), "maxAge", "60"))
	if err := json.Unmarshal([]byte(body), &res); err != nil || res.Source != "cache" || res.Rejected[votes.ReasonUnknownOption] != 25 {
		t.Errorf("cached results %s: want 25 unknown-option rejects", body)
	}
}
