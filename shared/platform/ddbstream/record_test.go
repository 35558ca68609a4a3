package ddbstream

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func streamRecord(edit func(*streamtypes.Record)) streamtypes.Record {
	created := time.Date(2024, 3, 5, 10, 0, 0, 999_000_000, time.UTC)
	r := streamtypes.Record{
		AwsRegion:    aws.String("ddblocal"),
		EventID:      aws.String("e1"),
		EventName:    streamtypes.OperationTypeRemove,
		EventSource:  aws.String("aws:dynamodb"),
		EventVersion: aws.String("1.1"),
		Dynamodb: &streamtypes.StreamRecord{
			ApproximateCreationDateTime: &created,
			Keys:                        map[string]streamtypes.AttributeValue{"pk": &streamtypes.AttributeValueMemberS{Value: "a"}},
			OldImage:                    map[string]streamtypes.AttributeValue{"pk": &streamtypes.AttributeValueMemberS{Value: "a"}},
			SequenceNumber:              aws.String("000000000000000000001"),
			SizeBytes:                   aws.Int64(12),
			StreamViewType:              streamtypes.StreamViewTypeOldImage,
		},
	}
	if edit != nil {
		edit(&r)
	}
	return r
}

func TestLambdaRecord(t *testing.T) {
	tests := []struct {
		name   string
		record streamtypes.Record
		region string
		check  func(t *testing.T, got events.DynamoDBEventRecord)
	}{
		{
			name:   "region argument replaces ddblocal",
			record: streamRecord(nil),
			region: "eu-west-1",
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				if got, want := got.AWSRegion, "eu-west-1"; got != want {
					t.Errorf("AWSRegion = %q, want %q", got, want)
				}
			},
		},
		{
			name:   "record region when the argument is empty",
			record: streamRecord(nil),
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				if got, want := got.AWSRegion, "ddblocal"; got != want {
					t.Errorf("AWSRegion = %q, want %q", got, want)
				}
			},
		},
		{
			name:   "creation time rounded down to the second",
			record: streamRecord(nil),
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				want := time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)
				if !got.Change.ApproximateCreationDateTime.Equal(want) {
					t.Errorf("ApproximateCreationDateTime = %v, want %v", got.Change.ApproximateCreationDateTime, want)
				}
				b := mustMarshal(t, got.Change)
				assertJSONEqual(t, "dynamodb", b, []byte(`{"ApproximateCreationDateTime":1709632800,
					"Keys":{"pk":{"S":"a"}},"OldImage":{"pk":{"S":"a"}},
					"SequenceNumber":"000000000000000000001","SizeBytes":12,"StreamViewType":"OLD_IMAGE"}`))
			},
		},
		{
			name: "TTL delete keeps its user identity",
			record: streamRecord(func(r *streamtypes.Record) {
				r.UserIdentity = &streamtypes.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")}
			}),
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				want := &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
				if got.UserIdentity == nil || *got.UserIdentity != *want {
					t.Errorf("UserIdentity = %+v, want %+v", got.UserIdentity, want)
				}
			},
		},
		{
			name:   "user delete has no user identity",
			record: streamRecord(nil),
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				if got.UserIdentity != nil {
					t.Errorf("UserIdentity = %+v, want nil", got.UserIdentity)
				}
			},
		},
		{
			name: "defaults for source and version",
			record: streamRecord(func(r *streamtypes.Record) {
				r.EventSource, r.EventVersion, r.Dynamodb.SizeBytes = nil, nil, nil
			}),
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				if got.EventSource != "aws:dynamodb" || got.EventVersion != "1.1" || got.Change.SizeBytes != 0 {
					t.Errorf("source, version, size = %q, %q, %d, want aws:dynamodb, 1.1, 0", got.EventSource, got.EventVersion, got.Change.SizeBytes)
				}
			},
		},
		{
			name: "keys only",
			record: streamRecord(func(r *streamtypes.Record) {
				r.Dynamodb.OldImage, r.Dynamodb.StreamViewType = nil, streamtypes.StreamViewTypeKeysOnly
			}),
			check: func(t *testing.T, got events.DynamoDBEventRecord) {
				if got.Change.OldImage != nil || got.Change.NewImage != nil {
					t.Errorf("images = %v, %v, want none", got.Change.OldImage, got.Change.NewImage)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LambdaRecord(tt.record, fixtureStreamARN, tt.region)
			if err != nil {
				t.Fatalf("LambdaRecord: %v", err)
			}
			if got.EventSourceArn != fixtureStreamARN {
				t.Errorf("EventSourceArn = %q, want %q", got.EventSourceArn, fixtureStreamARN)
			}
			tt.check(t, got)
		})
	}
}

