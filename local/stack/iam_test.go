package stack_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

var seq atomic.Int64

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// upBare starts a stack on the shared servers without IAM and without the
// rotator's run, named prefix and a unique suffix, closed when t ends.
func upBare(t *testing.T, prefix string, tune ...func(*stack.Options)) *stack.Env {
	t.Helper()
	return upStack(t, stack.Options{
		Root: repoRoot(t), Servers: stacktest.Need(t), Setups: registry.All, NoRotation: true, NoIAM: true,
		StackName: fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1)), StateDir: t.TempDir(),
	}, tune...)
}

// upStack starts a stack with o, tuned, closed when t ends.
func upStack(t *testing.T, o stack.Options, tune ...func(*stack.Options)) *stack.Env {
	t.Helper()
	for _, f := range tune {
		f(&o)
	}
	env, err := stack.Up(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// upJudged starts a stack with IAM enforced on template (the repository's
// when ""), without the rotator's run (the tests call as identities
// directly).
func upJudged(t *testing.T, template string) *stack.Env {
	t.Helper()
	return upJudgedWith(t, template, "", nil)
}

// upJudgedWith is upJudged with the state folder (its iam/ holds the
// records; "" a new one) and parameter overrides. The records stay out of
// DDBPIPE_IAM_RECORDS (these stacks make denied calls on purpose): with
// neither it nor Options.IAMRecords, a stack keeps them in its state
// folder, where the tests read them.
func upJudgedWith(t *testing.T, template, state string, params map[string]string, tune ...func(*stack.Options)) *stack.Env {
	t.Helper()
	st := stacktest.Need(t)
	root := repoRoot(t)
	if state == "" {
		state = t.TempDir()
	}
	t.Setenv(stack.IAMRecordsVar, "")
	env := upStack(t, stack.Options{
		Root: root, Template: template, Servers: st, Setups: registry.All, NoRotation: true, Params: params,
		StackName: fmt.Sprintf("iam-%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)), StateDir: state,
	}, tune...)
	if want := filepath.Join(state, "iam") + string(filepath.Separator); !strings.HasPrefix(env.IAMLogPath, want) {
		t.Fatalf("the stack records its IAM calls in %s, want its state folder's %s", env.IAMLogPath, want)
	}
	return env
}

// apiError returns the service error code and HTTP status of err.
func apiError(err error) (string, int) {
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	code, status := "", 0
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// TestIAMJudgesCalls: each identity may make the calls its role grants and
// no other; a denied call fails as the service fails it.
func TestIAMJudgesCalls(t *testing.T) {
	env := upJudged(t, "")
	ctx := context.Background()
	res := env.Stack.Resources
	counters, archive, objects := res["CountersTable"].Ref, res["ArchiveBucket"].Ref, res["ObjectsBucket"].Ref
	counter := awsenv.DynamoDB(env.AWSAs("CounterFunction"))
	item := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "iam"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "t"}}

	if _, err := counter.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(counters), Item: item}); err != nil {
		t.Errorf("counter PutItem on its counters table: %v, want allowed", err)
	}
	_, err := counter.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(counters)})
	if code, status := apiError(err); code != "AccessDeniedException" || status != 400 {
		t.Errorf("counter Scan: %v (%s %d), want AccessDeniedException 400", err, code, status)
	} else if !strings.Contains(err.Error(), "dynamodb:Scan") {
		t.Errorf("counter Scan: %v, want the action named", err)
	}

	archiver := awsenv.S3(env.AWSAs("ArchiverFunction"))
	if _, err := archiver.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(archive), Key: aws.String("table=t/month=2026-01/x.parquet"), Body: strings.NewReader("x")}); err != nil {
		t.Errorf("archiver PutObject into the archive: %v, want allowed", err)
	}
	_, err = archiver.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(objects), Key: aws.String("blobs/x"), Body: strings.NewReader("x")})
	if code, status := apiError(err); code != "AccessDenied" || status != 403 {
		t.Errorf("archiver PutObject into the objects bucket: %v (%s %d), want AccessDenied 403", err, code, status)
	}

	queues := sqs.NewFromConfig(env.AWSAs("CounterFunction"))
	if _, err := queues.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(res["VotesRejectsQueue"].Ref), MessageBody: aws.String("{}")}); err != nil {
		t.Errorf("counter SendMessage to the rejects queue: %v, want allowed", err)
	}
	_, err = queues.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(res["VotesQueue"].Ref), MessageBody: aws.String("{}")})
	if code, status := apiError(err); code != "AccessDenied" || status != 403 {
		t.Errorf("counter SendMessage to the votes queue: %v (%s %d), want AccessDenied 403", err, code, status)
	}

	// A presigned URL is judged as its signer's call, then handed on to S3.
	presign := s3.NewPresignClient(awsenv.S3(env.AWSAs("ObjectsApiFunction")))
	put, err := presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(objects), Key: aws.String("uploads/iam-test")}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(put.Method, put.URL, bytes.NewReader([]byte("payload")))
	for k, v := range put.SignedHeader {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("presigned PUT by the objects API: %s %s, want 200", resp.Status, body)
	}

	// The local HTTP API asks the judge too: execute-api:Invoke on the
	// route's ARN, for the signer. ApiReadPolicy reads, and may not write.
	reader, err := sigv4.Client(env.AWSAs("api-read"), env.APIURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := sigv4.Client(env.AWSAs("api-invoke"), env.APIURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(c *http.Client, method, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, env.APIURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	if resp, body := call(writer, "PUT", "/objects/iam/doc.txt", "judged"); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT as api-invoke: %s %s, want it stored", resp.Status, body)
	}
	if resp, body := call(reader, "GET", "/objects/iam/doc.txt", ""); resp.StatusCode != http.StatusOK || body != "judged" {
		t.Errorf("GET as api-read: %s %q, want 200 judged", resp.Status, body)
	}
	denied, msg := call(reader, "DELETE", "/objects/iam/doc.txt", "")
	if denied.StatusCode != http.StatusForbidden || denied.Header.Get("X-Amzn-Errortype") != "AccessDeniedException" ||
		!strings.Contains(msg, "execute-api:Invoke on resource: arn:aws:execute-api:us-east-1:000000000000:local/$default/DELETE/objects/iam/doc.txt") {
		t.Errorf("DELETE as api-read: %s %s %s, want 403 AccessDeniedException naming the route", denied.Status, denied.Header.Get("X-Amzn-Errortype"), msg)
	}
	if resp, body := call(reader, "GET", "/objects/iam/doc.txt", ""); resp.StatusCode != http.StatusOK || body != "judged" {
		t.Errorf("GET after the refused DELETE: %s %q, want the document still there", resp.Status, body)
	}

	// The admin (the tests' and the CLI's credentials) may do anything.
	if _, err := env.Clients.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(counters)}); err != nil {
		t.Errorf("admin Scan: %v", err)
	}

	got := env.Judge.Triples()
	for _, want := range []iam.Triple{
		{Identity: "CounterFunction", Action: "dynamodb:PutItem", Resource: "arn:aws:dynamodb:us-east-1:000000000000:table/" + counters, Decision: iam.Allowed},
		{Identity: "CounterFunction", Action: "dynamodb:Scan", Resource: "arn:aws:dynamodb:us-east-1:000000000000:table/" + counters, Decision: iam.ImplicitlyDenied},
		{Identity: "ObjectsApiFunction", Action: "s3:PutObject", Resource: "arn:aws:s3:::" + objects + "/uploads/iam-test", Decision: iam.Allowed},
	} {
		if got[want] == 0 {
			t.Errorf("no record of %+v", want)
		}
	}
	// Repeated calls are judged from the cache, without the evaluator
	// (the time it takes is `make bench`'s to report).
	_, asked := env.Judge.CacheLatency(false, 0.5)
	_, cached := env.Judge.CacheLatency(true, 0.5)
	for range 200 {
		if _, err := counter.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(counters), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	_, asked2 := env.Judge.CacheLatency(false, 0.5)
	p50, cached2 := env.Judge.CacheLatency(true, 0.5)
	t.Logf("judge: 200 repeated calls, p50 %s from the cache", p50)
	// The stack's pollers keep calling meanwhile (their repeated calls
	// are cached too: one made a run count 201), so at least 200.
	if asked2 != asked || cached2-cached < 200 {
		t.Errorf("200 repeated calls: %d answered from the cache, %d asked the evaluator; want at least 200 and 0", cached2-cached, asked2-asked)
	}
}

