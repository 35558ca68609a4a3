package archiveesm

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsstub"
)

// memLambda keeps mappings as Lambda does: one per function and source
// (a second is a ResourceConflictException), listed by both filters.
type memLambda struct {
	mappings map[string]types.EventSourceMappingConfiguration
	created  []*lambda.CreateEventSourceMappingInput
	n        int
}

// stubbed is a Lambda client whose calls answer gives (awsstub).
func stubbed(answer func(in any) (any, error)) *lambda.Client {
	return lambda.New(lambda.Options{Region: "us-east-1", APIOptions: []func(*middleware.Stack) error{awsstub.Answer(answer)}})
}

func (m *memLambda) client() *lambda.Client { return stubbed(m.answer) }

func (m *memLambda) answer(in any) (any, error) {
	switch in := in.(type) {
	case *lambda.CreateEventSourceMappingInput:
		return m.create(in)
	case *lambda.ListEventSourceMappingsInput:
		return m.list(in), nil
	case *lambda.DeleteEventSourceMappingInput:
		return m.delete(in)
	}
	return nil, fmt.Errorf("memLambda: unexpected %T", in)
}

func (m *memLambda) create(in *lambda.CreateEventSourceMappingInput) (*lambda.CreateEventSourceMappingOutput, error) {
	for _, e := range m.mappings {
		if aws.ToString(e.EventSourceArn) == aws.ToString(in.EventSourceArn) && aws.ToString(e.FunctionArn) == aws.ToString(in.FunctionName) {
			return nil, &types.ResourceConflictException{Message: aws.String("exists")}
		}
	}
	m.n++
	id := fmt.Sprintf("uuid-%d", m.n)
	m.mappings[id] = types.EventSourceMappingConfiguration{UUID: aws.String(id), EventSourceArn: in.EventSourceArn, FunctionArn: in.FunctionName, State: aws.String("Enabled")}
	m.created = append(m.created, in)
	return &lambda.CreateEventSourceMappingOutput{UUID: aws.String(id)}, nil
}

func (m *memLambda) list(in *lambda.ListEventSourceMappingsInput) *lambda.ListEventSourceMappingsOutput {
	out := &lambda.ListEventSourceMappingsOutput{}
	for _, e := range m.mappings {
		if aws.ToString(e.EventSourceArn) == aws.ToString(in.EventSourceArn) && aws.ToString(e.FunctionArn) == aws.ToString(in.FunctionName) {
			out.EventSourceMappings = append(out.EventSourceMappings, e)
		}
	}
	return out
}

func (m *memLambda) delete(in *lambda.DeleteEventSourceMappingInput) (*lambda.DeleteEventSourceMappingOutput, error) {
	if _, ok := m.mappings[aws.ToString(in.UUID)]; !ok {
		return nil, &types.ResourceNotFoundException{}
	}
	delete(m.mappings, aws.ToString(in.UUID))
	return &lambda.DeleteEventSourceMappingOutput{}, nil
}

