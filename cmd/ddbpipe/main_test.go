package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

func TestCommandLineErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.json")
	_ = os.WriteFile(bad, []byte("{not json"), 0o644)
	tests := []struct {
		name string
		args []string
		want string // in the error or stderr
	}{
		{"no command", nil, "usage: ddbpipe"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"hostile command", []string{"local; rm -rf /"}, "unknown command"},
		{"invoke without a function", []string{"local", "invoke"}, "usage: ddbpipe local invoke FUNCTION"},
		{"invoke with nothing running", []string{"local", "invoke", "RotatorFunction", "-state-dir", tmp}, "is `ddbpipe local up` running?"},
		{"bad -param", []string{"local", "up", "-param", "novalue"}, "want Name=Value"},
		{"attach with a data folder", []string{"local", "up", "-attach", "-data-dir", tmp}, "-attach runs on servers of others"},
		{"unknown flag", []string{"demo", "-nope"}, "flag provided but not defined"},
		{"root without the pins", []string{"local", "install", "-root", tmp}, "tools/localstack/package.json"},
		{"no grace", []string{"tables", "rotate", "-grace-days", "0", "-state-dir", tmp}, "-grace-days 0: want 1 to 27 days"},
		{"too much grace", []string{"tables", "rotate", "-grace-days", "28", "-state-dir", tmp}, "-grace-days 28: want 1 to 27 days"},
		{"negative wait", []string{"tables", "ls", "-wait", "-1s", "-state-dir", tmp}, "-wait -1s: want a duration of 0 or more"},
		{"bad -now", []string{"tables", "ls", "-now", "tomorrow", "-state-dir", tmp}, `-now "tomorrow": want an RFC 3339 time`},
		{"search size without a number", []string{"objects", "search", "-min-size", "big", "x"}, `-min-size "big": want bytes`},
		{"search size with an unknown unit", []string{"objects", "search", "-max-size", "3TB", "x"}, `-max-size "3TB"`},
		{"search size overflowing", []string{"objects", "search", "-min-size", "99999999999GiB", "x"}, `-min-size "99999999999GiB"`},
		{"search since not a time", []string{"objects", "search", "-since", "last week", "x"}, `-since "last week": want an RFC 3339 time, a date`},
		{"verify without a stack", []string{"search", "verify", "-state-dir", tmp}, "no search index, objects table or bucket"},
		{"reindex with arguments", []string{"search", "reindex", "now"}, "search reindex: takes no arguments"},
		{"search negative pages", []string{"objects", "search", "-pages", "-1", "x"}, "-pages -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil {
				t.Fatalf("no error; stdout %s", stdout.String())
			}
			if got := err.Error() + stderr.String(); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}
	// -attach where no servers are named: the error says how to name them.
	t.Run("attach without servers", func(t *testing.T) {
		for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3"} {
			t.Setenv(k, "")
		}
		err := run(context.Background(), []string{"local", "up", "-attach", "-state-dir", tmp}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "no servers in this environment") || !strings.Contains(err.Error(), "ddbpipe local servers --") {
			t.Errorf("local up -attach without servers: %v", err)
		}
	})
	// -attach with the AWS endpoints but no search engine: named, not a
	// failed function setup later.
	t.Run("attach without a search engine", func(t *testing.T) {
		for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3"} {
			t.Setenv(k, "http://127.0.0.1:9")
		}
		t.Setenv("DDBPIPE_SEARCH_ENGINE_URL", "")
		err := run(context.Background(), []string{"local", "up", "-attach", "-state-dir", tmp}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "DDBPIPE_SEARCH_ENGINE_URL unset") {
			t.Errorf("local up -attach without a search engine: %v", err)
		}
	})
}

// Help asked for goes to stdout and is not an error; a command line that
// does not parse prints usage on stderr and is one.
func TestHelp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // on stdout
	}{
		{[]string{"--help"}, "usage: ddbpipe <command>"},
		{[]string{"-h"}, "usage: ddbpipe <command>"},
		{[]string{"help"}, "polls ls"},
		{[]string{"help", "votes", "send"}, "-no-check"},
		{[]string{"votes", "send", "-h"}, "usage: ddbpipe votes send"},
		{[]string{"local", "up", "--help"}, "-state-dir string"},
		{[]string{"polls", "ls", "-h"}, "ddbpipe polls ls: list the polls"},
		{[]string{"objects", "get", "-help"}, "-version"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), tt.args, &stdout, &stderr); err != nil {
				t.Fatalf("error %v; stderr %s", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.want)
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			if strings.Contains(stdout.String(), "-state-dir local up") {
				t.Errorf("a flag's argument is named from its usage's backquotes:\n%s", stdout.String())
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), nil, &stdout, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "usage: ddbpipe") {
		t.Errorf("no command: %v, stderr %q", err, stderr.String())
	}
}

