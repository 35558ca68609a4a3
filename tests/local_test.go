package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

// upLocal runs the whole template locally, as `ddbpipe local up` does.
func upLocal(t *testing.T) *stack.Env { return upLocalWith(t, nil) }

// upLocalWith runs the template with parameter overrides.
func upLocalWith(t *testing.T, params map[string]string) *stack.Env {
	t.Helper()
	return upLocalOn(t, stacktest.Need(t), params, 0) // the servers every stack of the tests shares
}

// upLocalAt runs the template on the shared servers with every function's
// clock at `at` when the stack starts (it runs on from there). Its tests
// wait on the archive, so the archiver gathers records for 1 s (the
// template's 10 s made three waves of votes take 49 s).
func upLocalAt(t *testing.T, at time.Time) *stack.Env {
	t.Helper()
	return upLocalOn(t, stacktest.Need(t), map[string]string{"ArchiveBatchingWindowSeconds": "1"}, time.Until(at))
}

// upLocalOn runs the template on st, with every function's clock moved by
// offset (0: the real clock).
func upLocalOn(t *testing.T, st *servers.Stack, params map[string]string, offset time.Duration, tune ...func(*stack.Options)) *stack.Env {
	t.Helper()
	o := stack.Options{
		Servers: st, ClockOffset: offset,
		Root: repoRoot(t), Setups: registry.All, StackName: unique("e2e"), FunctionLog: functionLog(t), Params: params,
		KeyWriteLimit: 1000, // AWS: 1,000 write units per second per partition
	}
	for _, f := range tune {
		f(&o)
	}
	env, err := stack.Up(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	if err := env.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return env
}

func records(r *runner.Runner, fn string) int {
	for _, s := range r.Stats() {
		if s.Function == fn {
			return s.Records
		}
	}
	return -1
}

func inFlight(r *runner.Runner, fn string) int {
	for _, s := range r.Stats() {
		if s.Function == fn {
			return s.InFlight
		}
	}
	return -1
}

func invocations(r *runner.Runner, fn string) int {
	for _, s := range r.Stats() {
		if s.Function == fn {
			return s.Invocations
		}
	}
	return -1
}

// The template runs locally: every output is in the env file, every event
// source delivers, and throttles injected by the proxies are retried.
func TestLocalStackEndToEnd(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	env := upLocal(t)
	ctx := context.Background()
	v := env.Vars

	path := filepath.Join(t.TempDir(), "local.env")
	if err := env.WriteEnvFile(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, name := range []string{"VOTES_QUEUE_URL", "ARCHIVE_BUCKET_NAME", "API_URL", "OBJECTS_TABLE_STREAM_ARN", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_LAMBDA"} {
		if !strings.Contains(string(b), "export "+name+"=") {
			t.Errorf("local.env lacks %s", name)
		}
	}
	if !strings.HasPrefix(v["API_URL"], "http://127.0.0.1:") {
		t.Errorf("API_URL = %q, want the local HTTP API", v["API_URL"])
	}

	// Throttles on every service: the SDK's retries carry the work through.
	for _, svc := range []faultproxy.Service{faultproxy.DynamoDB, faultproxy.SQS, faultproxy.S3} {
		env.Proxies[svc].SetFaults(faultproxy.Faults{FailNext: 2}) // the default retryer makes 3 attempts
	}

	c := newClients(t, map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": v["AWS_ENDPOINT_URL_DYNAMODB"], "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": v["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"],
		"AWS_ENDPOINT_URL_SQS": v["AWS_ENDPOINT_URL_SQS"], "AWS_ENDPOINT_URL_S3": v["AWS_ENDPOINT_URL_S3"], "AWS_ENDPOINT_URL_LAMBDA": v["AWS_ENDPOINT_URL_LAMBDA"],
	})
	var bodies []string
	for i := 0; i < 30; i++ {
		bodies = append(bodies, fmt.Sprintf(`{"voteId":"v%d","pollId":"p","optionId":"a","voterId":"u%d","castAt":"2026-11-21T10:00:00Z"}`, i, i))
	}
	sendBodies(t, c, v["VOTES_QUEUE_URL"], bodies...)
	for _, k := range []string{"doc-1", "doc-2"} {
		if _, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(v["OBJECTS_TABLE_NAME"]), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: k}, "sk": &ddbtypes.AttributeValueMemberS{Value: "v0"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(v["OBJECTS_BUCKET_NAME"]), Key: aws.String("uploads/a b.txt"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(v["OBJECTS_BUCKET_NAME"]), Key: aws.String("elsewhere/b.txt"), Body: strings.NewReader("y")}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, "votes, stream records and the upload delivered", func() bool {
		return records(env.Runner, "CounterFunction") >= 30 && records(env.Runner, "ArchiverFunction") >= 2 &&
			records(env.Runner, "ObjectsReaperFunction") >= 2 && records(env.Runner, "ObjectsFinalizeFunction") >= 1
	})
	// The archiver wrote the objects table's changes as Parquet under the table's partition.
	eventually(t, 60*time.Second, "Parquet files in the archive", func() bool {
		out, err := c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(v["ARCHIVE_BUCKET_NAME"]), Prefix: aws.String("table=" + v["OBJECTS_TABLE_NAME"] + "/")})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			if !strings.HasSuffix(aws.ToString(o.Key), ".parquet") {
				t.Errorf("unexpected archive object %s", aws.ToString(o.Key))
			}
		}
		return len(out.Contents) > 0
	})
	time.Sleep(500 * time.Millisecond)
	if got := records(env.Runner, "ObjectsFinalizeFunction"); got != 1 {
		t.Errorf("finalize got %d notifications, want 1 (the prefix filter uploads/ excludes elsewhere/)", got)
	}
	for _, svc := range []faultproxy.Service{faultproxy.DynamoDB, faultproxy.SQS, faultproxy.S3} {
		if st := env.Proxies[svc].Stats(); st.Throttled < 2 {
			t.Errorf("%s proxy throttled %d requests, want the 2 injected", svc, st.Throttled)
		}
	}

	// HTTP API route, answering as docs/openapi.yaml says.
	plain := openAPIChecked(t, env, http.DefaultClient, true)
	resp, err := plain.Get(v["API_URL"] + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("GET /health = %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(v["API_URL"] + "/no/such/route")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /no/such/route = %d, want 404", resp.StatusCode)
	}

	// The template's AWS_IAM default holds locally: every route but
	// /health wants SigV4 with the local key; unsigned or wrongly signed
	// requests get API Gateway's 403.
	for _, tt := range []struct {
		name   string
		hc     *http.Client
		status int
	}{
		{"unsigned", plain, 403},
		{"wrong secret", openAPIChecked(t, env, wrongKey(t, env, v["API_URL"]), true), 403},
		{"signed", openAPIChecked(t, env, env.APIClient(), true), 0}, // signed: past the authorizer, whatever the function answers
	} {
		resp, err := tt.hc.Get(v["API_URL"] + "/polls/no-such-poll/results")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.StatusCode; got != tt.status && (tt.status != 0 || got == 401 || got == 403) {
			t.Errorf("%s GET /polls/…/results = %d %s, want %d", tt.name, resp.StatusCode, body, tt.status)
		}
	}

	// Manual trigger of a scheduled function through the Lambda API.
	lc := lambda.NewFromConfig(c.cfg)
	before := invocations(env.Runner, "RotatorFunction")
	out, err := lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("RotatorFunction"),
		Payload: []byte(`{"version":"0","id":"t","detail-type":"Scheduled Event","source":"aws.events","time":"2026-12-03T00:00:00Z","detail":{}}`)})
	if err != nil || out.FunctionError != nil {
		t.Fatalf("invoke rotator: %v %v", err, out)
	}
	// At least one more: its daily schedule (00:15 UTC) may run it too.
	if got := invocations(env.Runner, "RotatorFunction"); got < before+1 {
		t.Errorf("rotator invocations %d, want at least %d", got, before+1)
	}
	if _, err := lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("NoSuchFunction")}); err == nil {
		t.Error("invoking an unknown function succeeded")
	}

	// A table created at run time subscribes through CreateEventSourceMapping.
	// It is named as a monthly ledger (<stack>-votes-YYYY-MM): the archiver's
	// role reads those streams only, as on AWS.
	table, streamARN := streamTableNamed(t, c, v["LEDGER_TABLE_PREFIX"]+"-2099-12")
	esm, err := lc.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("ArchiverFunction"), EventSourceArn: aws.String(streamARN),
		StartingPosition: lambdatypes.EventSourcePositionTrimHorizon, BatchSize: aws.Int32(100),
		BisectBatchOnFunctionError: aws.Bool(true), MaximumRetryAttempts: aws.Int32(2),
		FunctionResponseTypes: []lambdatypes.FunctionResponseType{lambdatypes.FunctionResponseTypeReportBatchItemFailures},
		DestinationConfig:     &lambdatypes.DestinationConfig{OnFailure: &lambdatypes.OnFailure{Destination: aws.String(env.Stack.Resources["StreamFailuresQueue"].Attrs["Arn"])}},
	})
	if err != nil {
		t.Fatal(err)
	}
	archived := records(env.Runner, "ArchiverFunction")
	if _, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "m"}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the new table's record at the archiver", func() bool { return records(env.Runner, "ArchiverFunction") > archived })
	// The rotator, invoked above, subscribed its own monthly tables: list this stream's.
	list, err := lc.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String("ArchiverFunction"), EventSourceArn: aws.String(streamARN)})
	if err != nil || len(list.EventSourceMappings) != 1 || aws.ToString(list.EventSourceMappings[0].UUID) != aws.ToString(esm.UUID) {
		t.Fatalf("list mappings: %v %+v", err, list)
	}
	if _, err := lc.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: esm.UUID}); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: esm.UUID}); err == nil {
		t.Error("a deleted mapping is still there")
	}
}

