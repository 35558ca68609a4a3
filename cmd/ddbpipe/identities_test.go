package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// TestCommandsSignAsTheirIdentity: on a local stack that judges IAM, each
// command signs as the managed policy of its caller (votes send as the
// producer, the runbook's commands as the operator, archive ls and query
// as the analyst), and every call it makes is one that policy allows.
func TestCommandsSignAsTheirIdentity(t *testing.T) {
	st := stacktest.Need(t)
	ctx := context.Background()
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	env, err := stack.Up(ctx, stack.Options{Root: root, Setups: registry.All, Servers: st, StackName: fmt.Sprintf("cli-ids-%d", time.Now().UnixNano()%1e6)})
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
	cli("polls", "ls")
	cli("polls", "get", poll)
	cli("votes", "send", "-poll", poll, "-count", "20", "-quiet")
	cli("votes", "results", "-poll", poll)
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
	// The votes reach the archive through the ledger's stream.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var out, errOut bytes.Buffer
		err := run(ctx, []string{"archive", "ls"}, &out, &errOut)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("archive ls: %v (the votes never reached the archive)", err)
		}
		time.Sleep(time.Second)
	}
	cli("archive", "query", "-named", "votes-per-option", "-arg", time.Now().UTC().Format("2006-01"), "-arg", poll)

	by := map[string]int{}
	for tr := range env.Judge.Triples() {
		by[tr.Identity]++
		if tr.Decision != iam.Allowed {
			t.Errorf("denied: %s %s on %s (%s)", tr.Identity, tr.Action, tr.Resource, tr.Decision)
		}
	}
	for _, id := range []string{"producer", "operator", "analyst"} {
		if by[id] == 0 {
			t.Errorf("no call signed as %s (calls by identity: %v)", id, by)
		}
	}
	if os.Getenv("DDBPIPE_IAM") != "on" {
		t.Error("the stack's variables do not say IAM is judged")
	}
}
