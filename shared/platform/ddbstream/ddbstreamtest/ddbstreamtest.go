// Package ddbstreamtest makes the stream images tests need from table
// items. Only tests import it.
package ddbstreamtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Image is item as a Lambda stream event carries it: the item in DynamoDB's
// JSON, as the dynamodb SDK writes it into a PutItem request, decoded as
// aws-lambda-go decodes an event. No request leaves the process.
func Image(tb testing.TB, item map[string]dynamotypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	tb.Helper()
	var sent []byte
	client := dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		Credentials:      aws.AnonymousCredentials{},
		BaseEndpoint:     aws.String("http://dynamodb.test.invalid"),
		RetryMaxAttempts: 1,
		HTTPClient: doFunc(func(r *http.Request) (*http.Response, error) {
			var err error
			sent, err = io.ReadAll(r.Body)
			return &http.Response{
				StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
				Body:   io.NopCloser(strings.NewReader("{}")), ContentLength: 2, Request: r,
			}, err
		}),
	})
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item}); err != nil {
		tb.Fatalf("ddbstreamtest: item to DynamoDB JSON: %v", err)
	}
	var req struct {
		Item map[string]events.DynamoDBAttributeValue
	}
	if err := json.Unmarshal(sent, &req); err != nil {
		tb.Fatalf("ddbstreamtest: %s as a Lambda image: %v", sent, err)
	}
	return req.Item
}

// doFunc is an SDK HTTPClient that answers every request itself.
type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

var _ dynamodb.HTTPClient = doFunc(nil)
