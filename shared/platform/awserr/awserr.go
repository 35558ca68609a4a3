// Package awserr classifies the AWS SDK's API errors by their code, for the
// adapters that map them to their domain's errors (each keeps its own
// mapping; this is only the reading of the code).
package awserr

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Code is the API error code of err ("ThrottlingException", "NoSuchKey",
// …), or "" when err holds no API error.
func Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Is reports whether err is an API error with one of codes.
func Is(err error, codes ...string) bool {
	c := Code(err)
	if c == "" {
		return false
	}
	for _, want := range codes {
		if c == want {
			return true
		}
	}
	return false
}

// DynamoDBThrottle are DynamoDB's answers to load: the request was refused,
// and may be retried after a pause.
var DynamoDBThrottle = []string{"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}

// IsDynamoDBThrottle reports whether DynamoDB refused err's request for load.
func IsDynamoDBThrottle(err error) bool { return Is(err, DynamoDBThrottle...) }

// IsConditionFailed reports whether err is DynamoDB's refusal of a write
// whose condition expression did not hold (ConditionalCheckFailedException,
// typed or generic). A transaction cancelled for a failed condition is a
// TransactionCanceledException instead: read its reasons with
// CancellationCodes.
func IsConditionFailed(err error) bool {
	return Is(err, "ConditionalCheckFailedException")
}

// CancellationCodes are the per-action reason codes of a cancelled
// DynamoDB transaction ("None", "ConditionalCheckFailed",
// "TransactionConflict", …), in the order of its actions; ok is false when
// err is not a TransactionCanceledException.
func CancellationCodes(err error) (codes []string, ok bool) {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil, false
	}
	codes = make([]string, len(tc.CancellationReasons))
	for i, r := range tc.CancellationReasons {
		if r.Code != nil {
			codes[i] = *r.Code
		}
	}
	return codes, true
}
