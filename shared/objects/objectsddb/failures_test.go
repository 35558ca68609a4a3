package objectsddb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// step is what one attempt of a TransactWriteItems does.
type step struct {
	send bool  // the request reaches DynamoDB, which applies it if it can
	err  error // returned instead of DynamoDB's answer; nil: DynamoDB's answer
}

// injector plays steps, one per attempt the SDK makes (its retries
// included), just past the SDK's retry middleware; attempts past the last
// step go through untouched.
type injector struct {
	mu     sync.Mutex
	steps  []step
	n      int
	tokens []string
}

func (in *injector) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("test.token", func(ctx context.Context, fin middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if tw, ok := fin.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
				in.mu.Lock()
				in.tokens = append(in.tokens, aws.ToString(tw.ClientRequestToken))
				in.mu.Unlock()
			}
			return next.HandleInitialize(ctx, fin)
		}), middleware.After); err != nil {
			return err
		}
		return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("test.inject", func(ctx context.Context, fin middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if middleware.GetOperationName(ctx) != "TransactWriteItems" {
				return next.HandleFinalize(ctx, fin)
			}
			in.mu.Lock()
			i := in.n
			in.n++
			in.mu.Unlock()
			if i >= len(in.steps) {
				return next.HandleFinalize(ctx, fin)
			}
			s := in.steps[i]
			if !s.send {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, s.err
			}
			out, md, err := next.HandleFinalize(ctx, fin)
			if s.err != nil {
				return out, md, s.err
			}
			return out, md, err
		}), "Retry", middleware.After)
	})
}

func apiError(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "injected"}
}

// lost is a reply that never came back whole: a 500 the SDK retries.
var lost = &smithyhttp.ResponseError{
	Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusInternalServerError}},
	Err:      apiError("InternalServerError"),
}

func cancelled(codes ...string) error {
	reasons := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		reasons[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return &types.TransactionCanceledException{Message: aws.String("injected"), CancellationReasons: reasons}
}

// A commit's error wraps ErrNotApplied only when nothing was certainly
// applied: every attempt the SDK made was refused, or DynamoDB cancelled
// the transaction. A retried attempt after one that was applied but whose
// reply was lost succeeds (the client request token), and one that fails
// otherwise leaves the outcome unknown.
func TestCommitFailureIsNotAppliedOnlyWhenCertain(t *testing.T) {
	const sdkAttempts = 3
	throttle, invalid := apiError("ThrottlingException"), apiError("ValidationException")
	tests := []struct {
		name          string
		steps         []step
		wantErr       bool
		wantIs        []error
		wantNotIs     []error
		wantCommitted bool
	}{
		{name: "throttled on every attempt", steps: []step{{false, throttle}, {false, throttle}, {false, throttle}},
			wantErr: true, wantIs: []error{objects.ErrNotApplied, objects.ErrThrottled}},
		{name: "refused as invalid", steps: []step{{false, invalid}},
			wantErr: true, wantIs: []error{objects.ErrNotApplied}},
		{name: "a 5xx without reaching the table, then through", steps: []step{{false, lost}},
			wantCommitted: true},
		{name: "applied but the reply lost, then retried", steps: []step{{true, lost}},
			wantCommitted: true},
		{name: "applied but the reply lost, then throttled", steps: []step{{true, lost}, {false, throttle}, {false, throttle}},
			wantErr: true, wantNotIs: []error{objects.ErrNotApplied}, wantCommitted: true},
		{name: "throttled, then applied but the reply lost, then throttled", steps: []step{{false, throttle}, {true, lost}, {false, throttle}},
			wantErr: true, wantNotIs: []error{objects.ErrNotApplied}, wantCommitted: true},
		{name: "no reply on any attempt", steps: []step{{false, lost}, {false, lost}, {false, lost}},
			wantErr: true, wantNotIs: []error{objects.ErrNotApplied}},
		{name: "cancelled for concurrent transactions, then through", steps: []step{{false, cancelled("TransactionConflict", "None")}, {false, cancelled("None", "TransactionConflict")}},
			wantCommitted: true},
		{name: "cancelled for concurrent transactions on every try", steps: []step{
			{false, cancelled("TransactionConflict", "None")}, {false, cancelled("TransactionConflict", "None")},
			{false, cancelled("TransactionConflict", "None")}, {false, cancelled("TransactionConflict", "None")}},
			wantErr: true, wantIs: []error{objects.ErrNotApplied, ErrTransactionConflict}, wantNotIs: []error{objects.ErrConflict}},
		{name: "cancelled for throttling on every try", steps: []step{
			{false, cancelled("ThrottlingError", "None")}, {false, cancelled("ThrottlingError", "None")},
			{false, cancelled("None", "ThrottlingError")}, {false, cancelled("ThrottlingError", "None")}},
			wantErr: true, wantIs: []error{objects.ErrNotApplied, objects.ErrThrottled}},
		{name: "cancelled as invalid", steps: []step{{false, cancelled("ValidationError", "None")}},
			wantErr: true, wantIs: []error{objects.ErrNotApplied}},
	}
	st := newClient(t) // starts the stack
	table := newTable(t, st)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inj := &injector{steps: tt.steps}
			db := newClient(t, inj.option, func(o *dynamodb.Options) {
				o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
					so.MaxAttempts = sdkAttempts
					so.RateLimiter = ratelimit.None
					so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
				})
			})
			s := New(db, table)
			s.Backoff.Base, s.Backoff.Max = 0, 0 // no pause
			key := fmt.Sprint("k", i)
			err := s.Commit(context.Background(), objects.Commit{Record: inline(key, 1, []byte(tt.name))})
			if (err != nil) != tt.wantErr {
				t.Fatalf("got %v, want an error: %t", err, tt.wantErr)
			}
			for _, want := range tt.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("got %v, want %v in it", err, want)
				}
			}
			for _, not := range tt.wantNotIs {
				if errors.Is(err, not) {
					t.Errorf("got %v, which must not be %v", err, not)
				}
			}
			_, committed, gerr := s.Item(context.Background(), key, 0)
			if gerr != nil || committed != tt.wantCommitted {
				t.Errorf("committed %t (%v), want %t", committed, gerr, tt.wantCommitted)
			}
			// Each transaction the store sends has a token of its own,
			// which the SDK keeps across its retries (the Initialize
			// step runs once per call).
			seen := map[string]bool{}
			for _, tok := range inj.tokens {
				if tok == "" || seen[tok] {
					t.Errorf("tokens %q, want a fresh one per transaction", inj.tokens)
				}
				seen[tok] = true
			}
		})
	}
}