func TestEnsureOnceAndRemove(t *testing.T) {
	api := &memLambda{mappings: map[string]types.EventSourceMappingConfiguration{}}
	m := &Mappings{Lambda: api.client(), Function: "archiver", OnFailure: "arn:aws:sqs:us-east-1:1:failures", MaxRetryAttempts: 5, MaxRecordAgeSeconds: 21600}
	ctx := context.Background()
	const stream = "arn:aws:dynamodb:us-east-1:1:table/app-votes-2026-12/stream/2026-12-01T00:00:00.000"
	for i, want := range []bool{true, false, false} {
		created, err := m.Ensure(ctx, stream)
		if err != nil || created != want {
			t.Errorf("ensure %d: created=%v (%v), want %v", i, created, err, want)
		}
	}
	if len(api.created) != 1 {
		t.Fatalf("%d mappings created, want 1", len(api.created))
	}
	in := api.created[0]
	if !aws.ToBool(in.BisectBatchOnFunctionError) || aws.ToInt32(in.MaximumRetryAttempts) != 5 || aws.ToInt32(in.MaximumRecordAgeInSeconds) != 21600 ||
		aws.ToString(in.DestinationConfig.OnFailure.Destination) != m.OnFailure || in.StartingPosition != types.EventSourcePositionTrimHorizon ||
		len(in.FunctionResponseTypes) != 1 || in.FunctionResponseTypes[0] != types.FunctionResponseTypeReportBatchItemFailures ||
		aws.ToInt32(in.BatchSize) != 1000 || aws.ToInt32(in.MaximumBatchingWindowInSeconds) != 10 {
		t.Errorf("create input %+v", in)
	}
	// A concurrent run's mapping, unseen by the list, is taken as existing.
	api.mappings["other"] = types.EventSourceMappingConfiguration{UUID: aws.String("other"), EventSourceArn: aws.String(stream + "x"), FunctionArn: aws.String("archiver")}
	if created, err := (&Mappings{Lambda: api.conflictOnly(), Function: "archiver"}).Ensure(ctx, stream+"x"); err != nil || created {
		t.Errorf("ensure against a conflict: %v %v", created, err)
	}
	if n, err := m.Remove(ctx, stream); err != nil || n != 1 {
		t.Errorf("remove: %d %v, want 1", n, err)
	}
	if n, err := m.Remove(ctx, stream); err != nil || n != 0 {
		t.Errorf("second remove: %d %v, want 0", n, err)
	}
}

// conflictOnly is m's client listing nothing, so Ensure meets the
// conflict on create.
func (m *memLambda) conflictOnly() *lambda.Client {
	return stubbed(func(in any) (any, error) {
		if _, ok := in.(*lambda.ListEventSourceMappingsInput); ok {
			return &lambda.ListEventSourceMappingsOutput{}, nil
		}
		return m.answer(in)
	})
}

// Both stream readers are subscribed and removed together; the tally's
// mapping has its tumbling window (the event form that names the shard),
// the archiver's none. A reader subscribed already is left as it is.
func TestReadersSubscribeTogether(t *testing.T) {
	api := &memLambda{mappings: map[string]types.EventSourceMappingConfiguration{}}
	archiver := &Mappings{Lambda: api.client(), Function: "archiver", MaxRetryAttempts: 5, MaxRecordAgeSeconds: 21600}
	tally := &Mappings{Lambda: api.client(), Function: "tally", MaxRetryAttempts: 5, MaxRecordAgeSeconds: 21600, WindowSeconds: 1, TumblingWindowSeconds: 60}
	rs := Readers{archiver, tally}
	ctx := context.Background()
	const stream = "arn:aws:dynamodb:us-east-1:1:table/app-votes-2026-12/stream/2026-12-01T00:00:00.000"
	if _, err := archiver.Ensure(ctx, stream); err != nil { // subscribed before the tally existed
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if created, err := rs.Ensure(ctx, stream); err != nil || created != want {
			t.Errorf("ensure %d: created=%v (%v), want %v", i, created, err, want)
		}
	}
	if len(api.created) != 2 {
		t.Fatalf("%d mappings created, want the archiver's and the tally's", len(api.created))
	}
	for _, in := range api.created {
		window := aws.ToInt32(in.TumblingWindowInSeconds)
		if fn := aws.ToString(in.FunctionName); fn == "tally" && (window != 60 || aws.ToInt32(in.MaximumBatchingWindowInSeconds) != 1) || fn == "archiver" && in.TumblingWindowInSeconds != nil {
			t.Errorf("%s: tumbling window %d, batching window %d", fn, window, aws.ToInt32(in.MaximumBatchingWindowInSeconds))
		}
	}
	if n, err := rs.Remove(ctx, stream); err != nil || n != 2 || len(api.mappings) != 0 {
		t.Errorf("remove: %d %v, %d left; want both removed", n, err, len(api.mappings))
	}
}
