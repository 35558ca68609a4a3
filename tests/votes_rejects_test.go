package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

func voteBody(id, poll, option, voter, castAt string) string {
	return fmt.Sprintf(`{"voteId":%q,"pollId":%q,"optionId":%q,"voterId":%q,"castAt":%q}`, id, poll, option, voter, castAt)
}

// Every bad message reaches the rejects queue with its reason; none is
// counted, none is retried, the batch goes on.
func TestVotesRejectsWithReasons(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	env := upLocal(t)
	ctx := context.Background()
	now := time.Now().UTC()
	at := now.Format(time.RFC3339)
	createPoll(t, env, `{"pollId":"r","options":["a","b"]}`)
	createPoll(t, env, fmt.Sprintf(`{"pollId":"closed","options":["a"],"closesAt":%q}`, now.Add(-time.Hour).Format(time.RFC3339)))
	createPoll(t, env, fmt.Sprintf(`{"pollId":"later","options":["a"],"opensAt":%q}`, now.Add(24*time.Hour).Format(time.RFC3339)))
	createPoll(t, env, `{"pollId":"once","options":["a","b"],"oneVotePerVoter":true}`)

	viaSQS := []struct {
		name string
		body string
		want votes.Reason
	}{
		{"not JSON", "this is not JSON", votes.ReasonMalformedJSON},
		{"JSON array", `["a","b"]`, votes.ReasonMalformedJSON},
		{"trailing data", voteBody("t1", "r", "a", "u1", at) + " {}", votes.ReasonMalformedJSON},
		{"wrong type", `{"voteId":"w1","pollId":"r","optionId":7,"voterId":"u","castAt":"` + at + `"}`, votes.ReasonWrongType},
		{"missing field", `{"voteId":"m1","pollId":"r","optionId":"a","castAt":"` + at + `"}`, votes.ReasonMissingField},
		{"null field", `{"voteId":"n1","pollId":null,"optionId":"a","voterId":"u","castAt":"` + at + `"}`, votes.ReasonMissingField},
		{"empty id", voteBody("", "r", "a", "u", at), votes.ReasonEmptyID},
		{"129-char id", voteBody(strings.Repeat("x", 129), "r", "a", "u", at), votes.ReasonIDTooLong},
		{"hash in id", voteBody("h1", "r", "a", "u#1", at), votes.ReasonBadID},
		{"unknown poll", voteBody("p1", "no-such-poll", "a", "u", at), votes.ReasonUnknownPoll},
		{"unknown option", voteBody("o1", "r", "zzz", "u", at), votes.ReasonUnknownOption},
		{"closed poll", voteBody("c1", "closed", "a", "u", at), votes.ReasonPollClosed},
		{"poll not open yet", voteBody("l1", "later", "a", "u", at), votes.ReasonPollNotOpen},
		{"castAt far in the future", voteBody("f1", "r", "a", "u", "2099-01-01T00:00:00Z"), votes.ReasonFutureCastAt},
		{"castAt not a time", voteBody("b1", "r", "a", "u", "yesterday"), votes.ReasonBadCastAt},
		{"script injection", voteBody("<script>alert(1)</script>", "r", "'; DROP TABLE votes; --", "u", at), votes.ReasonUnknownOption},
	}
	want := map[string]votes.Reason{}
	send := func(body string) string {
		out, err := env.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Vars["VOTES_QUEUE_URL"]), MessageBody: aws.String(body)})
		if err != nil {
			t.Fatalf("send %q: %v", body, err)
		}
		return aws.ToString(out.MessageId)
	}
	for _, c := range viaSQS {
		want[send(c.body)] = c.want
	}
	// One vote per voter: the first counts, a second by the same voter is rejected.
	send(voteBody("first", "once", "a", "alice", at))
	eventually(t, 60*time.Second, "alice's first vote counted", func() bool { return getResults(t, env, "once").Total == 1 })
	want[send(voteBody("second", "once", "b", "alice", at))] = votes.ReasonDuplicateVoter
	send(voteBody("good", "r", "b", "bob", at))

	// Bodies SQS itself would refuse reach the handler directly.
	huge := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "direct-1MiB", Body: `{"voteId":"` + strings.Repeat("x", 1<<20) + `"}`, EventSource: "aws:sqs"}}}
	payload, _ := json.Marshal(huge)
	out, err := env.Runner.Invoke(ctx, "CounterFunction", payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("a 1 MiB body must be rejected, not retried: %s", out)
	}
	want["direct-1MiB"] = votes.ReasonTooLarge

	got := rejectReasons(t, env, want)
	for id, reason := range want {
		if got[id] != reason {
			t.Errorf("message %s: reason %q, want %q", id, got[id], reason)
		}
	}
	// Counting follows the ledger's stream: wait for bob's vote, then
	// check that it is the only one.
	eventually(t, 60*time.Second, "bob's vote counted", func() bool { return getResults(t, env, "r").Total >= 1 })
	if r := getResults(t, env, "r"); r.Total != 1 || r.Totals["b"] != 1 {
		t.Errorf("poll r totals %+v, want only bob's vote", r)
	}
	if r := getResults(t, env, "once"); r.Total != 1 || r.Totals["a"] != 1 {
		t.Errorf("poll once totals %+v, want only alice's first vote", r)
	}
	if n := queueDepth(t, env.Clients.SQS, env.Vars["VOTES_DEAD_LETTER_QUEUE_URL"]); n != 0 {
		t.Errorf("DLQ holds %d messages: rejects must not be retried", n)
	}
}

