package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

// table creates an AWS::DynamoDB::Table: keys, billing, stream, GSIs, LSIs, TTL.
func (s *Stack) table(ctx context.Context, db *dynamodb.Client, id string, p map[string]any) (Physical, error) {
	name := s.physicalName(id, p, "TableName")
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest}
	if cfn.Scalar(p["BillingMode"]) == "PROVISIONED" {
		in.BillingMode = ddbtypes.BillingModeProvisioned
		in.ProvisionedThroughput = throughput(p["ProvisionedThroughput"])
	}
	for _, a := range list(p["AttributeDefinitions"]) {
		m := obj(a)
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
			AttributeName: aws.String(cfn.Scalar(m["AttributeName"])),
			AttributeType: ddbtypes.ScalarAttributeType(cfn.Scalar(m["AttributeType"])),
		})
	}
	in.KeySchema = keySchema(p["KeySchema"])
	for _, g := range list(p["GlobalSecondaryIndexes"]) {
		m := obj(g)
		gsi := ddbtypes.GlobalSecondaryIndex{
			IndexName:  aws.String(cfn.Scalar(m["IndexName"])),
			KeySchema:  keySchema(m["KeySchema"]),
			Projection: projection(m["Projection"]),
		}
		if in.BillingMode == ddbtypes.BillingModeProvisioned {
			gsi.ProvisionedThroughput = throughput(m["ProvisionedThroughput"])
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gsi)
	}
	for _, l := range list(p["LocalSecondaryIndexes"]) {
		m := obj(l)
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, ddbtypes.LocalSecondaryIndex{
			IndexName:  aws.String(cfn.Scalar(m["IndexName"])),
			KeySchema:  keySchema(m["KeySchema"]),
			Projection: projection(m["Projection"]),
		})
	}
	if ss := obj(p["StreamSpecification"]); len(ss) > 0 {
		in.StreamSpecification = &ddbtypes.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: ddbtypes.StreamViewType(cfn.Scalar(ss["StreamViewType"])),
		}
	}
	if _, err := db.CreateTable(ctx, in); err != nil {
		var inUse *ddbtypes.ResourceInUseException
		if !errors.As(err, &inUse) {
			return Physical{}, fmt.Errorf("create table %s: %w", name, err)
		}
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, waitMax); err != nil {
		return Physical{}, fmt.Errorf("wait for table %s: %w", name, err)
	}
	if ttl := obj(p["TimeToLiveSpecification"]); cfn.Scalar(ttl["Enabled"]) == "true" {
		_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(name),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{
				AttributeName: aws.String(cfn.Scalar(ttl["AttributeName"])), Enabled: aws.Bool(true),
			},
		})
		if err != nil && !awserr.Is(err, "ValidationException") { // already enabled
			return Physical{}, fmt.Errorf("enable TTL on %s: %w", name, err)
		}
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return Physical{}, fmt.Errorf("describe table %s: %w", name, err)
	}
	attrs := map[string]string{"Arn": aws.ToString(out.Table.TableArn)}
	if arn := aws.ToString(out.Table.LatestStreamArn); arn != "" {
		attrs["StreamArn"] = arn
	}
	return Physical{Ref: name, Attrs: attrs}, nil
}

const waitMax = 60 * time.Second

func keySchema(v any) []ddbtypes.KeySchemaElement {
	var ks []ddbtypes.KeySchemaElement
	for _, k := range list(v) {
		m := obj(k)
		ks = append(ks, ddbtypes.KeySchemaElement{
			AttributeName: aws.String(cfn.Scalar(m["AttributeName"])),
			KeyType:       ddbtypes.KeyType(cfn.Scalar(m["KeyType"])),
		})
	}
	return ks
}

func projection(v any) *ddbtypes.Projection {
	m := obj(v)
	p := &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(cfn.Scalar(m["ProjectionType"]))}
	if p.ProjectionType == "" {
		p.ProjectionType = ddbtypes.ProjectionTypeAll
	}
	for _, a := range list(m["NonKeyAttributes"]) {
		p.NonKeyAttributes = append(p.NonKeyAttributes, cfn.Scalar(a))
	}
	return p
}

func throughput(v any) *ddbtypes.ProvisionedThroughput {
	m := obj(v)
	r, _ := strconv.ParseInt(cfn.Scalar(m["ReadCapacityUnits"]), 10, 64)
	w, _ := strconv.ParseInt(cfn.Scalar(m["WriteCapacityUnits"]), 10, 64)
	return &ddbtypes.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(max(r, 1)), WriteCapacityUnits: aws.Int64(max(w, 1))}
}

