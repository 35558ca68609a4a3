// Package awserr classifies the AWS SDK's API errors by their code, for the
// adapters that map them to their domain's errors (each keeps its own
// mapping; this is only the reading of the code).
package awserr

import (
	"errors"

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