func TestLambdaRecordErrors(t *testing.T) {
	tests := []struct {
		name   string
		record streamtypes.Record
		arn    string
		want   error
	}{
		{"no event id", streamRecord(func(r *streamtypes.Record) { r.EventID = nil }), fixtureStreamARN, ErrMissingField},
		{"no event name", streamRecord(func(r *streamtypes.Record) { r.EventName = "" }), fixtureStreamARN, ErrMissingField},
		{"no dynamodb", streamRecord(func(r *streamtypes.Record) { r.Dynamodb = nil }), fixtureStreamARN, ErrMissingField},
		{"no sequence number", streamRecord(func(r *streamtypes.Record) { r.Dynamodb.SequenceNumber = nil }), fixtureStreamARN, ErrMissingField},
		{"no creation time", streamRecord(func(r *streamtypes.Record) { r.Dynamodb.ApproximateCreationDateTime = nil }), fixtureStreamARN, ErrMissingField},
		{"no stream ARN", streamRecord(nil), "", ErrMissingField},
		{"bad key", streamRecord(func(r *streamtypes.Record) {
			r.Dynamodb.Keys["pk"] = &streamtypes.AttributeValueMemberN{Value: "x"}
		}), fixtureStreamARN, ErrInvalidNumber},
		{"bad new image", streamRecord(func(r *streamtypes.Record) {
			r.Dynamodb.NewImage = map[string]streamtypes.AttributeValue{"s": &streamtypes.AttributeValueMemberSS{}}
		}), fixtureStreamARN, ErrEmptySet},
		{"bad old image", streamRecord(func(r *streamtypes.Record) {
			r.Dynamodb.OldImage["x"] = nil
		}), fixtureStreamARN, ErrUnsupportedType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LambdaRecord(tt.record, tt.arn, "")
			if !errors.Is(err, tt.want) {
				t.Errorf("LambdaRecord = %+v, %v, want an error wrapping %v", got, err, tt.want)
			}
		})
	}
}

func TestLambdaEventKeepsOrderAndStopsAtFirstError(t *testing.T) {
	var records []streamtypes.Record
	for i := range 3 {
		records = append(records, streamRecord(func(r *streamtypes.Record) {
			r.EventID = aws.String(fmt.Sprint("e", i))
			r.Dynamodb.SequenceNumber = aws.String(fmt.Sprint(1000 + i))
		}))
	}
	ev, err := LambdaEvent(records, fixtureStreamARN, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range ev.Records {
		if got, want := r.Change.SequenceNumber, fmt.Sprint(1000+i); got != want {
			t.Errorf("record %d SequenceNumber = %q, want %q", i, got, want)
		}
	}

	records[1].Dynamodb = nil
	if ev, err := LambdaEvent(records, fixtureStreamARN, "us-east-1"); !errors.Is(err, ErrMissingField) {
		t.Errorf("LambdaEvent with a bad record = %+v, %v, want ErrMissingField", ev, err)
	}
}

func ExampleLambdaToDynamo() {
	image := map[string]events.DynamoDBAttributeValue{
		"pk":    events.NewStringAttribute("poll#42"),
		"votes": events.NewNumberAttribute("12345678901234567890.123456789"),
	}
	item, err := LambdaToDynamo(image) // ready for dynamodb.PutItemInput.Item
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(item["votes"].(*dynamotypes.AttributeValueMemberN).Value)
	// Output: 12345678901234567890.123456789
}

func ExampleLambdaToDynamo_emptySet() {
	_, err := LambdaToDynamo(map[string]events.DynamoDBAttributeValue{
		"tags": events.NewStringSetAttribute(nil),
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, ErrEmptySet))
	// Output:
	// ddbstream: attribute "tags": empty set: string set
	// true
}
