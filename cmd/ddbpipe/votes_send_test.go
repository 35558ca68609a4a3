package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

// votesSendEnvOf is a getenv over a map.
func votesSendEnvOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestVotesSendFlagErrors(t *testing.T) {
	empty := t.TempDir() // a state folder without local.env
	noURL := t.TempDir()
	if err := os.WriteFile(filepath.Join(noURL, "local.env"), []byte("export AWS_REGION='us-east-1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // in the error or stderr
	}{
		{"no poll", []string{}, "--poll is required"},
		{"empty poll", []string{"--poll", ""}, "--poll is required"},
		{"hash in poll", []string{"--poll", "a#b"}, `--poll "a#b"`},
		{"control character in poll", []string{"--poll", "a\tb"}, "control characters"},
		{"poll too long", []string{"--poll", strings.Repeat("p", 129)}, "limit is 128"},
		{"negative count", []string{"--poll", "p", "--count", "-5"}, "--count -5: want at least 1"},
		{"zero count", []string{"--poll", "p", "--count", "0"}, "--count 0"},
		{"count not a number", []string{"--poll", "p", "--count", "many"}, "invalid value"},
		{"dup rate over 1", []string{"--poll", "p", "--dup-rate", "1.5"}, "--dup-rate 1.5: want a share between 0 and 1"},
		{"negative dup rate", []string{"--poll", "p", "--dup-rate", "-0.1"}, "--dup-rate -0.1"},
		{"dup rate NaN", []string{"--poll", "p", "--dup-rate", "NaN"}, "--dup-rate NaN"},
		{"negative rate", []string{"--poll", "p", "--rate", "-1"}, "--rate -1"},
		{"infinite rate", []string{"--poll", "p", "--rate", "+Inf"}, "--rate +Inf"},
		{"negative voters", []string{"--poll", "p", "--voters", "-1"}, "--voters -1"},
		{"no concurrency", []string{"--poll", "p", "--concurrency", "0"}, "--concurrency 0"},
		{"hash in option", []string{"--poll", "p", "--options", "a,b#c"}, `option "b#c"`},
		{"empty option", []string{"--poll", "p", "--options", "a,,c"}, `option ""`},
		{"option twice", []string{"--poll", "p", "--options", "a,b,a"}, "listed twice"},
		{"unknown flag", []string{"--poll", "p", "--nope"}, "flag provided but not defined"},
		{"stray argument", []string{"--poll", "p", "extra"}, `unexpected argument "extra"`},
		{"no check without options", []string{"--poll", "p", "--no-check"}, "--options is required with --no-check"},
		{"check without a counters table", []string{"--poll", "p", "--queue-url", "http://127.0.0.1:9/q"}, "cannot check the poll: no counters table"},
		{"no queue anywhere", []string{"--poll", "p", "--state-dir", empty}, "no votes queue: pass --queue-url"},
		{"local.env without the queue", []string{"--poll", "p", "--state-dir", noURL}, "has no VOTES_QUEUE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := votesSendEnv(t.Context(), tt.args, &stdout, &stderr, votesSendEnvOf(nil))
			if err == nil {
				t.Fatalf("no error; stdout %s", stdout.String())
			}
			if got := err.Error() + stderr.String(); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

func TestVotesSendHelp(t *testing.T) {
	var stderr bytes.Buffer
	_ = votesSendEnv(t.Context(), []string{"-h"}, &bytes.Buffer{}, &stderr, votesSendEnvOf(nil))
	for _, want := range []string{"usage: ddbpipe votes send --poll P", "-dup-rate", "-no-check", "every option of the poll", "VOTES_QUEUE_URL"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestVotesSendCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 20000: "20,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := votesCommas(n); got != want {
			t.Errorf("votesCommas(%d) = %q, want %q", n, got, want)
		}
	}
}

// votesSendStack returns the package's local servers (see stacktest).
func votesSendStack(t *testing.T) *servers.Stack {
	t.Helper()
	return stacktest.Need(t)
}

func TestMain(m *testing.M) { stacktest.Main(m) }

func TestVotesSendToLocalQueue(t *testing.T) {
	s := votesSendStack(t)
	vars := map[string]string{
		"AWS_REGION": servers.Region, "AWS_ACCESS_KEY_ID": servers.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY": servers.SecretAccessKey, "AWS_ENDPOINT_URL_SQS": s.SQS,
	}
	// Built as the command builds its own (awsenv, through stacktest.Config):
	// the SDK's default HTTP client can lose a ReceiveMessage answer on a
	// loaded machine, and its messages would stay hidden for the 600 s the
	// receive asks.
	client := sqs.NewFromConfig(stacktest.Config(t, s, nil))
	q, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("votes-send-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	queueURL := aws.ToString(q.QueueUrl)

	// receive takes every message on the queue: votes by voteId, and the count.
	receive := func(t *testing.T, want int) (map[string]votes.Vote, int) {
		t.Helper()
		got, n := map[string]votes.Vote{}, 0
		for bound := time.Now().Add(time.Minute); ; {
			wait := int32(1)
			if n >= want {
				wait = 0 // one last look, for extra messages
			}
			out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
				QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: wait, VisibilityTimeout: 600,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				v, err := votes.Parse([]byte(aws.ToString(m.Body)), time.Now())
				if err != nil {
					t.Fatalf("the command sent a vote the counter rejects: %v", err)
				}
				got[v.VoteID] = v
				n++
			}
			if n >= want && len(out.Messages) == 0 || time.Now().After(bound) {
				return got, n
			}
		}
	}

	t.Run("queue flag, progress, summary", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		args := []string{"--poll", "demo", "--count", "50", "--dup-rate", "0.2", "--options", "yes,no", "--queue-url", queueURL, "--progress", "--no-check"}
		if err := votesSendEnv(t.Context(), args, &stdout, &stderr, votesSendEnvOf(vars)); err != nil {
			t.Fatalf("votes send: %v\n%s", err, stderr.String())
		}
		got, n := receive(t, 60)
		if n != 60 || len(got) != 50 {
			t.Errorf("received %d messages, %d distinct; want 60, 50", n, len(got))
		}
		per := map[string]int{}
		for _, v := range got {
			if v.PollID != "demo" {
				t.Errorf("vote on poll %q, want demo", v.PollID)
			}
			per[v.OptionID]++
		}
		summary := stdout.String()
		for _, want := range []string{"sent 50 votes on poll demo (+10 duplicates) to " + queueURL, fmt.Sprintf("yes %d, no %d", per["yes"], per["no"])} {
			if !strings.Contains(summary, want) {
				t.Errorf("summary %q lacks %q", summary, want)
			}
		}
		if strings.Count(summary, "\n") != 2 || !strings.Contains(summary, "the poll was not checked") {
			t.Errorf("summary %q, want one line and the hint that the poll was not checked", summary)
		}
		if bar := stderr.String(); !strings.Contains(bar, "\r[####################] 60/60 votes") || !strings.Contains(bar, "dup 10") || !strings.HasSuffix(bar, "\n") {
			t.Errorf("progress %q, want a full bar redrawn with \\r, ending the line", bar)
		}
	})

	t.Run("local.env, json, quiet", func(t *testing.T) {
		state := t.TempDir()
		var env strings.Builder
		for k, v := range vars {
			fmt.Fprintf(&env, "export %s='%s'\n", k, v)
		}
		fmt.Fprintf(&env, "export VOTES_QUEUE_URL='%s'\n", queueURL)
		if err := os.WriteFile(filepath.Join(state, "local.env"), []byte(env.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		args := []string{"--poll", "demo", "--count", "5", "--options", "yes", "--state-dir", state, "--json", "--quiet", "--no-check"}
		if err := votesSendEnv(t.Context(), args, &stdout, &stderr, votesSendEnvOf(nil)); err != nil {
			t.Fatalf("votes send: %v\n%s", err, stderr.String())
		}
		var res struct {
			PollID     string         `json:"pollId"`
			Sent       int            `json:"sent"`
			Duplicates int            `json:"duplicates"`
			Failed     int            `json:"failed"`
			PerOption  map[string]int `json:"perOption"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout.String())
		}
		if res.PollID != "demo" || res.Sent != 5 || res.Duplicates != 0 || res.Failed != 0 || res.PerOption["yes"] != 5 {
			t.Errorf("result %+v, want 5 votes for yes", res)
		}
		if stderr.Len() != 0 {
			t.Errorf("stderr %q, want nothing with --quiet", stderr.String())
		}
		if got, n := receive(t, 5); n != 5 || len(got) != 5 {
			t.Errorf("received %d messages, %d distinct; want 5", n, len(got))
		}
	})
}

// Without --no-check, votes send reads the poll: an unknown poll names the
// polls there are, an unknown option the poll's options, a closed poll when
// it closed; nothing is sent then. Without --options it votes for all the
// poll's options, and it says when the votes will be counted.
func TestVotesSendChecksThePoll(t *testing.T) {
	s := votesSendStack(t)
	cfg := stacktest.Config(t, s, nil)
	db := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("send-counters-%d", time.Now().UnixNano())
	if _, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("pollCatalog"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("pollId"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange}},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String(votesddb.PollsIndex),
			KeySchema:  []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pollCatalog"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("pollId"), KeyType: ddbtypes.KeyTypeRange}},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll}}},
	}); err != nil {
		t.Fatal(err)
	}
	store := votesddb.New(db, table, table+"-votes")
	for _, p := range []votes.Poll{
		{ID: "color", Options: []string{"red", "green", "blue"}, Shards: 2},
		{ID: "closed", Options: []string{"a"}, Shards: 1, Closes: time.Now().Add(-time.Hour), Opens: time.Now().Add(-2 * time.Hour)},
	} {
		if err := store.CreatePoll(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	client := sqs.NewFromConfig(cfg)
	q, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("send-check-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"AWS_REGION": servers.Region, "AWS_ACCESS_KEY_ID": servers.AccessKeyID, "AWS_SECRET_ACCESS_KEY": servers.SecretAccessKey,
		"AWS_ENDPOINT_URL_SQS": s.SQS, "AWS_ENDPOINT_URL_DYNAMODB": s.DynamoDB, "VOTES_QUEUE_URL": aws.ToString(q.QueueUrl),
		"COUNTERS_TABLE_NAME": table, "COUNTER_BATCHING_WINDOW_SECONDS": "5", "TALLY_BATCHING_WINDOW_SECONDS": "1",
	}
	depth := func() string {
		out, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown poll", []string{"--poll", "nope"}, `no poll "nope" (polls: closed, color)`},
		{"unknown option", []string{"--poll", "color", "--options", "red,pink"}, `poll color has no option "pink"; its options are red, green, blue`},
		{"closed poll", []string{"--poll", "closed"}, "poll closed closed at "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := votesSendEnv(t.Context(), tt.args, &stdout, &stderr, votesSendEnvOf(vars))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
			if d := depth(); d != "0" {
				t.Errorf("the queue holds %s messages after a refused send", d)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := votesSendEnv(t.Context(), []string{"--poll", "color", "--count", "30"}, &stdout, &stderr, votesSendEnvOf(vars)); err != nil {
		t.Fatalf("votes send: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"sent 30 votes on poll color", ": red ", ", green ", ", blue ", "counted in about 7s", "votes results -poll color"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "not checked") {
		t.Errorf("output %q says the poll was not checked", out)
	}
}
