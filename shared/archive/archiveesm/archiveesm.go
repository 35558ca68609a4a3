// Package archiveesm subscribes the archiver to the monthly tables' streams
// through Lambda's event source mapping API: in AWS the Lambda service, and
// locally the runner's emulation of the same API (AWS_ENDPOINT_URL_LAMBDA),
// so the same client code runs in both. It implements
// archive.Subscriptions.
package archiveesm

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

var _ archive.Subscriptions = (*Mappings)(nil)

// Mappings subscribes one function (the archiver) to streams, with the
// settings the template gives the objects table's subscription: partial
// batch responses, bisection on error, bounded retries and record age, and
// an on-failure destination, so no shard is blocked forever and no batch
// is dropped silently.
type Mappings struct {
	Lambda   *lambda.Client
	Function string // name or ARN of the archiver
	// OnFailure is the queue ARN discarded batches are described to.
	OnFailure string
	// MaxRetryAttempts (0–10,000) and MaxRecordAgeSeconds (60–604,800, or
	// -1 for none) bound how long a failing batch is retried.
	MaxRetryAttempts    int32
	MaxRecordAgeSeconds int32
	// BatchSize (default 1000) and WindowSeconds (default 10).
	BatchSize     int32
	WindowSeconds int32
	// TumblingWindowSeconds, when set, delivers the records in tumbling
	// windows: the form of the event that names the stream shard (the
	// tally's checkpoints are per shard).
	TumblingWindowSeconds int32
}

// Readers are every reader of a stream (the archiver and the tally), each
// with its own mappings; they implement archive.Subscriptions together.
type Readers []*Mappings

var _ archive.Subscriptions = Readers(nil)

// Ensure subscribes each reader that has no mapping of the stream yet.
func (rs Readers) Ensure(ctx context.Context, streamARN string) (bool, error) {
	any := false
	for _, m := range rs {
		created, err := m.Ensure(ctx, streamARN)
		if err != nil {
			return any, err
		}
		any = any || created
	}
	return any, nil
}

// Remove deletes every reader's mappings of the stream.
func (rs Readers) Remove(ctx context.Context, streamARN string) (int, error) {
	n := 0
	for _, m := range rs {
		k, err := m.Remove(ctx, streamARN)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Input is the CreateEventSourceMapping request for a stream.
func (m *Mappings) Input(streamARN string) *lambda.CreateEventSourceMappingInput {
	batch, window := m.BatchSize, m.WindowSeconds
	if batch <= 0 {
		batch = 1000
	}
	if window <= 0 {
		window = 10
	}
	in := &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String(m.Function), EventSourceArn: aws.String(streamARN),
		StartingPosition: types.EventSourcePositionTrimHorizon,
		BatchSize:        aws.Int32(batch), MaximumBatchingWindowInSeconds: aws.Int32(window),
		FunctionResponseTypes:      []types.FunctionResponseType{types.FunctionResponseTypeReportBatchItemFailures},
		BisectBatchOnFunctionError: aws.Bool(true),
		MaximumRetryAttempts:       aws.Int32(m.MaxRetryAttempts),
		MaximumRecordAgeInSeconds:  aws.Int32(m.MaxRecordAgeSeconds),
		Enabled:                    aws.Bool(true),
	}
	if m.TumblingWindowSeconds > 0 {
		in.TumblingWindowInSeconds = aws.Int32(m.TumblingWindowSeconds)
	}
	if m.OnFailure != "" {
		in.DestinationConfig = &types.DestinationConfig{OnFailure: &types.OnFailure{Destination: aws.String(m.OnFailure)}}
	}
	return in
}

// List returns the function's mappings of the stream.
func (m *Mappings) List(ctx context.Context, streamARN string) ([]types.EventSourceMappingConfiguration, error) {
	var out []types.EventSourceMappingConfiguration
	p := lambda.NewListEventSourceMappingsPaginator(m.Lambda, &lambda.ListEventSourceMappingsInput{
		FunctionName: aws.String(m.Function), EventSourceArn: aws.String(streamARN),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("archiveesm: list mappings of %s: %w", streamARN, err)
		}
		out = append(out, page.EventSourceMappings...)
	}
	return out, nil
}

// Ensure creates the mapping unless the function already has one for the
// stream (one being deleted does not count). Lambda refuses a second
// mapping of the same pair with ResourceConflictException, which is taken
// as "exists" too (a concurrent run created it).
func (m *Mappings) Ensure(ctx context.Context, streamARN string) (bool, error) {
	list, err := m.List(ctx, streamARN)
	if err != nil {
		return false, err
	}
	for _, e := range list {
		if aws.ToString(e.State) != "Deleting" {
			return false, nil
		}
	}
	_, err = m.Lambda.CreateEventSourceMapping(ctx, m.Input(streamARN))
	var conflict *types.ResourceConflictException
	if errors.As(err, &conflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("archiveesm: subscribe %s to %s: %w", m.Function, streamARN, err)
	}
	return true, nil
}

// Remove deletes the function's mappings of the stream. A mapping already
// gone is not an error; one Lambda is still creating or updating
// (ResourceInUseException) fails the call, for the next run to retry.
func (m *Mappings) Remove(ctx context.Context, streamARN string) (int, error) {
	list, err := m.List(ctx, streamARN)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list {
		if aws.ToString(e.State) == "Deleting" {
			continue
		}
		_, err := m.Lambda.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: e.UUID})
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("archiveesm: delete mapping %s of %s: %w", aws.ToString(e.UUID), streamARN, err)
		}
		n++
	}
	return n, nil
}