// rejectReasons drains the rejects queue until every message of want has
// its reject, each with its reason and a detail, and returns the reasons by
// message id.
func rejectReasons[V any](t *testing.T, env *stack.Env, want map[string]V) map[string]votes.Reason {
	t.Helper()
	got := map[string]votes.Reason{}
	eventually(t, 60*time.Second, "every reject on the rejects queue", func() bool {
		for _, b := range drain(t, newClients(t, map[string]string{"AWS_ENDPOINT_URL_SQS": env.Vars["AWS_ENDPOINT_URL_SQS"]}), env.Vars["VOTES_REJECTS_QUEUE_URL"]) {
			var m struct {
				MessageID string       `json:"messageId"`
				Reason    votes.Reason `json:"reason"`
				Detail    string       `json:"detail"`
			}
			if err := json.Unmarshal([]byte(b), &m); err != nil || m.Detail == "" {
				t.Errorf("reject envelope %q: %v", b, err)
			}
			got[m.MessageID] = m.Reason
		}
		// Every message sent, by its id: a count could be reached by a
		// copy SQS took twice (a send retried after a lost answer).
		for id := range want {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})
	return got
}

// A poll's producers see its rejects: results count them by reason and
// GET /polls/{id}/rejects shows the latest, newest first, with an excerpt
// of each body. Rejects naming no poll, an unknown poll or an id that is
// not one are not counted under any poll; a redelivered reject counts once.
func TestVotesRejectsPerPoll(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	env := upLocal(t)
	api := openAPIChecked(t, env, env.APIClient(), false) // its answers as docs/openapi.yaml says
	ctx := context.Background()
	at := time.Now().UTC().Format(time.RFC3339)
	createPoll(t, env, `{"pollId":"rp","options":["a","b"]}`)

	send := func(body string) string {
		out, err := env.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Vars["VOTES_QUEUE_URL"]), MessageBody: aws.String(body)})
		if err != nil {
			t.Fatalf("send %q: %v", body, err)
		}
		return aws.ToString(out.MessageId)
	}
	viaSQS := map[string]votes.Reason{
		send(voteBody("o1", "rp", "zzz", "u1", at)):                                  votes.ReasonUnknownOption,
		send(voteBody("c1", "rp", "a", "u2", "yesterday")):                           votes.ReasonBadCastAt,
		send(`{"voteId":"m1","pollId":"rp","optionId":"a","castAt":"` + at + `"}`):   votes.ReasonMissingField,
		send(voteBody("t1", "rp", "a", "u3", at) + " {}"):                            votes.ReasonMalformedJSON,
		send(voteBody("n1", "no-such-poll", "a", "u4", at)):                          votes.ReasonUnknownPoll,
		send(`{"voteId":"h1","pollId":"rp#1","optionId":"a","castAt":"` + at + `"}`): votes.ReasonBadID,
		send("garbage"): votes.ReasonMalformedJSON,
		send(`{"voteId":"x1","pollId":"` + strings.Repeat("r", 200) + `","optionId":"a"}`): votes.ReasonIDTooLong,
	}
	send(voteBody("good", "rp", "b", "bob", at))
	rejectReasons(t, env, viaSQS) // every one rejected: the queue is done with them

	// Bodies SQS would refuse, and a redelivery, straight to the counter.
	sent := time.Now().Add(time.Minute).UnixMilli() // the newest of the poll's rejects
	invoke := func(id string, ms int64, body string) {
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: body, EventSource: "aws:sqs",
			Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(ms, 10)}}}}
		payload, _ := json.Marshal(ev)
		out, err := env.Runner.Invoke(ctx, "CounterFunction", payload)
		var resp events.SQSEventResponse
		if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("invoke %s: %s, %v: want it rejected, not retried", id, out, err)
		}
	}
	invoke("direct-huge", sent, `{"pollId":"rp","voteId":"`+strings.Repeat("<", 900<<10)+`"}`)
	// Lambda's JSON event carries no invalid UTF-8 (it arrives as U+FFFD;
	// votesddb's tests record such bodies): control characters instead.
	invoke("direct-control", sent+1, `{"pollId":"rp","voteId":"v\u0000\u001b[2J"}`)
	wrongType := `{"voteId":"w1","pollId":"rp","optionId":7,"voterId":"u","castAt":"` + at + `"}`
	invoke("direct-again", sent+2, wrongType)
	invoke("direct-again", sent+2, wrongType) // SQS's redelivery: same id, same SentTimestamp

	want := map[string]int64{"unknown-option": 1, "bad-cast-at": 1, "missing-field": 1, "malformed-json": 1,
		"too-large": 1, "bad-id": 1, "wrong-type": 1}
	r := getResults(t, env, "rp")
	if fmt.Sprint(r.Rejected) != fmt.Sprint(want) {
		t.Errorf("results of rp count rejects %v, want %v", r.Rejected, want)
	}
	var got votes.PollRejects
	if status := getJSON(t, env, api, "/polls/rp/rejects?limit=100", &got); status != 200 {
		t.Fatalf("GET /polls/rp/rejects = %d", status)
	}
	if len(got.Recent) != 7 || fmt.Sprint(got.Rejected) != fmt.Sprint(want) {
		t.Fatalf("rejects of rp: %d recent, counts %v; want 7 and %v", len(got.Recent), got.Rejected, want)
	}
	for i, rec := range got.Recent {
		if i > 0 && rec.SentAt.After(got.Recent[i-1].SentAt) {
			t.Errorf("record %d (%s) is newer than the one before it", i, rec.MessageID)
		}
		if len(rec.Excerpt)+len(rec.ExcerptBase64) > votes.MaxRejectExcerpt || rec.Detail == "" || rec.SentAt.IsZero() {
			t.Errorf("record %+v: want a detail, a sent time and at most %d bytes of body", rec, votes.MaxRejectExcerpt)
		}
	}
	first := got.Recent[0]
	if first.MessageID != "direct-again" || first.Reason != votes.ReasonWrongType || first.VoteID != "w1" || first.SentAt.UnixMilli() != sent+2 {
		t.Errorf("newest record %+v, want the wrong-type vote w1", first)
	}
	if huge := got.Recent[2]; huge.MessageID != "direct-huge" || huge.BodySize < 900<<10 || len(huge.Excerpt) != votes.MaxRejectExcerpt {
		t.Errorf("the huge body's record %+v: want a %d-byte excerpt of its %d bytes", huge, votes.MaxRejectExcerpt, 900<<10)
	}
	if ctl := got.Recent[1]; ctl.MessageID != "direct-control" || ctl.Reason != votes.ReasonBadID || !strings.Contains(ctl.Excerpt, `\u001b[2J`) {
		t.Errorf("the control characters' record %+v: want bad-id with the body as sent", ctl)
	}
	var sample votes.PollRejects
	if status := getJSON(t, env, api, "/polls/rp/rejects", &sample); status != 200 || len(sample.Recent) != 7 {
		t.Errorf("default limit: %d, %d records", status, len(sample.Recent))
	}
	for _, q := range []string{"-1", "abc", "100000", "0"} {
		var e struct{ Error, Message string }
		if status := getJSON(t, env, api, "/polls/rp/rejects?limit="+q, &e); status != 400 || e.Error != "bad-limit" || e.Message == "" {
			t.Errorf("limit=%s: %d %+v, want 400 bad-limit", q, status, e)
		}
	}
	for _, id := range []string{"no-such-poll", "rp%231", strings.Repeat("r", 200)} {
		var e struct{ Error string }
		if status := getJSON(t, env, api, "/polls/"+id+"/rejects", &e); status != 404 || e.Error != "unknown-poll" {
			t.Errorf("rejects of %.20s: %d %+v, want 404 unknown-poll", id, status, e)
		}
	}
}

// getJSON reads path of the HTTP API into v with api (a client of env's
// API) and returns the status.
func getJSON(t *testing.T, env *stack.Env, api *http.Client, path string, v any) int {
	t.Helper()
	resp, err := api.Get(env.Vars["API_URL"] + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s = %d: %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode
}
