package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/badinput"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/tests/clibin"
	"github.com/ddbpipe/ddbpipe/tests/openapicheck"
)

// The bad-input corpus (local/badinput), every case through its entry
// point on one local stack: each is refused with its reason, no vote is
// counted, no document or poll stored, and nothing is lost (every bad
// message is on the rejects queue, every bad stream record in the
// quarantine, the dead-letter queue empty).
func TestBadInputCorpus(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	env := upLocal(t)
	poll := unique("bad")
	createPoll(t, env, fmt.Sprintf(`{"pollId":%q,"options":["a","b"]}`, poll))
	fill := func(s string) string {
		now := time.Now().UTC()
		return strings.NewReplacer(badinput.Poll, poll, badinput.Now, now.Format(time.RFC3339),
			badinput.BeforePoll, now.Add(-2*time.Hour).Format(time.RFC3339), badinput.MonthsAgo, now.AddDate(0, 0, -40).Format(time.RFC3339),
			badinput.APIURL, env.APIURL).Replace(s)
	}
	putRanged(t, env)
	by := map[string][]badinput.Case{}
	for _, c := range badinput.Cases() {
		by[c.Entry] = append(by[c.Entry], c)
	}
	t.Run("sqs", func(t *testing.T) { badVotes(t, env, poll, fill, by[badinput.SQS]) })
	t.Run("http", func(t *testing.T) { badRequests(t, env, poll, fill, by[badinput.HTTP]) })
	t.Run("stream", func(t *testing.T) { badRecords(t, env, by[badinput.Stream]) })
	t.Run("cli", func(t *testing.T) { badCommands(t, env, fill, by[badinput.CLI]) })
}

// putRanged stores the document the Range cases name.
func putRanged(t *testing.T, env *stack.Env) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, env.APIURL+"/objects/"+badinput.Ranged,
		strings.NewReader(strings.Repeat("r", badinput.RangedSize)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := checkedAPI(t, env).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("PUT %s: %s", badinput.Ranged, resp.Status)
	}
}

// badVotes sends each body to the votes queue (or, when SQS itself refuses
// the body, hands it to the counter as the queue would) and finds it on
// the rejects queue with its reason; the poll counts nothing.
func badVotes(t *testing.T, env *stack.Env, poll string, fill func(string) string, cases []badinput.Case) {
	ctx := t.Context()
	want := map[string]badinput.Case{}
	var direct []events.SQSMessage
	for i, c := range cases {
		body := fill(c.Body)
		out, err := env.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Vars["VOTES_QUEUE_URL"]), MessageBody: aws.String(body)})
		if err != nil {
			id := fmt.Sprintf("direct-%d", i)
			direct = append(direct, events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs"})
			want[id] = c
			continue
		}
		want[aws.ToString(out.MessageId)] = c
	}
	if len(direct) > 0 {
		payload, _ := json.Marshal(events.SQSEvent{Records: direct})
		out, err := env.Runner.Invoke(ctx, "CounterFunction", payload)
		var resp events.SQSEventResponse
		if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("counter on the bodies SQS refuses: %s, %v; want every one rejected, none retried", out, err)
		}
	}
	got := rejectReasons(t, env, want)
	for id, c := range want {
		if string(got[id]) != c.Want {
			t.Errorf("%s: reason %q, want %q", c.ID(), got[id], c.Want)
		}
	}
	if r := getResults(t, env, poll); r.Total != 0 {
		t.Errorf("poll %s counted %d votes, want none: %+v", poll, r.Total, r.Totals)
	}
	if n := queueDepth(t, env.Clients.SQS, env.Vars["VOTES_DEAD_LETTER_QUEUE_URL"]); n != 0 {
		t.Errorf("the dead-letter queue holds %d messages: a reject must not be retried", n)
	}
}

