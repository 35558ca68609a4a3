// Package ddbstream turns DynamoDB Streams records read with aws-sdk-go-v2
// into the events Lambda hands stream handlers (LambdaRecord, through
// StreamToLambda), and reads the item images of those events into other
// attribute values with one checking reader, FromLambda: the dynamodb
// SDK's (LambdaToDynamo) or any family a Builder makes (the archive's plain
// values).
//
// A Lambda DynamoDB event record is the GetRecords record plus
// eventSourceARN. aws-lambda-go's events.DynamoDBEventRecord marshals to the
// same JSON as AWS sends (up to key order, spacing and encoding/json's
// escaping of <, > and &) provided that:
//
//   - no attribute value is the zero events.DynamoDBAttributeValue (it
//     panics when marshalled);
//   - empty lists, maps and binaries are empty, not nil (nil marshals as null,
//     where AWS sends [], {} and "");
//   - ApproximateCreationDateTime is set: its field is a struct, so omitempty
//     never drops it, and the zero time marshals as a meaningless number.
//
// StreamToLambda guarantees the first two, and LambdaRecord refuses
// records without a creation time. Numbers keep their exact strings in every
// direction ("12345678901234567890.123456789" stays as it is).
package ddbstream

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Sentinel errors, for errors.Is.
var (
	ErrEmptySet        = errors.New("ddbstream: empty set")
	ErrDuplicateInSet  = errors.New("ddbstream: duplicate in set")
	ErrInvalidNumber   = errors.New("ddbstream: invalid number")
	ErrInvalidNull     = errors.New("ddbstream: NULL must be true")
	ErrInvalidString   = errors.New("ddbstream: not UTF-8")
	ErrTooDeep         = errors.New("ddbstream: nested deeper than 32 levels")
	ErrUnsupportedType = errors.New("ddbstream: unsupported attribute value")
	ErrMissingField    = errors.New("ddbstream: missing record field")
)

// Defaults for fields a stream record may leave out. AWS always sets them.
const (
	defaultEventSource  = "aws:dynamodb"
	defaultEventVersion = "1.1"
)

// LambdaRecord converts a record read with dynamodbstreams GetRecords into
// the record Lambda's event source mapping delivers. streamARN becomes
// eventSourceARN (GetRecords does not return it). region, when not empty,
// replaces the record's awsRegion: DynamoDB Local reports "ddblocal", and the
// local runner knows which region it stands for.
//
// ApproximateCreationDateTime is rounded down to the second, as AWS sends it.
// TTL deletions keep their userIdentity ({"type":"Service","principalId":
// "dynamodb.amazonaws.com"}).
func LambdaRecord(r streamtypes.Record, streamARN, region string) (events.DynamoDBEventRecord, error) {
	id := deref(r.EventID)
	fail := func(err error) (events.DynamoDBEventRecord, error) {
		return events.DynamoDBEventRecord{}, fmt.Errorf("ddbstream: record %q: %w", id, err)
	}
	switch {
	case r.EventID == nil:
		return fail(fmt.Errorf("%w: eventID", ErrMissingField))
	case r.EventName == "":
		return fail(fmt.Errorf("%w: eventName", ErrMissingField))
	case r.Dynamodb == nil:
		return fail(fmt.Errorf("%w: dynamodb", ErrMissingField))
	case r.Dynamodb.SequenceNumber == nil:
		return fail(fmt.Errorf("%w: dynamodb.SequenceNumber", ErrMissingField))
	case r.Dynamodb.ApproximateCreationDateTime == nil:
		return fail(fmt.Errorf("%w: dynamodb.ApproximateCreationDateTime", ErrMissingField))
	case streamARN == "":
		return fail(fmt.Errorf("%w: stream ARN", ErrMissingField))
	}
	if region == "" {
		region = deref(r.AwsRegion)
	}
	change := events.DynamoDBStreamRecord{
		ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(r.Dynamodb.ApproximateCreationDateTime.Unix(), 0).UTC()},
		SequenceNumber:              *r.Dynamodb.SequenceNumber,
		StreamViewType:              string(r.Dynamodb.StreamViewType),
	}
	if r.Dynamodb.SizeBytes != nil {
		change.SizeBytes = *r.Dynamodb.SizeBytes
	}
	var err error
	if change.Keys, err = StreamToLambda(r.Dynamodb.Keys); err != nil {
		return fail(fmt.Errorf("Keys: %w", err))
	}
	if change.NewImage, err = StreamToLambda(r.Dynamodb.NewImage); err != nil {
		return fail(fmt.Errorf("NewImage: %w", err))
	}
	if change.OldImage, err = StreamToLambda(r.Dynamodb.OldImage); err != nil {
		return fail(fmt.Errorf("OldImage: %w", err))
	}
	out := events.DynamoDBEventRecord{
		AWSRegion:      region,
		Change:         change,
		EventID:        id,
		EventName:      string(r.EventName),
		EventSource:    deref(r.EventSource),
		EventVersion:   deref(r.EventVersion),
		EventSourceArn: streamARN,
	}
	if out.EventSource == "" {
		out.EventSource = defaultEventSource
	}
	if out.EventVersion == "" {
		out.EventVersion = defaultEventVersion
	}
	if u := r.UserIdentity; u != nil {
		out.UserIdentity = &events.DynamoDBUserIdentity{Type: deref(u.Type), PrincipalID: deref(u.PrincipalId)}
	}
	return out, nil
}

// LambdaEvent converts a batch of records, in order, into the event one
// Lambda invocation receives. It fails on the first record LambdaRecord
// refuses.
func LambdaEvent(records []streamtypes.Record, streamARN, region string) (events.DynamoDBEvent, error) {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, 0, len(records))}
	for _, r := range records {
		lr, err := LambdaRecord(r, streamARN, region)
		if err != nil {
			return events.DynamoDBEvent{}, err
		}
		ev.Records = append(ev.Records, lr)
	}
	return ev, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
