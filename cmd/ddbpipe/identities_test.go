package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

// TestCommandsSignAsTheirIdentity: on a local stack that judges IAM, each
// command signs as the managed policy of its caller (votes send as the
// producer, the runbook's commands and backfills as the operator, archive
// ls and query as the analyst, objects reads as api-read and writes as
// api-invoke, search verify and reindex as the operator), and every call
// it makes, search requests included, is one that policy allows.
func TestCommandsSignAsTheirIdentity(t *testing.T) {
	st := stacktest.Need(t)
	stacktest.AfterMonthTurn(t, 3*time.Minute) // it names this month's ledger and archive
	ctx := context.Background()
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	env, err := stack.Up(ctx, stack.Options{Root: root, Setups: registry.All, Servers: st, StackName: fmt.Sprintf("cli-ids-%d", time.Now().UnixNano()%1e6),
		// Batching windows of 1 s (the template's 5 and 10 s) keep the
		// commands' waits short; the calls they make are the same.
		Params: map[string]string{"CounterShards": "3", "CounterBatchingWindowSeconds": "1", "ArchiveBatchingWindowSeconds": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	if env.Judge == nil {
		t.Skip("IAM enforcement is off (DDBPIPE_ENFORCE_IAM)")
	}
	if err := env.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The stack's variables, as `. .ddbpipe/local.env` exports them.
	for k, v := range env.Vars {
		t.Setenv(k, v)
	}
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(ctx, args, &out, &errOut); err != nil {
			t.Errorf("ddbpipe %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	poll := "ids"
	cli("polls", "create", "-poll", poll, "-options", "a,b", "-shards", "2")
	// Without -shards, a poll takes the stack's CounterShards, as POST /polls does.
	if out := cli("polls", "create", "-poll", "ids-default", "-options", "x,y"); !strings.Contains(out, "3 shards") {
		t.Errorf("polls create without -shards: %q, want the stack's CounterShards (3)", out)
	}
	cli("polls", "ls")
	cli("polls", "get", poll)
	cli("votes", "send", "-poll", poll, "-count", "20", "-quiet")
	// -wait waits for the votes still in the queue too: right after the
	// send, the archive holds every vote sent.
	if out := cli("archive", "query", "-wait", "2m", "-format", "csv",
		"SELECT count(DISTINCT vote_id) AS n FROM votes WHERE poll_id = '"+poll+"' AND event_name <> 'REMOVE'"); out != "n\n20\n" {
		t.Errorf("archive query -wait right after the send: %q, want the 20 votes sent", out)
	}
	cli("votes", "results", "-poll", poll)
	if out := cli("votes", "rejected", "-poll", poll, "-limit", "5"); !strings.HasPrefix(out, "poll ids: ") {
		t.Errorf("votes rejected: %q, want the poll's reject counts", out)
	}
	// A message in each queue the operator reads: inspect hands it back,
	// the dead letter's redrive moves it to the votes queue.
	admin := sqs.NewFromConfig(env.AWS)
	for _, q := range []string{"VOTES_DEAD_LETTER_QUEUE_URL", "VOTES_REJECTS_QUEUE_URL", "STREAM_FAILURES_QUEUE_URL"} {
		if _, err := admin.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Vars[q]),
			MessageBody: aws.String(`{"voteId":"dead-1","pollId":"ids","optionId":"a","voterId":"u","castAt":"` + time.Now().UTC().Format(time.RFC3339) + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	cli("votes", "dlq", "inspect", "-hold", "5s")
	cli("votes", "rejects", "inspect", "-hold", "5s")
	cli("archive", "failures", "-hold", "5s")
	cli("votes", "dlq", "redrive")
	cli("tables", "ls")
	cli("tables", "rotate")
	cli("archive", "ls")
	cli("archive", "query", "-named", "votes-per-option", "-arg", ledger.MonthOf(time.Now()), "-arg", poll)
	// The audit, an operator's: the counters agree with the archive once
	// the pipeline settled; a counter changed behind the tally's back is
	// named, and the command fails.
	if out := cli("votes", "audit", "-poll", poll, "-wait", "1m"); !strings.Contains(out, "agree") {
		t.Errorf("votes audit: %q, want the counters and the archive to agree", out)
	}
	if _, err := env.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(env.Vars["COUNTERS_TABLE_NAME"]),
		Key:              map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "count#" + poll + "#0"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "a"}},
		UpdateExpression: aws.String("ADD votes :one"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	var auditOut, auditErr bytes.Buffer
	err = run(ctx, []string{"votes", "audit", "-poll", poll}, &auditOut, &auditErr)
	if err == nil || !strings.Contains(err.Error(), "differ on 1 of 2 options") || !strings.Contains(auditOut.String(), "differs by +1") {
		t.Errorf("votes audit after a counter was changed: %v\n%s", err, auditOut.String())
	}

	// Backfills, an operator's: of the open month's ledger, and of the
	// objects table (a document first, so the archive holds the table).
	doc := filepath.Join(t.TempDir(), "doc.txt")
	if err := os.WriteFile(doc, []byte("a document to backfill"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli("objects", "put", "-file", doc, "ids/doc")
	cli("objects", "get", "ids/doc")
	cli("objects", "ls", "ids/")
	// Every route the API's caller policies name, signed as each caller:
	// the local API asks the judge for execute-api:Invoke on the route's
	// ARN (a refusal would be 403; the function's own answers may be 4xx).
	for _, c := range []struct{ as, method, path, body string }{
		{asAPIInvoke, "POST", "/polls", `{"pollId":"ids-api","options":["a","b"]}`},
		{asAPIInvoke, "GET", "/polls/ids", ""},
		{asAPIInvoke, "GET", "/objects?prefix=ids/", ""},
		{asAPIInvoke, "GET", "/objects/ids/doc", ""},
		{asAPIInvoke, "HEAD", "/objects/ids/doc", ""},
		{asAPIInvoke, "PUT", "/objects/ids/api", "via the API"},
		{asAPIInvoke, "POST", "/objects/ids/big?uploads", `{"size":5000000,"sha256":"` + strings.Repeat("0", 64) + `"}`},
		{asAPIInvoke, "DELETE", "/objects/ids/api", ""},
		{asAPIRead, "GET", "/polls/ids/results", ""},
		{asAPIRead, "GET", "/polls/ids/rejects", ""},
		{asAPIInvoke, "GET", "/polls/ids/rejects?limit=1", ""},
		{asAPIRead, "GET", "/objects?prefix=ids/", ""},
		{asAPIRead, "GET", "/objects/ids/doc", ""},
		{asAPIRead, "HEAD", "/objects/ids/doc", ""},
	} {
		hc, err := sigv4.Client(env.AWSAs(c.as), env.APIURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(c.method, env.APIURL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 {
			t.Errorf("%s %s as %s: %s %s", c.method, c.path, c.as, resp.Status, b)
		}
	}
	// Search, an operator's: the index equals the table (the documents
	// above), and a rebuild swaps in a new index that does too and
	// deletes the one it replaced (make iam takes the operator's es:
	// grants here; the demo searches through the API only).
	if env.Search != nil {
		// Two texts too big for the item, one in S3 and one in chunk items:
		// the indexer and the reindex read their text where it lives.
		for _, d := range []struct{ key, where, word string }{{"ids/in-s3.txt", "", " blobword"}, {"ids/chunked.txt", "-table", " chunkword"}} {
			f := filepath.Join(t.TempDir(), "text.txt")
			if err := os.WriteFile(f, append(randomWords(100_000), d.word...), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"objects", "put", "-type", "text/plain", "-file", f}
			if d.where != "" {
				args = append(args, d.where)
			}
			cli(append(args, d.key)...)
		}
		// The indexer creates the index with its first batch: a user waits
		// for a document to be found first (verify needs an index).
		if out := cli("objects", "search", "-wait", "1m", "-prefix", "ids/", "chunkword"); !strings.Contains(out, "ids/chunked.txt") {
			t.Errorf("objects search for the chunked text: %q, want ids/chunked.txt", out)
		}
		cli("search", "verify", "-wait", "1m")
		if out := cli("search", "reindex"); !strings.Contains(out, "searches now read") {
			t.Errorf("search reindex: %q, want the aliases switched to the new index", out)
		}
		// -wait: ZincSearch showed 1 of 3 documents of the new index right
		// after the switch in one run, its refresh notwithstanding (open in
		// issue 37's note: OpenSearch's refresh makes them all searchable).
		cli("search", "verify", "-wait", "1m")
	}
	cli("archive", "backfill", "-table", ledger.TableName(env.Vars["LEDGER_TABLE_PREFIX"], ledger.MonthOf(time.Now())), "-dry-run")
	cli("archive", "backfill", "-table", env.Vars["OBJECTS_TABLE_NAME"], "-dry-run", "-force")

	// Outside the repository (an analyst's machine), the archive commands
	// need only the stack's variables; their cache goes to the user's.
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Chdir(t.TempDir())
	if out := cli("archive", "query", "-named", "votes-per-option", "-arg", ledger.MonthOf(time.Now()), "-arg", poll); !strings.Contains(out, "(2 rows)") {
		t.Errorf("archive query outside the repository: %q, want the poll's two options", out)
	}
	if _, err := os.Stat(filepath.Join(cache, "ddbpipe", "archive-cache")); err != nil {
		t.Errorf("the archive cache outside the repository: %v", err)
	}

	by := map[string]int{}
	for tr := range env.Judge.Triples() {
		by[tr.Identity]++
		if tr.Decision != iam.Allowed {
			t.Errorf("denied: %s %s on %s (%s)", tr.Identity, tr.Action, tr.Resource, tr.Decision)
		}
	}
	for _, id := range []string{"producer", "operator", "analyst", "api-read", "api-invoke"} {
		if by[id] == 0 {
			t.Errorf("no call signed as %s (calls by identity: %v)", id, by)
		}
	}
	if os.Getenv("DDBPIPE_IAM") != "on" {
		t.Error("the stack's variables do not say IAM is judged")
	}
}

// randomWords is about n bytes of random hex words: text that does not
// compress into the item.
func randomWords(n int) []byte {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	h := []byte(hex.EncodeToString(b))
	for i := 16; i < len(h); i += 17 {
		h[i] = ' '
	}
	return h
}
