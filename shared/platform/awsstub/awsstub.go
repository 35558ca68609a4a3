// Package awsstub answers an AWS SDK client's calls inside the process, for
// the unit tests that check the exact request an adapter sends, or need an
// answer no local server gives (a cancelled transaction's reasons, a
// condition's holder). The client stays the SDK's own: the stub stands
// where the request would be serialized and sent, after the SDK validated
// it, and what it returns is the call's answer (an error is wrapped as the
// SDK wraps the service's). Behaviour is tested against the real engines.
package awsstub

import (
	"context"

	"github.com/aws/smithy-go/middleware"
)

// Answer is an API option (dynamodb.Options.APIOptions, s3.Options…) that
// hands each call's input to answer and returns what it gives instead of
// sending a request.
func Answer(answer func(in any) (out any, err error)) func(*middleware.Stack) error {
	stub := middleware.InitializeMiddlewareFunc("awsstub.Answer", func(_ context.Context, in middleware.InitializeInput, _ middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		out, err := answer(in.Parameters)
		return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, err
	})
	return func(st *middleware.Stack) error { return st.Initialize.Add(stub, middleware.After) }
}