// Errors read in the user's words: a refused local endpoint is a stack not
// running, JSON errors name fields and JSON types, the errors a user's
// request causes lose their package's prefix; other errors show whole.
func TestUserMessage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there now
	_, dialErr := net.Dial("tcp", addr)
	var v struct {
		Options []string `json:"options"`
	}
	jsonErr := json.Unmarshal([]byte(`{"options":"a"}`), &v)
	q, err := archive.LookupNamedQuery("votes-per-option")
	if err != nil {
		t.Fatal(err)
	}
	namedQueryArgs := q.CheckArgs([]string{"flavor", "color"})
	for _, tt := range []struct {
		name string
		err  error
		want string
		not  []string
	}{
		{"refused", fmt.Errorf("votesddb: get poll p: %w", dialErr), "the local stack is not running (nothing answers at " + addr + ")", []string{"dial tcp", "connect:"}},
		{"json", fmt.Errorf("read answer: %w", jsonErr), `field "options": want an array of strings, got a string`, []string{"Go struct", "[]string"}},
		{"prefixes", votes.Poll{ID: "../x", Options: []string{"a"}, Shards: 1}.Validate(), "poll: rejected (bad-id)", []string{"votes: "}},
		{"wrapped", fmt.Errorf("vote 3: %w", &votes.RejectError{Reason: votes.ReasonUnknownOption, Detail: "no option x"}), "vote 3: rejected (unknown-option): no option x", []string{"votes: "}},
		{"named query", namedQueryArgs, `votes-per-option: argument 1 is the month (YYYY-MM), and "flavor" is not one`, []string{"archive: "}},
		{"not the user's", fmt.Errorf("votesddb: get poll p: %w", errors.New("ThrottlingException")), "votesddb: get poll p: ThrottlingException", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := userMessage(tt.err)
			if !strings.Contains(got, tt.want) {
				t.Errorf("userMessage = %q, want %q", got, tt.want)
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("userMessage = %q shows %q", got, n)
				}
			}
		})
	}
}

func TestLoadEnvFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "local.env")
	in := "# comment\nexport A='plain'\nexport B='it'\\''s'\nexport C='x=y'\n"
	_ = os.WriteFile(path, []byte(in), 0o644)
	got, err := loadEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"A": "plain", "B": "it's", "C": "x=y"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}

