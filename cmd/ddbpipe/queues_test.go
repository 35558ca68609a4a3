package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The on-failure record Lambda sends for a DynamoDB stream batch
// (events/stream-failure.json, in the documented shape) read into what to
// do: re-read it while the stream holds it, else the rotator's
// verification (a ledger month) or a backfill (any other table).
func TestReadFailureFixture(t *testing.T) {
	body := mustRead(t, filepath.Join("..", "..", "events", "stream-failure.json"))
	within := readFailure("m-1", body, time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	if within.Problem != "" || within.Table != "ddbpipe-votes-2026-11" || within.Shard != "shardId-00000001763632800000-5f2a9c1e" ||
		within.Start != "4821000000000017436521981" || within.End != "4821000000000017436522304" || within.Records != 100 ||
		within.Condition != "RetryAttemptsExhausted" || within.Attempts != 6 {
		t.Fatalf("read %+v", within)
	}
	if want := time.Date(2026, 11, 21, 10, 2, 11, 0, time.UTC); !within.Readable || !within.ReadableUntil.Equal(want) {
		t.Errorf("readable %v until %s, want until %s", within.Readable, within.ReadableUntil, want)
	}
	for _, want := range []string{"get-shard-iterator", "--sequence-number 4821000000000017436521981", "ddbpipe-archiver", "2026-11-21T10:02:11Z"} {
		if !strings.Contains(within.Action, want) {
			t.Errorf("action %q lacks %q", within.Action, want)
		}
	}
	later := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	beyond := readFailure("m-1", body, later)
	if beyond.Readable || !strings.Contains(beyond.Action, "ddbpipe-votes month 2026-11") || !strings.Contains(beyond.Action, "tables rotate") {
		t.Errorf("beyond 24 h: readable %v, action %q", beyond.Readable, beyond.Action)
	}
	objects := readFailure("m-2", strings.Replace(body, "table/ddbpipe-votes-2026-11/", "table/ddbpipe-objects/", 1), later)
	if objects.Table != "ddbpipe-objects" || !strings.Contains(objects.Action, "export") {
		t.Errorf("objects table: %+v", objects)
	}
	reaper := readFailure("m-4", strings.Replace(strings.Replace(body, "function:ddbpipe-archiver", "function:ddbpipe-ObjectsReaperFunction-1A2B", 1),
		"table/ddbpipe-votes-2026-11/", "table/ddbpipe-objects/", 1), time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	if !strings.Contains(reaper.Action, "sweeper") || strings.Contains(reaper.Action, "get-shard-iterator") {
		t.Errorf("a reaper batch: action %q, want the sweeper's part", reaper.Action)
	}
	// The local runner writes no arrival time when a record has none: the
	// failure's own time bounds the stream's hold.
	noArrival := strings.NewReplacer(`"2026-11-20T10:02:11Z"`, `""`, `"2026-11-20T10:02:14Z"`, `""`).Replace(body)
	if fb := readFailure("m-3", noArrival, time.Date(2026, 11, 21, 10, 3, 0, 0, time.UTC)); !fb.Readable || fb.Problem != "" {
		t.Errorf("without arrival times: %+v", fb)
	}
	for _, hostile := range []string{"", "not json", "{}", `{"DDBStreamBatchInfo":null}`, `{"DDBStreamBatchInfo":7}`, "\"\\ud800\"", strings.Repeat("{", 10000)} {
		fb := readFailure("m-x", hostile, later)
		if fb.Problem == "" || fb.Action == "" || !utf8.ValidString(fb.Problem) {
			t.Errorf("%.20q: %+v, want a problem and an action", hostile, fb)
		}
	}
}

// queueEnv is a local.env naming the local servers, for the commands'
// -state-dir, and an SQS client of them.
func queueEnv(t *testing.T) (string, *sqs.Client) {
	t.Helper()
	st := stacktest.Need(t)
	state := t.TempDir()
	var env strings.Builder
	for k, v := range st.Vars() {
		fmt.Fprintf(&env, "export %s='%s'\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(state, "local.env"), []byte(env.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return state, sqs.NewFromConfig(stacktest.Config(t, st, nil))
}

func newQueue(t *testing.T, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func send(t *testing.T, c *sqs.Client, url string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			t.Fatalf("send %.30q: %v", b, err)
		}
	}
}

// drain receives (and deletes) every message of a queue: bodies and count.
func drain(t *testing.T, c *sqs.Client, url string) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func voteBody(i int) string {
	return fmt.Sprintf(`{"voteId":"v-%03d","pollId":"p","optionId":"a","voterId":"u-%03d","castAt":"2026-11-20T10:00:00Z"}`, i, i)
}

// Inspect summarises the rejects queue by reason (as the counter stores
// rejects, and hostile messages besides) and the dead-letter queue by
// whether the counter could count each, and consumes nothing.
func TestQueuesInspectLocal(t *testing.T) {
	state, c := queueEnv(t)
	ctx := t.Context()
	rejects, dlq := newQueue(t, c, "ops-rejects"), newQueue(t, c, "ops-dlq")

	rs := []votes.Rejected{
		{MessageID: "r-1", Body: []byte(`{"optionId":"a#b"}`), Reason: votes.ReasonBadID, Detail: "optionId contains '#'"},
		{MessageID: "r-2", Body: []byte(`{"optionId":"c#d"}`), Reason: votes.ReasonBadID, Detail: "optionId contains '#'"},
		{MessageID: "r-3", Body: []byte("\xff\xfe vote"), Reason: votes.ReasonInvalidUTF8, Detail: "body is not valid UTF-8"},
		{MessageID: "r-4", Body: bytes.Repeat([]byte("ab"), 100<<10), Reason: votes.ReasonTooLarge, Detail: "body is 204800 bytes"},
	}
	if err := votessqs.NewRejects(c, rejects).Reject(ctx, rs); err != nil {
		t.Fatal(err)
	}
	hostile := []string{"not json at all", `{"reason":"\ud800\udc00\ud800","voteId":"\u0000"}`, strings.Repeat("x", 250<<10)}
	send(t, c, rejects, hostile...)
	send(t, c, dlq, voteBody(1), voteBody(2), voteBody(3), `{"voteId":"v","pollId":"p#","optionId":"a","voterId":"u"}`, strings.Repeat("\u00e9", 100<<10))

	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"votes", "rejects", "inspect", "-state-dir", state, "-queue-url", rejects, "-json", "-samples", "10"}, &out, &errOut); err != nil {
		t.Fatalf("rejects inspect: %v\n%s", err, errOut.String())
	}
	var s queueSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := map[string]int{"bad-id": 2, "invalid-utf8": 1, "too-large": 1, "unknown (no reason attribute, body not a reject)": 2, "\U00010000\ufffd": 1}
	if s.Read != 7 || len(s.Samples) != 7 || fmt.Sprint(s.ByReason) != fmt.Sprint(want) {
		t.Errorf("rejects: read %d, %d samples, by reason %v; want 7, 7, %v", s.Read, len(s.Samples), s.ByReason, want)
	}
	if s.Oldest.IsZero() || s.Newest.Before(s.Oldest) || time.Since(s.Oldest) > time.Hour {
		t.Errorf("oldest %s newest %s", s.Oldest, s.Newest)
	}
	for _, m := range s.Samples {
		if !utf8.ValidString(m.Body) || utf8.RuneCountInString(m.Body) > 400 {
			t.Errorf("sample %s body %.50q", m.MessageID, m.Body)
		}
	}

	out.Reset()
	if err := run(ctx, []string{"votes", "dlq", "inspect", "-state-dir", state, "-queue-url", dlq}, &out, &errOut); err != nil {
		t.Fatalf("dlq inspect: %v\n%s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{`5 messages read`, `countable\s+3\n`, `invalid: bad-id\s+1\n`, `invalid: too-large\s+1\n`, `votes dlq redrive`, `\{"voteId":"v-001"`} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("dlq summary lacks %q:\n%s", want, text)
		}
	}
	// Nothing was consumed, and everything is visible again at once.
	if got := drain(t, c, rejects); len(got) != 7 {
		t.Errorf("rejects queue holds %d messages after inspect, want 7", len(got))
	}
	if got := drain(t, c, dlq); len(got) != 5 {
		t.Errorf("dead-letter queue holds %d messages after inspect, want 5", len(got))
	}
	if err := run(ctx, []string{"votes", "rejects", "redrive"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("rejects redrive: %v, want refused", err)
	}
}

// The redrive command: a dry run moves nothing, -max moves that many. (How
// a redrive survives failures is votessqs's TestRedriveLocal.)
func TestRedriveLocal(t *testing.T) {
	state, c := queueEnv(t)
	ctx := t.Context()
	dlq, votesQ := newQueue(t, c, "ops-dlq"), newQueue(t, c, "ops-votes")
	want := map[string]bool{}
	for i := range 25 {
		send(t, c, dlq, voteBody(i))
		want[voteBody(i)] = true
	}

	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"votes", "dlq", "redrive", "-state-dir", state, "-queue-url", dlq, "-to", votesQ, "-dry-run"}, &out, &errOut); err != nil {
		t.Fatalf("dry run: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "would move 25 messages") || !strings.Contains(out.String(), "25 countable") {
		t.Errorf("dry run said %q", out.String())
	}
	// Through the command: -max moves that many, the rest stays.
	out.Reset()
	if err := run(ctx, []string{"votes", "dlq", "redrive", "-state-dir", state, "-queue-url", dlq, "-to", votesQ, "-max", "12", "-json", "-quiet"}, &out, &errOut); err != nil {
		t.Fatalf("redrive: %v\n%s", err, errOut.String())
	}
	var res redriveResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Moved != 12 || res.Failed != 0 {
		t.Errorf("redrive -max 12: %v %+v", err, res)
	}
	if moved, left := drain(t, c, votesQ), drain(t, c, dlq); len(moved) != 12 || len(left) != 13 {
		t.Errorf("after -max 12: %d on the votes queue, %d left; want 12, 13", len(moved), len(left))
	}

}

// archive failures reads the stream-failure queue without consuming it.
func TestArchiveFailuresLocal(t *testing.T) {
	state, c := queueEnv(t)
	ctx := t.Context()
	q := newQueue(t, c, "ops-stream-failures")
	send(t, c, q, mustRead(t, filepath.Join("..", "..", "events", "stream-failure.json")), "garbage \u2603")
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"archive", "failures", "-state-dir", state, "-queue-url", q, "-json"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep failuresReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.Read != 2 || rep.Expired != 1 || len(rep.Batches) != 2 {
		t.Fatalf("report %+v", rep)
	}
	var table, problem int
	for _, b := range rep.Batches {
		if b.Table == "ddbpipe-votes-2026-11" && b.Records == 100 {
			table++
		}
		if b.Problem != "" {
			problem++
		}
	}
	if table != 1 || problem != 1 {
		t.Errorf("batches %+v", rep.Batches)
	}
	out.Reset()
	if err := run(ctx, []string{"archive", "failures", "-state-dir", state, "-queue-url", q}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"table ddbpipe-votes-2026-11, shard shardId-00000001763632800000-5f2a9c1e: 100 records", "what to do:", "purge-queue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if left := drain(t, c, q); len(left) != 2 {
		t.Errorf("queue holds %d after reading, want 2", len(left))
	}
}