// goTypeName matches what encoding/json's own messages say of Go types
// (int64, *int64, []string, time.Time, objectsapi.UploadRequest, struct).
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|struct)\b|\[\]\w|\*\w|map\[|\b\w+\.[A-Z]\w+`)

// badRequests sends each request, signed unless the case says not, and
// wants its status with a JSON error: a function's in the APIs' shape
// {"error","message"} in the client's words; afterwards none of the polls or
// documents the requests named exists. Every answer is also checked
// against docs/openapi.yaml (the requests, hostile by design, are not).
func badRequests(t *testing.T, env *stack.Env, poll string, fill func(string) string, cases []badinput.Case) {
	signed := openAPIChecked(t, env, env.APIClient(), false)
	plain := openAPIChecked(t, env, &http.Client{Timeout: time.Minute}, false)
	do := func(hc *http.Client, method, path string, header map[string]string, body string) (int, string) {
		t.Helper()
		return apiDo(t, env, hc, method, path, header, body)
	}
	for _, c := range cases {
		hc := signed
		if c.Unsigned {
			hc = plain
		}
		status, raw := do(hc, c.Method, fill(c.Path), c.Header, fill(c.Body))
		if status != c.Status {
			t.Errorf("%s: %d %s, want %d", c.ID(), status, openapicheck.Truncated(raw), c.Status)
			continue
		}
		if c.Gateway {
			var msg map[string]any
			if status != http.StatusRequestHeaderFieldsTooLarge && (json.Unmarshal([]byte(raw), &msg) != nil || len(msg) == 0) {
				t.Errorf("%s: body %q is not the gateway's JSON error", c.ID(), openapicheck.Truncated(raw))
			}
			continue
		}
		// A function's answer: both APIs' one shape.
		var e struct{ Error, Message string }
		switch {
		case json.Unmarshal([]byte(raw), &e) != nil || e.Error == "" || e.Message == "":
			t.Errorf("%s: body %q is not {\"error\":reason,\"message\":text}", c.ID(), openapicheck.Truncated(raw))
		case goTypeName.MatchString(e.Message):
			t.Errorf("%s: message %q names a Go type (%q)", c.ID(), e.Message, goTypeName.FindString(e.Message))
		case strings.Contains(raw, `\u00`):
			t.Errorf("%s: body %q escapes HTML", c.ID(), openapicheck.Truncated(raw))
		}
	}
	// Nothing was stored: the polls the bad definitions named, the
	// documents the bad requests named.
	for _, path := range []string{"/polls/h1", "/polls/h2", "/polls/h5", "/polls/h6", "/polls/h7", "/polls/h10", "/polls/h11", "/polls/u1",
		"/objects/badinput/doc", "/objects/badinput/unsigned", "/objects/badinput/big"} {
		if status, raw := do(signed, "GET", path, nil, ""); status != http.StatusNotFound {
			t.Errorf("GET %s after the bad requests: %d %s, want 404", path, status, openapicheck.Truncated(raw))
		}
	}
	if r := getResults(t, env, poll); r.Total != 0 {
		t.Errorf("poll %s counted %d votes", poll, r.Total)
	}
}

// badRecords hands the archiver one stream batch of the corpus's records
// (Lambda's event, through the runner): the batch succeeds, and every
// record is kept whole in the quarantine with its reason, none archived.
func badRecords(t *testing.T, env *stack.Env, cases []badinput.Case) {
	ctx := t.Context()
	table := env.Vars["LEDGER_TABLE_PREFIX"] + "-2026-11"
	var recs []json.RawMessage
	for _, c := range cases {
		recs = append(recs, json.RawMessage(strings.ReplaceAll(c.Body, "$TABLE", table)))
	}
	payload, err := json.Marshal(map[string]any{"Records": recs})
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.Runner.Invoke(ctx, "ArchiverFunction", payload)
	var resp events.DynamoDBEventResponse
	if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("archiver: %s, %v; want the batch done, its poison records quarantined", out, err)
	}
	bucket := env.Vars["ARCHIVE_BUCKET_NAME"]
	list, err := env.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{} // sequence number → its quarantined reasons
	for _, o := range list.Contents {
		key := aws.ToString(o.Key)
		if !strings.HasPrefix(key, archive.QuarantinePrefix) {
			// The stack's other archive files (its objects table's stream,
			// which the test's requests may touch) are not this batch's.
			if strings.HasPrefix(key, archive.Partition{Table: env.Vars["LEDGER_TABLE_PREFIX"], Month: "2026-11"}.Prefix()) {
				t.Errorf("archived %s: a bad record must be quarantined, not archived", key)
			}
			continue
		}
		obj, err := env.Clients.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		var q struct {
			Reasons []string
			Record  struct {
				DynamoDB struct{ SequenceNumber string } `json:"dynamodb"`
			}
		}
		err = json.NewDecoder(obj.Body).Decode(&q)
		obj.Body.Close()
		if err != nil {
			t.Fatalf("quarantined %s: %v", key, err)
		}
		reasons[q.Record.DynamoDB.SequenceNumber] = strings.Join(q.Reasons, "; ")
	}
	for _, c := range cases {
		var r struct {
			DynamoDB struct{ SequenceNumber string } `json:"dynamodb"`
		}
		_ = json.Unmarshal([]byte(c.Body), &r)
		got, ok := reasons[r.DynamoDB.SequenceNumber]
		if !ok || !strings.Contains(got, c.Want) {
			t.Errorf("%s: quarantined %t with reasons %q, want one naming %q", c.ID(), ok, got, c.Want)
		}
	}
}

// badCommands runs each command line of the built CLI against the stack:
// each fails (exit status 1) and says why.
func badCommands(t *testing.T, env *stack.Env, fill func(string) string, cases []badinput.Case) {
	bin := clibin.Path(t, repoRoot(t), t.TempDir())
	vars := os.Environ()
	for k, v := range env.Vars {
		vars = append(vars, k+"="+v)
	}
	for _, c := range cases {
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = fill(a)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = vars, t.TempDir()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err == nil || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() < 1 {
			t.Errorf("%s: exit %v, want a failure; output %s", c.ID(), err, openapicheck.Truncated(out.String()))
			continue
		}
		if !strings.Contains(out.String(), c.Want) {
			t.Errorf("%s: output %q, want it to say %q", c.ID(), openapicheck.Truncated(out.String()), c.Want)
		}
		for _, internal := range []string{"Go struct", "Go value", "dial tcp", ": votes: ", "votesddb: "} {
			if strings.Contains(out.String(), internal) {
				t.Errorf("%s: output %q shows %q, not the user's words", c.ID(), openapicheck.Truncated(out.String()), internal)
			}
		}
	}
}
