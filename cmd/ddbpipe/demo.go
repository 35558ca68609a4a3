package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/schedule"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// demo runs the whole pipeline locally with a small workload through every
// event source and prints what happened.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var u upFlags
	u.register(fs)
	nVotes := fs.Int("votes", 2000, "distinct votes to send (10 % more are re-sent as duplicates)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o, logf, err := u.options(stdout)
	if err != nil {
		return err
	}
	defer logf.Close()
	if o.Servers != nil {
		// -attach: the servers' endpoints and key this process was started
		// with (`ddbpipe local servers --`) have served their purpose. The
		// demo's commands (tables rotate, archive ls and query) read the
		// process environment before the stack's local.env, as against AWS;
		// left set, those variables would take them past the stack's
		// proxies and its IAM judge, to the servers themselves.
		for k := range o.Servers.Vars() {
			os.Unsetenv(k)
		}
	}
	return runDemo(ctx, o, *nVotes, stdout, stderr)
}

// runDemo is the demo on a stack of options o: the servers it starts, or
// those of o.Servers (-attach: the gate runs it so, on its shared servers).
func runDemo(ctx context.Context, o stack.Options, nVotes int, stdout, stderr io.Writer) error {
	began := time.Now()
	fmt.Fprintln(stdout, "== ddbpipe demo: the whole pipeline on this machine ==")
	o.MovableClock = true // the archive's part moves every clock past the month
	env, err := stack.Up(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		start := time.Now()
		if err := env.Close(); err != nil {
			fmt.Fprintln(stderr, "stop:", err)
		}
		fmt.Fprintf(stdout, "stack stopped in %s; total %s\n", time.Since(start).Round(10*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	}()
	if err := env.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n-- workload: a smoke path through every event source")

	// Flow 2: a poll, votes through SQS (10 % re-sent), counted exactly once.
	counted, err := demoVotes(ctx, env, nVotes, stdout)
	if err != nil {
		return err
	}

	// Flow 1: documents through the HTTP API; S3 uploads → ObjectsFinalizeFunction;
	// the objects table's stream → ObjectsReaperFunction and ArchiverFunction.
	fmt.Fprintln(stdout, "\n-- large objects: HTTP API, presigned uploads, reaper, search")
	if err := demoObjects(ctx, env, stdout); err != nil {
		return err
	}

	if err := triggerSchedules(ctx, env, stdout); err != nil {
		return err
	}
	if err := demoAPIAuth(env, stdout); err != nil {
		return err
	}

	// The rotator subscribed this month's ledger table to the archiver:
	// every counted vote reaches the archive through the table's stream.
	want := map[string]int{"ObjectsReaperFunction": 1, "ArchiverFunction": nVotes, "ObjectsFinalizeFunction": 1}
	if err := waitRecords(ctx, env.Runner, want, 90*time.Second); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n-- cold months: the ledger archived through its stream, verified, compacted, retired; SQL over the archive")
	if err := demoArchive(ctx, env, counted, stdout); err != nil {
		return err
	}
	report(stdout, env)
	return iamReport(stdout, env)
}

// triggerSchedules invokes the scheduled functions (the sweeper, the
// rotator) by hand through the local Lambda API.
func triggerSchedules(ctx context.Context, env *stack.Env, w io.Writer) error {
	lc := lambda.NewFromConfig(env.AWS)
	for _, fn := range []string{"ObjectsSweeperFunction", "RotatorFunction"} {
		ev, err := schedule.ScheduledEvent("arn:aws:events:"+env.Vars["AWS_REGION"]+":000000000000:rule/demo-manual", time.Now(), "demo-"+fn)
		if err != nil {
			return err
		}
		payload, _ := json.Marshal(ev) // plain struct
		out, err := lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(fn), Payload: payload})
		if err != nil {
			return fmt.Errorf("trigger %s: %w", fn, err)
		}
		if out.FunctionError != nil {
			return fmt.Errorf("trigger %s: function error: %s", fn, out.Payload)
		}
	}
	fmt.Fprintln(w, "triggered the scheduled functions (sweeper, rotator) by hand through the local Lambda API")
	return nil
}