// mutate writes a copy of template.yaml with old replaced by new, inside
// the resource named within (its first occurrence after "  within:").
func mutate(t *testing.T, within, old, new string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(src, []byte("\n  "+within+":\n"))
	if start < 0 {
		t.Fatalf("no resource %s in template.yaml", within)
	}
	at := bytes.Index(src[start:], []byte(old))
	if at < 0 {
		t.Fatalf("%s: %q is not in template.yaml", within, old)
	}
	at += start
	mutated := append(append(bytes.Clone(src[:at]), new...), src[at+len(old):]...)
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// archiverPut is the archiver's grant to write the archive.
const archiverPut = `              - Effect: Allow
                Action: [s3:PutObject]
                Resource: [!Sub "${ArchiveBucket.Arn}/table=*", !Sub "${ArchiveBucket.Arn}/quarantine/*"]
`

// TestIAMMutatedTemplate: remove the archiver's s3:PutObject from a copy of
// the template, and the archiver's flow (an objects table item, through
// the table's stream) fails with AccessDenied, and the check `make iam`
// runs over the stack's records names the identity, action and resource.
func TestIAMMutatedTemplate(t *testing.T) {
	records := t.TempDir()
	var progress lockedBuffer
	env := upJudgedWith(t, mutate(t, "ArchiverFunctionRole", archiverPut, ""), records, nil, func(o *stack.Options) { o.Progress = &progress })
	ctx := context.Background()
	if err := env.Start(ctx); err != nil {
		t.Fatal(err)
	}
	archiver := awsenv.S3(env.AWSAs("ArchiverFunction"))
	for range 2 {
		_, err := archiver.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(env.Stack.Resources["ArchiveBucket"].Ref), Key: aws.String("table=t/month=2026-01/x.parquet"), Body: strings.NewReader("x"),
		})
		if code, _ := apiError(err); code != "AccessDenied" || !strings.Contains(err.Error(), "s3:PutObject") {
			t.Errorf("archiver PutObject with the grant removed: %v, want AccessDenied naming s3:PutObject", err)
		}
	}
	// The stack's progress names the denied call as it happens, once.
	line := "IAM denied: ArchiverFunction may not s3:PutObject on arn:aws:s3:::"
	if n := strings.Count(progress.String(), "/table=t/month=2026-01/x.parquet (ImplicitlyDenied)\n"); n != 1 || !strings.Contains(progress.String(), line) {
		t.Errorf("the stack's progress names the denied PutObject %d times, want once (%q):\n%s", n, line, progress.String())
	}

	// The flow: an item written to the objects table reaches the archiver
	// through the stream; its write to the archive is refused.
	table := env.Stack.Resources["ObjectsTable"].Ref
	if _, err := env.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "mutated"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "v0"},
	}}); err != nil {
		t.Fatal(err)
	}
	bucket := env.Stack.Resources["ArchiveBucket"].Ref
	want := iam.CallPattern{Identity: "ArchiverFunction", Action: "s3:PutObject", Decision: iam.ImplicitlyDenied}
	deadline := time.Now().Add(60 * time.Second)
	var rep *iam.Report
	for {
		runs, err := iam.ReadRuns(filepath.Join(records, "iam"))
		if err != nil {
			t.Fatal(err)
		}
		rep = iam.Check(runs, nil)
		found := false
		for _, d := range rep.Denied {
			if d.Identity == want.Identity && d.Action == want.Action && d.Decision == want.Decision &&
				strings.HasPrefix(d.Resource, "arn:aws:s3:::"+strings.ReplaceAll(bucket, env.Stack.Options.StackName, iam.StackToken)+"/table="+iam.StackToken+"-objects/") {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the archiver's denied write is not in the records; denied: %+v", rep.Denied)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, err := listObjects(ctx, env, bucket, "table="+table+"/")
	if err != nil || out != 0 {
		t.Errorf("the archive holds %d files of the objects table (%v), want none", out, err)
	}
	msg := rep.Err()
	if msg == nil || !strings.Contains(msg.Error(), "denied: ArchiverFunction s3:PutObject on arn:aws:s3:::") {
		t.Errorf("the check's verdict %v, want it to name the archiver's denied s3:PutObject", msg)
	}
}

func listObjects(ctx context.Context, env *stack.Env, bucket, prefix string) (int, error) {
	out, err := env.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		return 0, err
	}
	return len(out.Contents), nil
}

// kmsKey is the key the KMS tests name (no local server encrypts with it:
// the judge checks the calls S3 would make to KMS on the caller's behalf).
const kmsKey = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// TestIAMWithKMSKey: with KmsKeyArn set, writing to and reading from the
// buckets also needs the key (GenerateDataKey, Decrypt through S3), which
// the roles that touch objects are granted, and only them.
func TestIAMWithKMSKey(t *testing.T) {
	env := upJudgedWith(t, "", "", map[string]string{"KmsKeyArn": kmsKey})
	ctx := context.Background()
	archive, objects := env.Stack.Resources["ArchiveBucket"].Ref, env.Stack.Resources["ObjectsBucket"].Ref
	if _, err := awsenv.S3(env.AWSAs("ArchiverFunction")).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(archive), Key: aws.String("table=t/month=2026-01/k.parquet"), Body: strings.NewReader("x")}); err != nil {
		t.Errorf("archiver PutObject with a KMS key: %v, want allowed", err)
	}
	api := awsenv.S3(env.AWSAs("ObjectsApiFunction"))
	if _, err := api.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(objects), Key: aws.String("blobs/k"), Body: strings.NewReader("x")}); err != nil {
		t.Errorf("objects API PutObject with a KMS key: %v, want allowed", err)
	}
	if _, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(objects), Key: aws.String("blobs/k")}); err != nil {
		t.Errorf("objects API GetObject with a KMS key: %v, want allowed", err)
	}
	got := env.Judge.Triples()
	for _, want := range []iam.Triple{
		{Identity: "ArchiverFunction", Action: "kms:GenerateDataKey", Resource: kmsKey, Decision: iam.Allowed},
		{Identity: "ObjectsApiFunction", Action: "kms:GenerateDataKey", Resource: kmsKey, Decision: iam.Allowed},
		{Identity: "ObjectsApiFunction", Action: "kms:Decrypt", Resource: kmsKey, Decision: iam.Allowed},
	} {
		if got[want] == 0 {
			t.Errorf("no record of %+v", want)
		}
	}

	// Without its grant on the key, the archiver's writes fail.
	kmsGrant := "              # With KmsKeyArn, S3 uses the key on its behalf: files written (GenerateDataKey).\n"
	path := mutate(t, "ArchiverFunctionRole", kmsGrant, "              - !If\n                - HasKmsKey\n                - Effect: Deny\n                  Action: [kms:GenerateDataKey]\n                  Resource: \"*\"\n                - !Ref AWS::NoValue\n"+kmsGrant)
	env = upJudgedWith(t, path, "", map[string]string{"KmsKeyArn": kmsKey})
	_, err := awsenv.S3(env.AWSAs("ArchiverFunction")).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(env.Stack.Resources["ArchiveBucket"].Ref), Key: aws.String("table=t/month=2026-01/k.parquet"), Body: strings.NewReader("x")})
	if code, _ := apiError(err); code != "AccessDenied" || !strings.Contains(err.Error(), "kms:GenerateDataKey") {
		t.Errorf("archiver PutObject denied the key: %v, want AccessDenied naming kms:GenerateDataKey", err)
	}
}

// lockedBuffer is a progress writer the stack's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
