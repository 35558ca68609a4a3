package archiveparquet

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
)

// ErrBadARN: a stream record whose eventSourceARN is not a DynamoDB stream ARN.
var ErrBadARN = errors.New("parquetarchive: not a DynamoDB stream ARN")

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
// then Plain. An error makes the record a poison record.
func FromLambda(r events.DynamoDBEventRecord) (archive.Record, error) {
	fail := func(err error) (archive.Record, error) {
		return archive.Record{}, fmt.Errorf("parquetarchive: record %q: %w", r.EventID, err)
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
		if *img.out, err = Plain(av); err != nil {
			return fail(fmt.Errorf("%s: %w", img.name, err))
		}
	}
	return out, nil
}

// Plain converts an item of the dynamodb SDK (from a Scan, or converted
// from a stream image by ddbstream) into the archive's plain values (see
// archive.Item). A nil item stays nil.
func Plain(item map[string]dynamotypes.AttributeValue) (archive.Item, error) {
	if item == nil {
		return nil, nil
	}
	out := make(archive.Item, len(item))
	for k, v := range item {
		p, err := plainValue(v, k)
		if err != nil {
			return nil, err
		}
		out[k] = p
	}
	return out, nil
}

func plainValue(v dynamotypes.AttributeValue, path string) (any, error) {
	switch v := v.(type) {
	case *dynamotypes.AttributeValueMemberS:
		return v.Value, nil
	case *dynamotypes.AttributeValueMemberN:
		return archive.Number(v.Value), nil
	case *dynamotypes.AttributeValueMemberB:
		return append([]byte{}, v.Value...), nil
	case *dynamotypes.AttributeValueMemberBOOL:
		return v.Value, nil
	case *dynamotypes.AttributeValueMemberNULL:
		return nil, nil
	case *dynamotypes.AttributeValueMemberSS:
		return append([]string{}, v.Value...), nil
	case *dynamotypes.AttributeValueMemberNS:
		ns := make([]archive.Number, len(v.Value))
		for i, n := range v.Value {
			ns[i] = archive.Number(n)
		}
		return ns, nil
	case *dynamotypes.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = append([]byte{}, b...)
		}
		return bs, nil
	case *dynamotypes.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, x := range v.Value {
			p, err := plainValue(x, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			l[i] = p
		}
		return l, nil
	case *dynamotypes.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, x := range v.Value {
			p, err := plainValue(x, path+"."+k)
			if err != nil {
				return nil, err
			}
			m[k] = p
		}
		return m, nil
	default:
		return nil, fmt.Errorf("%w: attribute %q holds a %T", archive.ErrUnsupportedValue, path, v)
	}
}