// demoAPIAuth shows the HTTP API's authorization: /health is public; every
// other route wants SigV4, which the demo's client adds (an unsigned call
// shows the refusal).
func demoAPIAuth(env *stack.Env, w io.Writer) error {
	for _, c := range []struct {
		label, path string
		hc          *http.Client
	}{
		{"", "/health", http.DefaultClient},
		{" (unsigned)", "/polls/any/results", http.DefaultClient},
		{" (signed)", "/polls/any/results", env.APIClient()},
	} {
		resp, err := c.hc.Get(env.Vars["API_URL"] + c.path)
		if err != nil {
			return fmt.Errorf("GET %s: %w", c.path, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		fmt.Fprintf(w, "GET %s%s → %d %s\n", c.path, c.label, resp.StatusCode, strings.TrimSpace(string(body)))
		if c.label == " (unsigned)" && resp.StatusCode != http.StatusForbidden {
			return fmt.Errorf("unsigned GET %s = %d, want 403: the local API does not enforce the template's AWS_IAM", c.path, resp.StatusCode)
		}
	}
	return nil
}

// iamReport says what the IAM judge saw: per identity, the distinct calls
// it judged and how many it denied; any denial fails the demo.
func iamReport(w io.Writer, env *stack.Env) error {
	if env.Judge == nil {
		fmt.Fprintln(w, "\n-- IAM: not judged (-iam=false)")
		return nil
	}
	type count struct{ calls, denied int }
	by := map[string]*count{}
	var denied []string
	for t := range env.Judge.Triples() {
		c := by[t.Identity]
		if c == nil {
			c = &count{}
			by[t.Identity] = c
		}
		c.calls++
		if t.Decision != iam.Allowed {
			c.denied++
			denied = append(denied, fmt.Sprintf("%s %s on %s (%s)", t.Identity, t.Action, t.Resource, t.Decision))
		}
	}
	fmt.Fprintln(w, "\n-- IAM: every AWS call judged against its caller's role or policy in the transformed template")
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "%-24s %4d distinct calls, %d denied\n", n, by[n].calls, by[n].denied)
	}
	fmt.Fprintf(w, "(each distinct call, with its decision: %s)\n", env.IAMLogPath)
	if len(denied) > 0 {
		sort.Strings(denied)
		return fmt.Errorf("IAM denied %d calls the demo made:\n  %s", len(denied), strings.Join(denied, "\n  "))
	}
	return nil
}

