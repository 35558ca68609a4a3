package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/faultproxy"
	"github.com/ddbpipe/ddbpipe/shared/local"
	"github.com/ddbpipe/ddbpipe/shared/runner"
	"github.com/ddbpipe/ddbpipe/shared/schedule"
)

// demo runs the whole pipeline locally with a small workload through every
// event source and prints what happened.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var u upFlags
	u.register(fs)
	votes := fs.Int("votes", 50, "vote messages to send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o, logf, err := u.options(stdout)
	if err != nil {
		return err
	}
	defer logf.Close()
	began := time.Now()
	fmt.Fprintln(stdout, "== ddbpipe demo: the whole pipeline on this machine ==")
	env, err := local.Up(ctx, o)
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
	v := env.Vars
	fmt.Fprintln(stdout, "\n-- workload: a smoke path through every event source")

	// SQS → CounterFunction.
	q := env.Clients.SQS
	sent := 0
	for sent < *votes {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := 0; i < 10 && sent < *votes; i++ {
			body := fmt.Sprintf(`{"voteId":"demo-%d","pollId":"demo","optionId":"%c","voterId":"voter-%d","castAt":%q}`,
				sent, 'a'+rune(sent%3), sent, time.Now().UTC().Format(time.RFC3339))
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body)})
			sent++
		}
		if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(v["VOTES_QUEUE_URL"]), Entries: entries}); err != nil {
			return fmt.Errorf("send votes: %w", err)
		}
	}
	fmt.Fprintf(stdout, "sent %d votes to %s\n", sent, v["VOTES_QUEUE_URL"])

	// DynamoDB stream → ObjectsReaperFunction and ArchiverFunction.
	db := env.Clients.DynamoDB
	for i := 0; i < 5; i++ {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(v["OBJECTS_TABLE_NAME"]), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("demo/doc-%d", i)},
			"sk": &ddbtypes.AttributeValueMemberS{Value: "v0"},
		}}); err != nil {
			return fmt.Errorf("put item: %w", err)
		}
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(v["OBJECTS_TABLE_NAME"]), Key: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "demo/doc-0"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "v0"},
	}}); err != nil {
		return fmt.Errorf("delete item: %w", err)
	}
	fmt.Fprintf(stdout, "wrote 5 items and deleted 1 in %s (6 stream records)\n", v["OBJECTS_TABLE_NAME"])

	// S3 ObjectCreated → ObjectsFinalizeFunction.
	s3c := env.Clients.S3
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(v["OBJECTS_BUCKET_NAME"]), Key: aws.String("uploads/demo.txt"), Body: strings.NewReader("hello, ddbpipe\n")}); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	fmt.Fprintf(stdout, "uploaded s3://%s/uploads/demo.txt\n", v["OBJECTS_BUCKET_NAME"])

	// Schedules, triggered by hand through the local Lambda API.
	lc := lambda.NewFromConfig(env.AWS)
	for _, fn := range []string{"ObjectsSweeperFunction", "RotatorFunction"} {
		ev, err := schedule.ScheduledEvent("arn:aws:events:"+v["AWS_REGION"]+":000000000000:rule/demo-manual", time.Now(), "demo-"+fn)
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
	fmt.Fprintln(stdout, "triggered the scheduled functions (sweeper, rotator) by hand through the local Lambda API")

	// HTTP API → VotesApiFunction and ObjectsApiFunction.
	for _, path := range []string{"/health", "/polls/demo/results"} {
		resp, err := http.Get(v["API_URL"] + path)
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		fmt.Fprintf(stdout, "GET %s → %d %s\n", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}

	want := map[string]int{"CounterFunction": *votes, "ObjectsReaperFunction": 6, "ArchiverFunction": 6, "ObjectsFinalizeFunction": 1}
	if err := waitRecords(ctx, env.Runner, want, 60*time.Second); err != nil {
		return err
	}
	report(stdout, env)
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

func report(w io.Writer, env *local.Env) {
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
