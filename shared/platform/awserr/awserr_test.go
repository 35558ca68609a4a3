package awserr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

func TestCodeAndIs(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		code     string
		throttle bool
	}{
		{"nil", nil, "", false},
		{"not an API error", errors.New("dial tcp: refused"), "", false},
		{"generic, wrapped", fmt.Errorf("put: %w", &smithy.GenericAPIError{Code: "NoSuchKey"}), "NoSuchKey", false},
		{"typed throttle", fmt.Errorf("get: %w", &types.ProvisionedThroughputExceededException{}), "ProvisionedThroughputExceededException", true},
		{"generic throttle", &smithy.GenericAPIError{Code: "ThrottlingException"}, "ThrottlingException", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := awserr.Code(tt.err); got != tt.code {
				t.Errorf("Code = %q, want %q", got, tt.code)
			}
			if got := awserr.IsDynamoDBThrottle(tt.err); got != tt.throttle {
				t.Errorf("IsDynamoDBThrottle = %v, want %v", got, tt.throttle)
			}
			if tt.code != "" && (!awserr.Is(tt.err, "Other", tt.code) || awserr.Is(tt.err, "Other")) {
				t.Errorf("Is does not match exactly the code %q", tt.code)
			}
			if awserr.Is(tt.err) {
				t.Error("Is with no codes matched")
			}
		})
	}
}

func TestConditionFailedAndCancellationCodes(t *testing.T) {
	code := func(s string) *string { return &s }
	cancelled := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: code("None")}, {Code: code("ConditionalCheckFailed")}, {},
	}}
	tests := []struct {
		name      string
		err       error
		condition bool
		codes     []string
	}{
		{"typed", fmt.Errorf("put: %w", &types.ConditionalCheckFailedException{}), true, nil},
		{"generic", &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}, true, nil},
		{"throttle", &types.ProvisionedThroughputExceededException{}, false, nil},
		{"cancelled transaction", fmt.Errorf("commit: %w", cancelled), false, []string{"None", "ConditionalCheckFailed", ""}},
		{"nil", nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := awserr.IsConditionFailed(tt.err); got != tt.condition {
				t.Errorf("IsConditionFailed = %v, want %v", got, tt.condition)
			}
			codes, ok := awserr.CancellationCodes(tt.err)
			if ok != (tt.codes != nil) || fmt.Sprint(codes) != fmt.Sprint(tt.codes) {
				t.Errorf("CancellationCodes = %q, %v; want %q", codes, ok, tt.codes)
			}
		})
	}
}