// `local up` in a real process: it writes local.env, serves the API, answers
// `local invoke`, and `local down` stops it together with its servers.
func TestLocalUpInvokeDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the local stack")
	}
	if _, err := exec.LookPath("java"); err != nil && os.Getenv("DDBPIPE_REQUIRE_STACK") != "1" {
		t.Skip("java not found")
	}
	tmp := t.TempDir()
	bin := testBinary(t, tmp)
	state := filepath.Join(tmp, "state")
	up := exec.Command(bin, "local", "up", "-state-dir", state)
	up.Dir = "../.."
	stdout, _ := up.StdoutPipe()
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = up.Process.Kill(); _ = up.Wait() }()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "stops it") {
				ready <- all.String()
			}
		}
		close(ready)
	}()
	var banner string
	select {
	case banner = <-ready:
	case <-time.After(5 * time.Minute):
		t.Fatal("local up did not become ready")
	}
	if !strings.Contains(banner, "sqs: ") || !strings.Contains(banner, "stream: ") {
		t.Errorf("banner lacks the event source mappings:\n%s", banner)
	}
	vars, err := loadEnvFile(filepath.Join(state, "local.env"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(vars["API_URL"] + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /health = %d", resp.StatusCode)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"local", "invoke", "RotatorFunction", "-state-dir", state}, &out, &errb); err != nil {
		t.Errorf("local invoke: %v %s", err, errb.String())
	}
	// An SQS event's invoke says what became of each message. The sample
	// vote is cast now: with its own date it would be refused month-closed
	// once November and its grace are over, before its poll is looked up.
	out.Reset()
	sample, err := os.ReadFile("../../events/counter.json")
	if err != nil {
		t.Fatal(err)
	}
	event := filepath.Join(t.TempDir(), "counter.json")
	castNow := strings.Replace(string(sample), "2026-11-21T10:00:00Z", time.Now().UTC().Format(time.RFC3339), 1)
	if castNow == string(sample) {
		t.Fatal("events/counter.json no longer casts its vote at 2026-11-21T10:00:00Z: update this test")
	}
	if err := os.WriteFile(event, []byte(castNow), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"local", "invoke", "CounterFunction", "-event", event, "-state-dir", state}, &out, &errb); err != nil {
		t.Errorf("local invoke CounterFunction: %v %s", err, errb.String())
	}
	if want := `059f36b4-87a3-44ab-83d2-661975830a7d: rejected, unknown-poll: no poll "best-color"`; !strings.Contains(out.String(), want) {
		t.Errorf("local invoke CounterFunction printed %q, want %q", out.String(), want)
	}
	// Polls: create, list, read; votes send reads the poll. The commands
	// read this process's environment before local.env: the endpoints of
	// `local servers` (make test) are not the stack's.
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "")
	}
	for _, args := range [][]string{
		{"polls", "create", "-poll", "best-color", "-options", "red,blue"},
		{"polls", "create", "-poll", "sizes", "-options", "s,m,l", "-one-vote-per-voter"},
	} {
		if err := run(context.Background(), append(args, "-state-dir", state), io.Discard, &errb); err != nil {
			t.Fatalf("%v: %v %s", args, err, errb.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"polls", "ls", "-state-dir", state}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "POLL") || !strings.HasPrefix(lines[1], "best-color  red,blue") || !strings.HasPrefix(lines[2], "sizes ") || !strings.Contains(lines[2], " yes ") {
		t.Errorf("polls ls:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"polls", "get", "-json", "-state-dir", state, "sizes"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"options":["s","m","l"]`) || !strings.Contains(out.String(), `"oneVotePerVoter":true`) {
		t.Errorf("polls get -json sizes: %s", out.String())
	}
	if err := run(context.Background(), []string{"polls", "get", "-state-dir", state, "nope"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), `no poll "nope"`) {
		t.Errorf("polls get nope: %v", err)
	}
	if err := run(context.Background(), []string{"votes", "send", "-poll", "best-color", "-options", "green", "-state-dir", state}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), `poll best-color has no option "green"; its options are red, blue`) {
		t.Errorf("votes send for an option the poll lacks: %v", err)
	}
	// local clock moves every clock of the stack: the rotator, invoked on
	// the 2nd of next month (this month still in its grace: nothing to
	// retire), creates the month after next; back, the clock is real.
	clock := func(args ...string) string {
		t.Helper()
		var o bytes.Buffer
		if err := run(context.Background(), append([]string{"local", "clock", "-state-dir", state}, args...), &o, &errb); err != nil {
			t.Fatalf("local clock %v: %v", args, err)
		}
		return o.String()
	}
	if got := clock(); !strings.Contains(got, "(the real clock)") {
		t.Errorf("local clock: %q, want the real clock", got)
	}
	now := time.Now().UTC()
	second := time.Date(now.Year(), now.Month()+1, 2, 0, 0, 0, 0, time.UTC)
	if got := clock(second.Format(time.RFC3339)); !strings.HasPrefix(got, second.Format(time.RFC3339)) {
		t.Errorf("local clock %s: %q", second.Format(time.RFC3339), got)
	}
	if err := run(context.Background(), []string{"local", "invoke", "RotatorFunction", "-state-dir", state}, io.Discard, &errb); err != nil {
		t.Errorf("local invoke RotatorFunction on %s: %v", second.Format(time.DateOnly), err)
	}
	ahead, _ := ledger.Add(ledger.MonthOf(second), 1)
	var tables bytes.Buffer
	if err := run(context.Background(), []string{"tables", "ls", "-state-dir", state}, &tables, &errb); err != nil || !strings.Contains(tables.String(), ledger.TableName(vars["LEDGER_TABLE_PREFIX"], ahead)) {
		t.Errorf("tables ls on %s: %v\n%s; want %s's table", second.Format(time.DateOnly), err, tables.String(), ahead)
	}
	if got := clock("now"); !strings.Contains(got, "(the real clock)") {
		t.Errorf("local clock now: %q, want the real clock", got)
	}
	err = run(context.Background(), []string{"local", "invoke", "NoSuchFunction", "-state-dir", state}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Errorf("invoking an unknown function: %v", err)
	}
	if err := run(context.Background(), []string{"local", "up", "-state-dir", state}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second local up: %v, want 'already running'", err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"local", "down", "-state-dir", state}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("local up exit: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "local.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}
	// Commands then say the stack is not running, not a dial error.
	err = run(context.Background(), []string{"votes", "results", "-poll", "best-color", "-state-dir", state}, io.Discard, io.Discard)
	if msg := userMessage(err); err == nil || !strings.Contains(msg, "the local stack is not running") || !strings.Contains(msg, "ddbpipe local up") || strings.Contains(msg, "dial tcp") {
		t.Errorf("votes results after local down: %v, shown as %q", err, msg)
	}
	// A listing prints nothing, not its header, before that error.
	var lsOut bytes.Buffer
	err = run(context.Background(), []string{"objects", "ls", "-state-dir", state}, &lsOut, io.Discard)
	if msg := userMessage(err); err == nil || !strings.Contains(msg, "the local stack is not running") || lsOut.Len() != 0 {
		t.Errorf("objects ls after local down: %v, shown as %q, with output %q; want the error alone", err, msg, lsOut.String())
	}
	// The API port no longer answers: everything stopped.
	c := http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get(vars["API_URL"] + "/health"); err == nil {
		resp.Body.Close()
		t.Error("the HTTP API still answers after local down")
	}
}

// testBinary is this CLI as a program: $DDBPIPE_BIN, which make test
// builds from this source before the tests (a relative path is from the
// repository's root), or one built here.
func testBinary(t *testing.T, tmp string) string {
	t.Helper()
	if bin := os.Getenv("DDBPIPE_BIN"); bin != "" {
		if !filepath.IsAbs(bin) {
			abs, err := filepath.Abs(filepath.Join("..", "..", bin))
			if err != nil {
				t.Fatal(err)
			}
			bin = abs
		}
		return bin
	}
	bin := filepath.Join(tmp, "ddbpipe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}