// waitRecords waits until each function has received at least the given records.
func waitRecords(ctx context.Context, r *runner.Runner, want map[string]int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		missing := []string{}
		got := map[string]int{}
		for _, s := range r.Stats() {
			got[s.Function] = s.Records
		}
		for fn, n := range want {
			if got[fn] < n {
				missing = append(missing, fmt.Sprintf("%s %d/%d", fn, got[fn], n))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: events did not arrive within %s: %s", limit, strings.Join(missing, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func report(w io.Writer, env *stack.Env) {
	fmt.Fprintln(w, "\n-- what the runner did")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "function\tinvocations\trecords\terrors\tavg ms\t")
	for _, s := range env.Runner.Stats() {
		avg := 0.0
		if s.Invocations > 0 {
			avg = float64(s.Total.Microseconds()) / float64(s.Invocations) / 1000
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t\n", s.Function, s.Invocations, s.Records, s.Errors, avg)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n-- requests through the proxies")
	for _, svc := range []faultproxy.Service{faultproxy.DynamoDB, faultproxy.SQS, faultproxy.S3} {
		st := env.Proxies[svc].Stats()
		fmt.Fprintf(w, "%-9s %5d requests, %d forwarded, %d throttled, %d server errors, %d dropped\n",
			svc, st.Requests, st.Forwarded, st.Throttled+st.KeyThrottled, st.ServerErrors, st.Dropped)
	}
	if rss, err := env.Servers.RSSBytes(); err == nil {
		fmt.Fprintf(w, "\nlocal servers' memory (RSS): %.0f MB\n", float64(rss)/(1<<20))
	}
}

// demoVotes creates a poll through the HTTP API, sends votes with the
// load generator, waits until the counter has counted them and prints
// the results read from the shards.
// demoStall is how long the demo waits for a count that does not move.
const demoStall = time.Minute

func demoVotes(ctx context.Context, env *stack.Env, n int, w io.Writer) (pollCount, error) {
	v := env.Vars
	poll := fmt.Sprintf("demo-%d", time.Now().Unix())
	options := []string{"red", "green", "blue", "yellow"}
	body := fmt.Sprintf(`{"pollId":%q,"options":["red","green","blue","yellow"],"shards":8}`, poll)
	// Signed with SigV4 (the local credentials), as the AWS_IAM route requires.
	resp, err := env.APIClient().Post(v["API_URL"]+"/polls", "application/json", strings.NewReader(body))
	if err != nil {
		return pollCount{}, fmt.Errorf("create poll: %w", err)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var e struct{ Error, Message string } // {"error","message"}; the gateway's own answers have no error
		if json.Unmarshal(raw, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(raw))
		}
		return pollCount{}, fmt.Errorf("create poll: HTTP %d %s: %s", resp.StatusCode, e.Error, e.Message)
	}
	fmt.Fprintf(w, "created poll %s (4 options, 8 shards) with POST /polls\n", poll)
	// Sent as a producer (ProducerPolicy's identity when IAM is judged).
	producerSQS := sqs.NewFromConfig(env.AWSAs(asProducer))
	producer := votessqs.NewProducer(producerSQS, v["VOTES_QUEUE_URL"])
	load, err := votesload.Run(ctx, producer, votesload.Options{PollID: poll, Options: options, Count: n, DupRate: 0.1, Skew: 0.8, Concurrency: 4})
	if err != nil {
		return pollCount{}, fmt.Errorf("send votes: %w", err)
	}
	fmt.Fprintf(w, "sent %d votes and %d duplicates (same voteId) to the votes queue in %s\n", load.Sent, load.Duplicates, load.Elapsed.Round(time.Millisecond))
	bad := []string{`not json`, `{"voteId":"x","pollId":"` + poll + `","optionId":"purple","voterId":"u","castAt":"2026-01-01T00:00:00Z"}`,
		`{"voteId":"y","pollId":"no-such-poll","optionId":"red","voterId":"u","castAt":"2026-01-01T00:00:00Z"}`}
	for i, b := range bad {
		if _, err := producerSQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(v["VOTES_QUEUE_URL"]), MessageBody: aws.String(b)}); err != nil {
			return pollCount{}, fmt.Errorf("send bad vote %d: %w", i, err)
		}
	}
	fmt.Fprintf(w, "sent %d bad votes (not JSON, unknown option, unknown poll)\n", len(bad))
	start := time.Now()
	var t votes.Totals
	store := votesddb.New(env.Clients.DynamoDB, v["COUNTERS_TABLE_NAME"], v["LEDGER_TABLE_PREFIX"])
	// Counting takes as long as the machine needs (a busy one counts a
	// few votes a second): the demo waits while the count moves, says how
	// far it got every 15 s, and gives up once it has not moved for a minute.
	var last int64
	moved, told := start, start
	for {
		if t, err = votes.Results(ctx, store, poll, time.Now); err != nil {
			return pollCount{}, err
		}
		if t.Total >= int64(load.Sent) || time.Since(moved) > demoStall {
			break
		}
		if t.Total != last {
			last, moved = t.Total, time.Now()
		}
		if time.Since(told) >= 15*time.Second {
			told = time.Now()
			fmt.Fprintf(w, "  counting: %d of %d after %s\n", t.Total, load.Sent, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return pollCount{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(w, "counted in %s; results from the %d shards (GET /polls/%s/results):\n", time.Since(start).Round(100*time.Millisecond), t.Shards, poll)
	for _, o := range options {
		mark := "ok"
		if t.Totals[o] != int64(load.PerOption[o]) {
			mark = fmt.Sprintf("MISMATCH: sent %d", load.PerOption[o])
		}
		fmt.Fprintf(w, "  %-7s %6d  %s\n", o, t.Totals[o], mark)
	}
	fmt.Fprintf(w, "  total   %6d  (distinct votes sent: %d; duplicates dropped)\n", t.Total, load.Sent)
	if t.Total != int64(load.Sent) {
		return pollCount{}, fmt.Errorf("demo: counted %d votes, sent %d distinct; the count had not moved for %s", t.Total, load.Sent, demoStall)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := env.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(v["VOTES_REJECTS_QUEUE_URL"]),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			return pollCount{}, err
		}
		if out.Attributes["ApproximateNumberOfMessages"] == fmt.Sprint(len(bad)) || time.Now().After(deadline) {
			fmt.Fprintf(w, "rejects queue holds %s messages, each with its reason\n", out.Attributes["ApproximateNumberOfMessages"])
			return pollCount{poll: poll, totals: t.Totals}, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}
