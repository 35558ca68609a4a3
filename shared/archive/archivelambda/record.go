package archivelambda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
)

// ErrBadARN: a stream record whose eventSourceARN is not a DynamoDB stream ARN.
var ErrBadARN = errors.New("archivelambda: not a DynamoDB stream ARN")

// ttlPrincipal is the userIdentity of the deletes DynamoDB's TTL makes.
const ttlPrincipal = "dynamodb.amazonaws.com"

// StreamARN splits a DynamoDB stream ARN,
// arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>, into the
// table name and the stream label.
func StreamARN(arn string) (table, label string, err error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "dynamodb" {
		return "", "", fmt.Errorf("%w: %q", ErrBadARN, arn)
	}
	rest, ok := strings.CutPrefix(parts[5], "table/")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadARN, arn)
	}
	table, label, ok = strings.Cut(rest, "/stream/")
	if !ok || table == "" || label == "" || strings.Contains(table, "/") {
		return "", "", fmt.Errorf("%w: %q", ErrBadARN, arn)
	}
	return table, label, nil
}

// FromLambda converts a record of a Lambda DynamoDB stream event into the
// archive's plain values. The images go through ddbstream.LambdaToDynamo,
// which checks them as DynamoDB would (numbers, sets, NULL, nesting), and
// then archiveddb.Plain, the conversion the rotator's Scan uses too, so
// that both sides of the verification read an item alike. An error makes the record a poison record.
func FromLambda(r events.DynamoDBEventRecord) (archive.Record, error) {
	fail := func(err error) (archive.Record, error) {
		return archive.Record{}, fmt.Errorf("archivelambda: record %q: %w", r.EventID, err)
	}
	table, label, err := StreamARN(r.EventSourceArn)
	if err != nil {
		return fail(err)
	}
	out := archive.Record{
		Table: table, Stream: label,
		EventID: r.EventID, EventName: r.EventName, SequenceNumber: r.Change.SequenceNumber,
		CreatedAt: r.Change.ApproximateCreationDateTime.Time,
		TTLDelete: r.EventName == archive.EventRemove && r.UserIdentity != nil &&
			r.UserIdentity.Type == "Service" && r.UserIdentity.PrincipalID == ttlPrincipal,
	}
	images := []struct {
		name string
		in   map[string]events.DynamoDBAttributeValue
		out  *archive.Item
	}{
		{"Keys", r.Change.Keys, &out.Keys},
		{"NewImage", r.Change.NewImage, &out.NewImage},
		{"OldImage", r.Change.OldImage, &out.OldImage},
	}
	for _, img := range images {
		av, err := ddbstream.LambdaToDynamo(img.in)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", img.name, err))
		}
		if *img.out, err = archiveddb.Plain(av); err != nil {
			return fail(fmt.Errorf("%s: %w", img.name, err))
		}
	}
	return out, nil
}
