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
	"runtime"
	"strings"
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
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

var seq atomic.Int64

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// upJudged starts a stack with IAM enforced on template (the repository's
// when ""), without the rotator's run (the tests call as identities
// directly).
func upJudged(t *testing.T, template string) *stack.Env {
	t.Helper()
	st := stacktest.Need(t)
	root := repoRoot(t)
	env, err := stack.Up(context.Background(), stack.Options{
		Root: root, Template: template, Servers: st, Setups: registry.All, NoRotation: true,
		StackName: fmt.Sprintf("iam-%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)), StateDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
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
	// Repeated calls are judged from the cache.
	before, _ := env.Judge.Latency(0.5)
	for range 200 {
		if _, err := counter.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(counters), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	p50, n := env.Judge.Latency(0.5)
	t.Logf("judge: %d requests, p50 %s (first %d distinct calls: p50 %s)", n, p50, n-200, before)
	if p50 > time.Millisecond {
		t.Errorf("judge p50 %s over 200 cached calls, want ≤ 1ms", p50)
	}
}

// TestIAMMutatedTemplate: remove the archiver's s3:PutObject from a copy of
// the template, and the archiver's writes to the archive are denied.
func TestIAMMutatedTemplate(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	grant := "Action: [s3:GetObject, s3:ListBucket, s3:GetBucketLocation, s3:GetObjectVersion, s3:PutObject,"
	start := bytes.Index(src, []byte("  ArchiverFunctionRole:"))
	at := bytes.Index(src[start:], []byte(grant))
	if start < 0 || at < 0 {
		t.Fatalf("the archiver's S3 grant (%q) is not in template.yaml", grant)
	}
	at += start
	mutated := append(append(bytes.Clone(src[:at]), strings.Replace(grant, " s3:PutObject,", "", 1)...), src[at+len(grant):]...)
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		t.Fatal(err)
	}
	env := upJudged(t, path)
	archiver := awsenv.S3(env.AWSAs("ArchiverFunction"))
	_, err = archiver.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(env.Stack.Resources["ArchiveBucket"].Ref), Key: aws.String("table=t/month=2026-01/x.parquet"), Body: strings.NewReader("x"),
	})
	if code, _ := apiError(err); code != "AccessDenied" || !strings.Contains(err.Error(), "s3:PutObject") {
		t.Errorf("archiver PutObject with the grant removed: %v, want AccessDenied naming s3:PutObject", err)
	}
}
