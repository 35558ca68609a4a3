package tests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/provision"
)

const provisionTemplate = `
Parameters:
  Retries: { Type: Number, Default: 4 }
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      TableName: !Sub ${AWS::StackName}-things
      BillingMode: PROVISIONED
      ProvisionedThroughput: { ReadCapacityUnits: 5, WriteCapacityUnits: 5 }
      AttributeDefinitions:
        - { AttributeName: pk, AttributeType: S }
        - { AttributeName: sk, AttributeType: S }
        - { AttributeName: owner, AttributeType: S }
        - { AttributeName: size, AttributeType: N }
      KeySchema:
        - { AttributeName: pk, KeyType: HASH }
        - { AttributeName: sk, KeyType: RANGE }
      GlobalSecondaryIndexes:
        - IndexName: byOwner
          KeySchema: [{ AttributeName: owner, KeyType: HASH }]
          Projection: { ProjectionType: KEYS_ONLY }
          ProvisionedThroughput: { ReadCapacityUnits: 1, WriteCapacityUnits: 1 }
      LocalSecondaryIndexes:
        - IndexName: bySize
          KeySchema: [{ AttributeName: pk, KeyType: HASH }, { AttributeName: size, KeyType: RANGE }]
          Projection: { ProjectionType: INCLUDE, NonKeyAttributes: [owner] }
      StreamSpecification: { StreamViewType: KEYS_ONLY }
      TimeToLiveSpecification: { AttributeName: expiresAt, Enabled: true }
  Dlq:
    Type: AWS::SQS::Queue
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 45
      RedrivePolicy: { deadLetterTargetArn: !GetAtt Dlq.Arn, maxReceiveCount: !Ref Retries }
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      VersioningConfiguration: { Status: Enabled }
Outputs:
  TableStream: { Value: !GetAtt Table.StreamArn }
  QueueUrl: { Value: !Ref Queue }
  BucketName: { Value: !Ref Bucket }
`

// Provisioning creates what a template declares, with its settings, and is
// idempotent.
func TestProvisionFromTemplate(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	tpl, err := cfn.Parse([]byte(provisionTemplate))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts := provision.Options{StackName: unique("prov"), Params: map[string]string{"Retries": "7"}}
	pc := provision.Clients{DynamoDB: c.db, SQS: c.sqs, S3: c.s3}
	st, err := provision.Up(ctx, tpl, pc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Up(ctx, tpl, pc, opts); err != nil {
		t.Fatalf("second provisioning of the same stack: %v", err)
	}

	desc, err := c.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(opts.StackName + "-things")})
	if err != nil {
		t.Fatal(err)
	}
	tb := desc.Table
	if len(tb.GlobalSecondaryIndexes) != 1 || aws.ToString(tb.GlobalSecondaryIndexes[0].IndexName) != "byOwner" {
		t.Errorf("GSIs %+v", tb.GlobalSecondaryIndexes)
	}
	if len(tb.LocalSecondaryIndexes) != 1 || tb.LocalSecondaryIndexes[0].Projection.NonKeyAttributes[0] != "owner" {
		t.Errorf("LSIs %+v", tb.LocalSecondaryIndexes)
	}
	if tb.StreamSpecification == nil || string(tb.StreamSpecification.StreamViewType) != "KEYS_ONLY" {
		t.Errorf("stream %+v", tb.StreamSpecification)
	}
	if got := st.Outputs["TableStream"]; got == "" || got != aws.ToString(tb.LatestStreamArn) {
		t.Errorf("output TableStream = %q, want %q", got, aws.ToString(tb.LatestStreamArn))
	}
	ttl, err := c.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: tb.TableName})
	if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expiresAt" {
		t.Errorf("TTL: %v %+v", err, ttl)
	}

	qa, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.Outputs["QueueUrl"]), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if qa.Attributes["VisibilityTimeout"] != "45" {
		t.Errorf("VisibilityTimeout %q, want 45", qa.Attributes["VisibilityTimeout"])
	}
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     any    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(qa.Attributes["RedrivePolicy"]), &rp); err != nil {
		t.Fatalf("RedrivePolicy %q: %v", qa.Attributes["RedrivePolicy"], err)
	}
	if rp.DeadLetterTargetArn != st.Resources["Dlq"].Attrs["Arn"] || cfn.Scalar(rp.MaxReceiveCount) != "7" {
		t.Errorf("RedrivePolicy %+v, want the DLQ's ARN and the parameter override 7", rp)
	}

	v, err := c.s3.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(st.Outputs["BucketName"])})
	if err != nil || v.Status != s3types.BucketVersioningStatusEnabled {
		t.Errorf("versioning: %v %+v", err, v)
	}
	if !strings.HasPrefix(st.Outputs["BucketName"], strings.ToLower(opts.StackName)) {
		t.Errorf("bucket %q is not named after the stack", st.Outputs["BucketName"])
	}
}

func TestProvisionRejectsBadTemplates(t *testing.T) {
	needStack(t)
	c := newClients(t, nil)
	pc := provision.Clients{DynamoDB: c.db, SQS: c.sqs, S3: c.s3}
	tests := []struct{ name, doc, want string }{
		{"dangling reference", "Resources:\n  Q: { Type: AWS::SQS::Queue, Properties: { QueueName: !Ref Nope } }", "!Ref Nope"},
		{"bad parameter", "Parameters:\n  N: { Type: Number, Default: x }\nResources:\n  Q: { Type: AWS::SQS::Queue }", "not a number"},
		{"table without keys", "Resources:\n  T: { Type: AWS::DynamoDB::Table, Properties: { TableName: broken } }", "create table broken"},
		{"bad redrive", "Resources:\n  Q: { Type: AWS::SQS::Queue, Properties: { RedrivePolicy: { maxReceiveCount: many } } }", "maxReceiveCount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := cfn.Parse([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			_, err = provision.Up(context.Background(), tpl, pc, provision.Options{StackName: unique("bad")})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Function settings that come from parameters resolve before use.
func TestProvisionResolvesFunctionSettings(t *testing.T) {
	t.Parallel()
	env := upLocalWith(t, map[string]string{"CounterTimeoutSeconds": "7", "VotesVisibilityTimeoutSeconds": "42"})
	fns, err := env.Stack.Functions()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		if f.LogicalID == "CounterFunction" && f.Timeout.Seconds() != 7 {
			t.Errorf("counter timeout %s, want the parameter's 7s", f.Timeout)
		}
	}
}
