// Package lambdafntest is the environment the tests of a function's Setup
// give it: the variables under test, an AWS configuration with a region
// and static credentials whose HTTP client fails the test on any request
// (a Setup builds its clients and reads its configuration, and calls
// nothing), and logs and metrics into a buffer.
package lambdafntest

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// noNetwork fails the test on any request.
type noNetwork struct{ tb testing.TB }

func (n noNetwork) Do(r *http.Request) (*http.Response, error) {
	n.tb.Errorf("a Setup made a request: %s %s", r.Method, r.URL)
	return nil, errors.New("no network in this test")
}

// Env is a Setup's environment over vars, offline; its logs and metrics
// go to the buffer returned.
func Env(tb testing.TB, vars map[string]string) (lambdafn.Env, *bytes.Buffer) {
	var out bytes.Buffer
	return lambdafn.Env{
		Getenv: func(k string) string { return vars[k] },
		AWS: aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
			HTTPClient:  noNetwork{tb},
		},
		Log:     slog.New(slog.NewTextHandler(&out, nil)),
		Metrics: &out,
	}, &out
}

// With returns base with the changes applied; an empty value removes the
// variable.
func With(base, changes map[string]string) map[string]string {
	out := maps.Clone(base)
	for k, v := range changes {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}
