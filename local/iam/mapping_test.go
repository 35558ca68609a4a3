package iam

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

var place = Place{Region: "us-east-1", AccountID: "000000000000"}

// capture records the request an SDK client sends and fails it, so each
// case sees the exact wire request of one operation.
type capture struct{ reqs []*http.Request }

var errCaptured = errors.New("captured")

func (c *capture) Do(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.reqs = append(c.reqs, r)
	return nil, errCaptured
}

type clients struct {
	ddb     *dynamodb.Client
	streams *dynamodbstreams.Client
	s3      *s3.Client
	presign *s3.PresignClient
	sqs     *sqs.Client
	lambda  *lambda.Client
}

func newClients(c *capture) clients {
	cfg := aws.Config{
		Region:      place.Region,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		HTTPClient:  c,
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	base := func(u string) *string { return aws.String(u) }
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = base("http://127.0.0.1:7070"); o.UsePathStyle = true })
	return clients{
		ddb:     dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = base("http://127.0.0.1:8000") }),
		streams: dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = base("http://127.0.0.1:8000") }),
		s3:      s3c,
		presign: s3.NewPresignClient(s3c),
		sqs:     sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = base("http://127.0.0.1:9324") }),
		lambda:  lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = base("http://127.0.0.1:9001") }),
	}
}

const (
	table      = "arn:aws:dynamodb:us-east-1:000000000000:table/"
	queueURL   = "http://127.0.0.1:9324/000000000000/ddbpipe-votes"
	queueARN   = "arn:aws:sqs:us-east-1:000000000000:ddbpipe-votes"
	streamARN  = "arn:aws:dynamodb:ddblocal:000000000000:table/ddbpipe-objects/stream/2026-01-01T00:00:00.000"
	streamWant = "arn:aws:dynamodb:us-east-1:000000000000:table/ddbpipe-objects/stream/2026-01-01T00:00:00.000"
)

func key() map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "s"}}
}

func one(action, resource string) []Call { return []Call{{Action: action, Resource: resource}} }

