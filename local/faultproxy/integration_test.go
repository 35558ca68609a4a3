package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
)

// These tests put the proxy in front of real local servers: stacktest's,
// the running ones AWS_ENDPOINT_URL_DYNAMODB, _SQS and _S3 name (as `make
// test` exports them) or else servers this package starts once (skipped
// under -short, and without Java/Node unless DDBPIPE_REQUIRE_STACK=1).

func TestMain(m *testing.M) { stacktest.Main(m) }

// localUpstream is the server behind the proxy: variable names its endpoint.
func localUpstream(t *testing.T, variable string) string {
	t.Helper()
	return stacktest.Need(t).Vars()[variable]
}

// localConfig is the servers' credentials and region.
func localConfig(t *testing.T) (aws.CredentialsProvider, string) {
	t.Helper()
	v := stacktest.Need(t).Vars()
	return credentials.NewStaticCredentialsProvider(v["AWS_ACCESS_KEY_ID"], v["AWS_SECRET_ACCESS_KEY"], ""), v["AWS_REGION"]
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

func TestIntegrationDynamoDBLocal(t *testing.T) {
	upstream := localUpstream(t, "AWS_ENDPOINT_URL_DYNAMODB")
	clock := newFakeClock()
	p, endpoint := MustStart(t, DynamoDB, upstream, WithClock(clock), WithKeyWriteLimit(5))
	creds, region := localConfig(t)
	client := func(maxAttempts int) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{
			Region: region, BaseEndpoint: aws.String(endpoint), Credentials: creds, RetryMaxAttempts: maxAttempts,
		}, func(o *dynamodb.Options) { o.Retryer = withoutBackoff(o.Retryer) })
	}
	ctx := t.Context()
	table := uniqueName("faultproxy")

	_, err := client(0).CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable through proxy: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client(0).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	item := func(kb int) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{
			"id":  &ddbtypes.AttributeValueMemberS{Value: "hot"},
			"doc": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", kb*1024-100)},
		}
	}

	p.SetFaults(Faults{FailNext: 2})
	if _, err := client(0).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(3)}); err != nil {
		t.Fatalf("PutItem after 2 throttles: %v", err)
	}
	if got := p.Stats().ByAction["PutItem"]; got.Throttled != 2 || got.Forwarded != 1 {
		t.Errorf("ByAction[PutItem] = %+v, want 2 throttled, 1 forwarded", got)
	}
	out, err := client(0).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "hot"}},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem = %v, %v; want the item", out, err)
	}

	// 3 of the key's 5 units are spent; 3 more must wait for the refill.
	_, err = client(1).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(3)})
	var ptee *ddbtypes.ProvisionedThroughputExceededException
	if !errors.As(err, &ptee) {
		t.Fatalf("PutItem over the key limit: err = %v, want ProvisionedThroughputExceededException", err)
	}
	clock.Advance(time.Second)
	if _, err := client(1).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(3)}); err != nil {
		t.Errorf("PutItem after the refill: %v", err)
	}
}

func TestIntegrationSQSLocal(t *testing.T) {
	upstream := localUpstream(t, "AWS_ENDPOINT_URL_SQS")
	p, endpoint := MustStart(t, SQS, upstream)
	creds, region := localConfig(t)
	client := sqs.New(sqs.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: creds},
		func(o *sqs.Options) { o.Retryer = withoutBackoff(o.Retryer) })
	ctx := t.Context()

	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(uniqueName("faultproxy"))})
	if err != nil {
		t.Fatalf("CreateQueue through proxy: %v", err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })

	p.SetFaults(Faults{FailNext: 2})
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("vote")}); err != nil {
		t.Fatalf("SendMessage after 2 throttles: %v", err)
	}
	if got := p.Stats().ByAction["SendMessage"]; got.Throttled != 2 || got.Forwarded != 1 {
		t.Errorf("ByAction[SendMessage] = %+v, want 2 throttled, 1 forwarded", got)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "vote" {
		t.Fatalf("ReceiveMessage = %+v, %v; want the message", out, err)
	}
}

func TestIntegrationS3Local(t *testing.T) {
	upstream := localUpstream(t, "AWS_ENDPOINT_URL_S3")
	p, endpoint := MustStart(t, S3, upstream)
	creds, region := localConfig(t)
	client := s3.New(s3.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: creds, UsePathStyle: true},
		func(o *s3.Options) { o.Retryer = withoutBackoff(o.Retryer) })
	ctx := t.Context()
	bucket, key := uniqueName("faultproxy"), "docs/a.bin"

	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket through proxy: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		_, _ = client.DeleteBucket(context.Background(), &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	seen := observe(p)

	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	p.SetFaults(Faults{FailNext: 1})
	put, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("PutObject after a SlowDown: %v", err)
	}
	ex := seen.Next(t)
	if !ex.ObjectCreated() || ex.Operation.Bucket != bucket || ex.Operation.Key != key {
		t.Errorf("observed %+v, want ObjectCreated for %s/%s", ex.Operation, bucket, key)
	}
	if ex.ETag != aws.ToString(put.ETag) || ex.ObjectSize != int64(len(body)) {
		t.Errorf("observed ETag %q size %d, want %q %d", ex.ETag, ex.ObjectSize, aws.ToString(put.ETag), len(body))
	}

	get, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	defer get.Body.Close()
	got, err := io.ReadAll(get.Body)
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("GetObject body = %d bytes, %v; want the %d bytes put", len(got), err, len(body))
	}
}
