package archivelambda

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
)

// ErrBadARN: a stream record whose eventSourceARN is not a DynamoDB stream
// ARN (ledger.StreamTable parses it).
var ErrBadARN = ledger.ErrBadStreamARN

// ttlPrincipal is the userIdentity of the deletes DynamoDB's TTL makes.
const ttlPrincipal = "dynamodb.amazonaws.com"

// FromLambda converts a record of a Lambda DynamoDB stream event into the
// archive's plain values. Each image is converted once, by Image: checked
// as DynamoDB would check it (numbers, sets, strings, NULL, nesting) and
// made into the values archive.Values makes, as the rotator's Scan makes
// them too (archiveddb.Plain), so that both sides of the verification read
// an item alike. An error makes the record a poison record.
func FromLambda(r events.DynamoDBEventRecord) (archive.Record, error) {
	fail := func(err error) (archive.Record, error) {
		return archive.Record{}, fmt.Errorf("archivelambda: record %q: %w", r.EventID, err)
	}
	table, label, err := ledger.StreamTable(r.EventSourceArn)
	if err != nil {
		return fail(&PoisonError{Reasons: []string{err.Error()}, errs: []error{err}})
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
	var poison PoisonError
	for _, img := range images {
		var err error
		if *img.out, err = Image(img.in); err != nil {
			poison.add(img.name, img.in, err)
		}
	}
	if len(poison.Reasons) > 0 {
		return fail(&poison)
	}
	return out, nil
}

// Image converts one image of a Lambda stream record (Keys, NewImage or
// OldImage) into the archive's plain values, refusing what DynamoDB never
// stores (see ddbstream.FromLambda). A nil image gives nil.
func Image(image map[string]events.DynamoDBAttributeValue) (archive.Item, error) {
	return ddbstream.FromLambda[any](image, archive.Values{})
}

// PoisonError is every reason a record cannot be archived, in a stable
// order (image by image, attributes by name), so the same record always
// reads the same; errors.Is finds each underlying error.
type PoisonError struct {
	Reasons []string
	errs    []error
}

func (e *PoisonError) Error() string { return strings.Join(e.Reasons, "; ") }

func (e *PoisonError) Unwrap() []error { return e.errs }

// add records why image (Keys, NewImage, OldImage) did not convert: each
// attribute that fails alone, by name; the image's own error if none does.
func (e *PoisonError) add(image string, in map[string]events.DynamoDBAttributeValue, whole error) {
	found := false
	for _, name := range slices.Sorted(maps.Keys(in)) {
		if _, err := Image(map[string]events.DynamoDBAttributeValue{name: in[name]}); err != nil {
			found = true
			e.Reasons = append(e.Reasons, fmt.Sprintf("%s.%s: %v", image, name, err))
			e.errs = append(e.errs, err)
		}
	}
	if !found {
		e.Reasons = append(e.Reasons, fmt.Sprintf("%s: %v", image, whole))
		e.errs = append(e.errs, whole)
	}
}