// queueAttributes are the AWS::SQS::Queue properties that map to queue attributes.
var queueAttributes = []string{
	"DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
	"VisibilityTimeout", "FifoQueue", "ContentBasedDeduplication",
}

// queue creates an AWS::SQS::Queue with its attributes and redrive policy.
func (s *Stack) queue(ctx context.Context, q *sqs.Client, id string, p map[string]any) (Physical, error) {
	name := s.physicalName(id, p, "QueueName")
	attrs := map[string]string{}
	for _, a := range queueAttributes {
		if v, ok := p[a]; ok {
			attrs[a] = cfn.Scalar(v)
		}
	}
	if rp := obj(p["RedrivePolicy"]); len(rp) > 0 {
		n, err := strconv.Atoi(cfn.Scalar(rp["maxReceiveCount"]))
		if err != nil {
			return Physical{}, fmt.Errorf("queue %s: RedrivePolicy.maxReceiveCount %v is not a number", name, rp["maxReceiveCount"])
		}
		b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": cfn.Scalar(rp["deadLetterTargetArn"]), "maxReceiveCount": n})
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = string(b)
	}
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return Physical{}, fmt.Errorf("create queue %s: %w", name, err)
	}
	got, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Physical{}, fmt.Errorf("queue %s attributes: %w", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	return Physical{Ref: url, Attrs: map[string]string{
		"Arn": got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], "QueueName": name, "QueueUrl": url,
	}}, nil
}

// bucket creates an AWS::S3::Bucket with versioning and, where the server
// supports it, its lifecycle rules.
func (s *Stack) bucket(ctx context.Context, c *s3.Client, id string, p map[string]any) (Physical, error) {
	name := s.physicalName(id, p, "BucketName")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		if !awserr.Is(err, "BucketAlreadyOwnedByYou", "BucketAlreadyExists") {
			return Physical{}, fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if v := obj(p["VersioningConfiguration"]); cfn.Scalar(v["Status"]) == "Enabled" {
		_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
			Bucket:                  aws.String(name),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
		})
		if err != nil {
			return Physical{}, fmt.Errorf("enable versioning on %s: %w", name, err)
		}
	}
	if lc := obj(p["LifecycleConfiguration"]); len(lc) > 0 {
		if err := putLifecycle(ctx, c, name, lc); err != nil {
			s.Skipped = append(s.Skipped, fmt.Sprintf("%s lifecycle rules: %v", name, err))
		}
	}
	return Physical{Ref: name, Attrs: map[string]string{
		"Arn": "arn:aws:s3:::" + name, "DomainName": name + ".s3.amazonaws.com",
		"RegionalDomainName": fmt.Sprintf("%s.s3.%s.amazonaws.com", name, s.Options.Region),
	}}, nil
}

func putLifecycle(ctx context.Context, c *s3.Client, bucket string, lc map[string]any) error {
	var rules []s3types.LifecycleRule
	for _, r := range list(lc["Rules"]) {
		m := obj(r)
		rule := s3types.LifecycleRule{
			ID:     aws.String(cfn.Scalar(m["Id"])),
			Status: s3types.ExpirationStatus(cfn.Scalar(m["Status"])),
			Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String(cfn.Scalar(m["Prefix"]))},
		}
		if a := obj(m["AbortIncompleteMultipartUpload"]); len(a) > 0 {
			d, _ := strconv.Atoi(cfn.Scalar(a["DaysAfterInitiation"]))
			rule.AbortIncompleteMultipartUpload = &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(int32(d))}
		}
		if n := obj(m["NoncurrentVersionExpiration"]); len(n) > 0 {
			d, _ := strconv.Atoi(cfn.Scalar(n["NoncurrentDays"]))
			rule.NoncurrentVersionExpiration = &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(int32(d))}
		}
		if d := cfn.Scalar(m["ExpirationInDays"]); d != "" {
			days, _ := strconv.Atoi(d)
			rule.Expiration = &s3types.LifecycleExpiration{Days: aws.Int32(int32(days))}
		}
		rules = append(rules, rule)
	}
	_, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket: aws.String(bucket), LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules},
	})
	if awserr.Is(err, "NotImplemented") {
		return errNotSupported
	}
	return err
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
