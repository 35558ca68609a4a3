package main

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// A refused connection (the local stack down) ends a command's call at
// once; the SDK's default retries it up to its maximum attempts.
func TestRefusedConnectionIsNotRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	vars := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL_SQS": "http://" + addr}
	getenv := func(k string) string { return vars[k] }
	for _, tt := range []struct {
		name    string
		load    func(context.Context, func(string) string) (aws.Config, error)
		retried bool
	}{
		{"the commands' configuration", cliAWS, false},
		{"the SDK's default retries", awsenv.FromVars, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.load(context.Background(), getenv)
			if err != nil {
				t.Fatal(err)
			}
			_, err = sqs.NewFromConfig(cfg).ListQueues(context.Background(), &sqs.ListQueuesInput{})
			var max *retry.MaxAttemptsError
			if err == nil || errors.As(err, &max) != tt.retried {
				t.Errorf("ListQueues against a closed port: %v; want retried %v", err, tt.retried)
			}
		})
	}
}