// Every function has a sample event in events/ (the one `sam local invoke
// -e` takes), and the function's handler accepts it.
func TestSampleEventsRoundTrip(t *testing.T) {
	t.Parallel()
	env := upLocal(t)
	for _, f := range mustTemplate(t).Functions() {
		name := filepath.Join(repoRoot(t), "events", strings.TrimPrefix(f.Dir(), "functions/")+".json")
		t.Run(f.LogicalID, func(t *testing.T) {
			payload, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("no sample event: %v", err)
			}
			if _, err := env.Runner.Invoke(context.Background(), f.LogicalID, payload); err != nil {
				t.Errorf("%s rejects %s: %v", f.LogicalID, name, err)
			}
		})
	}
}

// wrongKey is a client that signs with the local key id and a wrong secret.
func wrongKey(t *testing.T, env *stack.Env, apiURL string) *http.Client {
	t.Helper()
	cfg := env.AWS.Copy()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(env.Vars["AWS_ACCESS_KEY_ID"], "not-the-secret", "")
	hc, err := sigv4.Client(cfg, apiURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// functionLog keeps the functions' log of t's stack in a file that goes
// when t passes. When t fails, the file stays, and t's output names it with
// its last lines: what the counter and the tally did before a timeout.
func functionLog(t *testing.T) io.Writer {
	t.Helper()
	f, err := os.CreateTemp("", "ddbpipe-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the stack's Close, registered later
		_ = f.Close()
		if !t.Failed() {
			_ = os.Remove(f.Name())
			return
		}
		b, _ := os.ReadFile(f.Name())
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("the functions' log is kept in %s; its last lines:\n%s", f.Name(), strings.Join(lines[max(0, len(lines)-30):], "\n"))
	})
	return f
}