// TestMapSDKCalls covers every operation the code base calls (shared/,
// local/, cmd/, functions/), as the SDK sends it.
func TestMapSDKCalls(t *testing.T) {
	s := aws.String
	tests := []struct {
		name string
		svc  Service
		call func(context.Context, clients) error
		want []Call
	}{
		// DynamoDB items.
		{"PutItem", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: s("ddbpipe-votes-2026-01"), Item: key()})
			return err
		}, one("dynamodb:PutItem", table+"ddbpipe-votes-2026-01")},
		{"GetItem", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: s("ddbpipe-counters"), Key: key()})
			return err
		}, one("dynamodb:GetItem", table+"ddbpipe-counters")},
		{"UpdateItem", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: s("ddbpipe-objects"), Key: key()})
			return err
		}, one("dynamodb:UpdateItem", table+"ddbpipe-objects")},
		{"DeleteItem", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: s("ddbpipe-objects"), Key: key()})
			return err
		}, one("dynamodb:DeleteItem", table+"ddbpipe-objects")},
		{"Query table", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.Query(ctx, &dynamodb.QueryInput{TableName: s("ddbpipe-objects"), KeyConditionExpression: s("pk = :p")})
			return err
		}, one("dynamodb:Query", table+"ddbpipe-objects")},
		{"Query index", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.Query(ctx, &dynamodb.QueryInput{TableName: s("ddbpipe-objects"), IndexName: s("latest"), KeyConditionExpression: s("listShard = :s")})
			return err
		}, one("dynamodb:Query", table+"ddbpipe-objects/index/latest")},
		{"Scan", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.Scan(ctx, &dynamodb.ScanInput{TableName: s("ddbpipe-votes-2026-01"), ConsistentRead: aws.Bool(true)})
			return err
		}, one("dynamodb:Scan", table+"ddbpipe-votes-2026-01")},
		{"BatchGetItem", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
				"ddbpipe-counters": {Keys: []map[string]ddbtypes.AttributeValue{key()}},
			}})
			return err
		}, one("dynamodb:BatchGetItem", table+"ddbpipe-counters")},
		{"BatchWriteItem two tables", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{
				"ddbpipe-objects":  {{DeleteRequest: &ddbtypes.DeleteRequest{Key: key()}}},
				"ddbpipe-counters": {{PutRequest: &ddbtypes.PutRequest{Item: key()}}},
			}})
			return err
		}, []Call{{Action: "dynamodb:BatchWriteItem", Resource: table + "ddbpipe-counters"}, {Action: "dynamodb:BatchWriteItem", Resource: table + "ddbpipe-objects"}}},
		{"TransactWriteItems", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Update: &ddbtypes.Update{TableName: s("ddbpipe-counters"), Key: key(), UpdateExpression: s("ADD n :one")}},
				{Update: &ddbtypes.Update{TableName: s("ddbpipe-counters"), Key: key(), UpdateExpression: s("ADD n :one")}},
				{Put: &ddbtypes.Put{TableName: s("ddbpipe-objects"), Item: key()}},
				{ConditionCheck: &ddbtypes.ConditionCheck{TableName: s("ddbpipe-objects"), Key: key(), ConditionExpression: s("attribute_exists(pk)")}},
				{Delete: &ddbtypes.Delete{TableName: s("ddbpipe-objects"), Key: key()}},
			}})
			return err
		}, []Call{
			{Action: "dynamodb:ConditionCheckItem", Resource: table + "ddbpipe-objects"},
			{Action: "dynamodb:DeleteItem", Resource: table + "ddbpipe-objects"},
			{Action: "dynamodb:PutItem", Resource: table + "ddbpipe-objects"},
			{Action: "dynamodb:UpdateItem", Resource: table + "ddbpipe-counters"},
		}},
		// DynamoDB tables (the rotator, provisioning, the CLI).
		{"CreateTable", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: s("ddbpipe-votes-2026-02")})
			return err
		}, one("dynamodb:CreateTable", table+"ddbpipe-votes-2026-02")},
		{"DeleteTable", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: s("ddbpipe-votes-2025-11")})
			return err
		}, one("dynamodb:DeleteTable", table+"ddbpipe-votes-2025-11")},
		{"DescribeTable", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s("ddbpipe-votes-2026-01")})
			return err
		}, one("dynamodb:DescribeTable", table+"ddbpipe-votes-2026-01")},
		{"UpdateTable", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: s("ddbpipe-votes-2026-01"), DeletionProtectionEnabled: aws.Bool(false)})
			return err
		}, one("dynamodb:UpdateTable", table+"ddbpipe-votes-2026-01")},
		{"ListTables", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.ListTables(ctx, &dynamodb.ListTablesInput{ExclusiveStartTableName: s("ddbpipe-votes-")})
			return err
		}, one("dynamodb:ListTables", "*")},
		{"UpdateTimeToLive", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: s("ddbpipe-counters"), TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: s("ttl"), Enabled: aws.Bool(true)}})
			return err
		}, one("dynamodb:UpdateTimeToLive", table+"ddbpipe-counters")},
		{"DescribeTimeToLive", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: s("ddbpipe-counters")})
			return err
		}, one("dynamodb:DescribeTimeToLive", table+"ddbpipe-counters")},
		{"TagResource", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: s("arn:aws:dynamodb:ddblocal:000000000000:table/ddbpipe-votes-2026-02"), Tags: []ddbtypes.Tag{{Key: s("k"), Value: s("v")}}})
			return err
		}, one("dynamodb:TagResource", table+"ddbpipe-votes-2026-02")},
		{"UpdateContinuousBackups", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: s("ddbpipe-votes-2026-02"), PointInTimeRecoverySpecification: &ddbtypes.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)}})
			return err
		}, one("dynamodb:UpdateContinuousBackups", table+"ddbpipe-votes-2026-02")},
		{"DescribeContinuousBackups", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: s("ddbpipe-votes-2026-02")})
			return err
		}, one("dynamodb:DescribeContinuousBackups", table+"ddbpipe-votes-2026-02")},
		// DynamoDB Streams (the runner's pollers, the rotator's drain).
		{"ListStreams", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.streams.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: s("ddbpipe-objects")})
			return err
		}, one("dynamodb:ListStreams", "*")},
		{"DescribeStream", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: s(streamARN)})
			return err
		}, one("dynamodb:DescribeStream", streamWant)},
		{"GetShardIterator", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: s(streamARN), ShardId: s("shardId-1"), ShardIteratorType: "TRIM_HORIZON"})
			return err
		}, one("dynamodb:GetShardIterator", streamWant)},
		{"GetRecords", DynamoDB, func(ctx context.Context, c clients) error {
			_, err := c.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: s(streamARN + "|1|AAAA")})
			return err
		}, one("dynamodb:GetRecords", streamWant)},

		// S3 objects.
		{"PutObject", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: s("arch"), Key: s("table=v/month=2026-01/part 1.parquet"), Body: strings.NewReader("x")})
			return err
		}, one("s3:PutObject", "arn:aws:s3:::arch/table=v/month=2026-01/part 1.parquet")},
		{"GetObject", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: s("objs"), Key: s("blobs/k")})
			return err
		}, one("s3:GetObject", "arn:aws:s3:::objs/blobs/k")},
		{"GetObject version", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: s("objs"), Key: s("blobs/k"), VersionId: s("v1")})
			return err
		}, one("s3:GetObjectVersion", "arn:aws:s3:::objs/blobs/k")},
		{"HeadObject", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: s("objs"), Key: s("uploads/u")})
			return err
		}, one("s3:GetObject", "arn:aws:s3:::objs/uploads/u")},
		{"DeleteObject", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: s("objs"), Key: s("uploads/u")})
			return err
		}, one("s3:DeleteObject", "arn:aws:s3:::objs/uploads/u")},
		{"DeleteObject version", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: s("objs"), Key: s("blobs/b"), VersionId: s("v2")})
			return err
		}, one("s3:DeleteObjectVersion", "arn:aws:s3:::objs/blobs/b")},
		{"DeleteObjects", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: s("arch"), Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{
				{Key: s("a/1")}, {Key: s("a/2"), VersionId: s("v")},
			}}})
			return err
		}, []Call{{Action: "s3:DeleteObject", Resource: "arn:aws:s3:::arch/a/1"}, {Action: "s3:DeleteObjectVersion", Resource: "arn:aws:s3:::arch/a/2"}}},
		{"ListObjectsV2", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: s("arch"), Prefix: s("table=v/"), Delimiter: s("/")})
			return err
		}, []Call{{Action: "s3:ListBucket", Resource: "arn:aws:s3:::arch", Context: map[string]string{"s3:prefix": "table=v/", "s3:delimiter": "/"}}}},
		{"ListObjectVersions", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: s("objs"), Prefix: s("blobs/")})
			return err
		}, []Call{{Action: "s3:ListBucketVersions", Resource: "arn:aws:s3:::objs", Context: map[string]string{"s3:prefix": "blobs/"}}}},
		{"CreateMultipartUpload", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: s("objs"), Key: s("uploads/u")})
			return err
		}, one("s3:PutObject", "arn:aws:s3:::objs/uploads/u")},
		{"CompleteMultipartUpload", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: s("objs"), Key: s("uploads/u"), UploadId: s("id")})
			return err
		}, one("s3:PutObject", "arn:aws:s3:::objs/uploads/u")},
		{"AbortMultipartUpload", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: s("objs"), Key: s("uploads/u"), UploadId: s("id")})
			return err
		}, one("s3:AbortMultipartUpload", "arn:aws:s3:::objs/uploads/u")},
		{"HeadBucket", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: s("arch")})
			return err
		}, one("s3:ListBucket", "arn:aws:s3:::arch")},
		{"CreateBucket", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: s("arch")})
			return err
		}, one("s3:CreateBucket", "arn:aws:s3:::arch")},
		{"PutBucketVersioning", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: s("arch"), VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
			return err
		}, one("s3:PutBucketVersioning", "arn:aws:s3:::arch")},
		{"PutBucketLifecycleConfiguration", S3, func(ctx context.Context, c clients) error {
			_, err := c.s3.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: s("arch"), LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{{Status: s3types.ExpirationStatusEnabled, Filter: &s3types.LifecycleRuleFilter{Prefix: s("")}, Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(1)}}}}})
			return err
		}, one("s3:PutLifecycleConfiguration", "arn:aws:s3:::arch")},

		// SQS (JSON protocol, as the SDK speaks it).
		{"SendMessage", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: s(queueURL), MessageBody: s("{}")})
			return err
		}, one("sqs:SendMessage", queueARN)},
		{"SendMessageBatch", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: s(queueURL), Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: s("1"), MessageBody: s("{}")}}})
			return err
		}, one("sqs:SendMessage", queueARN)},
		{"ReceiveMessage", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: s(queueURL)})
			return err
		}, one("sqs:ReceiveMessage", queueARN)},
		{"DeleteMessage", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: s(queueURL), ReceiptHandle: s("r")})
			return err
		}, one("sqs:DeleteMessage", queueARN)},
		{"DeleteMessageBatch", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: s(queueURL), Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: s("1"), ReceiptHandle: s("r")}}})
			return err
		}, one("sqs:DeleteMessage", queueARN)},
		{"ChangeMessageVisibilityBatch", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: s(queueURL), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{{Id: s("1"), ReceiptHandle: s("r")}}})
			return err
		}, one("sqs:ChangeMessageVisibility", queueARN)},
		{"GetQueueAttributes", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: s(queueURL), AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
			return err
		}, one("sqs:GetQueueAttributes", queueARN)},
		{"CreateQueue", SQS, func(ctx context.Context, c clients) error {
			_, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: s("ddbpipe-votes")})
			return err
		}, one("sqs:CreateQueue", queueARN)},

		// Lambda (the rotator's subscriptions, the local Lambda API).
		{"CreateEventSourceMapping", Lambda, func(ctx context.Context, c clients) error {
			_, err := c.lambda.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: s("arn:aws:lambda:us-east-1:000000000000:function:ddbpipe-ArchiverFunction"), EventSourceArn: s(streamARN)})
			return err
		}, []Call{{Action: "lambda:CreateEventSourceMapping", Resource: "*", Context: map[string]string{"lambda:FunctionArn": "arn:aws:lambda:us-east-1:000000000000:function:ddbpipe-ArchiverFunction"}}}},
		// A bare name carries no lambda:FunctionArn: a condition on it denies.
		{"CreateEventSourceMapping by name", Lambda, func(ctx context.Context, c clients) error {
			_, err := c.lambda.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: s("ddbpipe-ArchiverFunction"), EventSourceArn: s(streamARN)})
			return err
		}, one("lambda:CreateEventSourceMapping", "*")},
		{"ListEventSourceMappings", Lambda, func(ctx context.Context, c clients) error {
			_, err := c.lambda.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{EventSourceArn: s(streamARN)})
			return err
		}, one("lambda:ListEventSourceMappings", "*")},
		{"DeleteEventSourceMapping", Lambda, func(ctx context.Context, c clients) error {
			_, err := c.lambda.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: s("u-1")})
			return err
		}, []Call{{Action: "lambda:DeleteEventSourceMapping", Resource: "arn:aws:lambda:us-east-1:000000000000:event-source-mapping:u-1", Context: map[string]string{"lambda:FunctionArn": "arn:aws:lambda:us-east-1:000000000000:function:ddbpipe-TallyFunction"}}}},
		{"Invoke", Lambda, func(ctx context.Context, c clients) error {
			_, err := c.lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: s("ddbpipe-RotatorFunction"), Payload: []byte("{}")})
			return err
		}, one("lambda:InvokeFunction", "arn:aws:lambda:us-east-1:000000000000:function:ddbpipe-RotatorFunction")},
	}
	mappings := func(uuid string) (string, bool) {
		return "arn:aws:lambda:us-east-1:000000000000:function:ddbpipe-TallyFunction", uuid == "u-1"
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &capture{}
			if err := tt.call(context.Background(), newClients(c)); !errors.Is(err, errCaptured) {
				t.Fatalf("call: %v", err)
			}
			if len(c.reqs) != 1 {
				t.Fatalf("captured %d requests, want 1", len(c.reqs))
			}
			got, err := mapCaptured(tt.svc, c.reqs[0], mappings)
			if err != nil {
				t.Fatalf("Map: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Map:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func mapCaptured(svc Service, r *http.Request, mappings MappingFunction) ([]Call, error) {
	body, _ := io.ReadAll(r.Body)
	req := FromHTTP(svc, r, body)
	if svc == Lambda {
		return MapLambda(req, place, mappings)
	}
	return Map(req, place)
}

// TestMapPresigned: a presigned URL is judged as the operation it signs.
func TestMapPresigned(t *testing.T) {
	c := newClients(&capture{})
	ctx := context.Background()
	s := aws.String
	put, err := c.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: s("objs"), Key: s("uploads/abc")}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.presign.PresignUploadPart(ctx, &s3.UploadPartInput{Bucket: s("objs"), Key: s("uploads/abc"), UploadId: s("u"), PartNumber: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	get, err := c.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: s("objs"), Key: s("blobs/x"), VersionId: s("v9")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, method, url string
		want              []Call
	}{
		{"put", put.Method, put.URL, one("s3:PutObject", "arn:aws:s3:::objs/uploads/abc")},
		{"upload part", part.Method, part.URL, one("s3:PutObject", "arn:aws:s3:::objs/uploads/abc")},
		{"get version", get.Method, get.URL, one("s3:GetObjectVersion", "arn:aws:s3:::objs/blobs/x")},
	} {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Map(Request{Service: S3, Method: tt.method, Path: u.Path, Query: u.Query(), Header: http.Header{}, Host: u.Host}, place)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %v\nwant %v", tt.name, got, tt.want)
		}
	}
}

// TestMapSQSQuery: the query protocol (form bodies, the queue in the URL)
// maps as the JSON protocol does.
func TestMapSQSQuery(t *testing.T) {
	body := "Action=SendMessageBatch&Version=2012-11-05&SendMessageBatchRequestEntry.1.Id=1"
	r, _ := http.NewRequest(http.MethodPost, queueURL, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	got, err := Map(FromHTTP(SQS, r, []byte(body)), place)
	if err != nil {
		t.Fatal(err)
	}
	if want := one("sqs:SendMessage", queueARN); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMapUnknown(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8000/", strings.NewReader("{}"))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810.RestoreTableFromBackup")
	if _, err := Map(FromHTTP(DynamoDB, r, []byte("{}")), place); !errors.Is(err, ErrUnmapped) {
		t.Errorf("err = %v, want ErrUnmapped", err)
	}
}
