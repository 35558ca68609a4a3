package faultproxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

var testCredentials = credentials.NewStaticCredentialsProvider("AKIDFAULTPROXY", "secret", "")

// Clients for the proxy at endpoint. maxAttempts 0 keeps the SDK's default
// (3 attempts); the backoff sleeps are dropped, the retry decisions kept.
func dynamoClient(endpoint string, maxAttempts int) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:           "eu-west-1",
		BaseEndpoint:     aws.String(endpoint),
		Credentials:      testCredentials,
		RetryMaxAttempts: maxAttempts,
	}, func(o *dynamodb.Options) { o.Retryer = withoutBackoff(o.Retryer) })
}

func sqsClient(endpoint string, maxAttempts int) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:           "eu-west-1",
		BaseEndpoint:     aws.String(endpoint),
		Credentials:      testCredentials,
		RetryMaxAttempts: maxAttempts,
	}, func(o *sqs.Options) { o.Retryer = withoutBackoff(o.Retryer) })
}

func s3Client(endpoint string, maxAttempts int) *s3.Client {
	return s3.New(s3.Options{
		Region:           "eu-west-1",
		BaseEndpoint:     aws.String(endpoint),
		Credentials:      testCredentials,
		UsePathStyle:     true,
		RetryMaxAttempts: maxAttempts,
	}, func(o *s3.Options) { o.Retryer = withoutBackoff(o.Retryer) })
}

// sdkCase is one service's minimal successful SDK call through the proxy.
type sdkCase struct {
	name     string
	service  Service
	upstream func() http.Handler
	call     func(ctx context.Context, endpoint string, maxAttempts int) error
}

var sdkCases = []sdkCase{
	{
		name:     "dynamodb PutItem",
		service:  DynamoDB,
		upstream: func() http.Handler { return newFakeDynamo(map[string]string{"votes": "pk"}) },
		call: func(ctx context.Context, endpoint string, maxAttempts int) error {
			_, err := dynamoClient(endpoint, maxAttempts).PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String("votes"),
				Item: map[string]ddbtypes.AttributeValue{
					"pk": &ddbtypes.AttributeValueMemberS{Value: "poll#1"},
					"sk": &ddbtypes.AttributeValueMemberS{Value: "v0"},
				},
			})
			return err
		},
	},
	{
		name:     "sqs SendMessage",
		service:  SQS,
		upstream: fakeSQS,
		call: func(ctx context.Context, endpoint string, maxAttempts int) error {
			_, err := sqsClient(endpoint, maxAttempts).SendMessage(ctx, &sqs.SendMessageInput{
				QueueUrl:    aws.String(endpoint + "/000000000000/votes"),
				MessageBody: aws.String(`{"poll":"1","option":"a"}`),
			})
			return err
		},
	},
	{
		name:     "s3 PutObject",
		service:  S3,
		upstream: func() http.Handler { return newFakeS3() },
		call: func(ctx context.Context, endpoint string, maxAttempts int) error {
			_, err := s3Client(endpoint, maxAttempts).PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String("docs"),
				Key:    aws.String("a/b.json"),
				Body:   strings.NewReader(`{"hello":"world"}`),
			})
			return err
		},
	},
}

func TestSDKRetriesInjectedThrottles(t *testing.T) {
	for _, tc := range sdkCases {
		t.Run(tc.name+" succeeds on the third attempt after FailNext=2", func(t *testing.T) {
			upstream := MustUpstream(t, tc.upstream())
			p, endpoint := MustStart(t, tc.service, upstream.URL)
			p.SetFaults(Faults{FailNext: 2})

			if err := tc.call(t.Context(), endpoint, 0); err != nil {
				t.Fatalf("call through proxy: %v", err)
			}
			got := p.Stats().Counts
			want := Counts{Requests: 3, Throttled: 2, Forwarded: 1}
			if got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
		})

		t.Run(tc.name+" fails with the throttle when retries are off", func(t *testing.T) {
			upstream := MustUpstream(t, tc.upstream())
			p, endpoint := MustStart(t, tc.service, upstream.URL)
			p.SetFaults(Faults{FailNext: 1})

			err := tc.call(t.Context(), endpoint, 1)
			if err == nil {
				t.Fatal("call succeeded, want a throttling error")
			}
			if got := retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err); got != aws.TrueTernary {
				t.Errorf("SDK throttle classification = %v, want true (err %v)", got, err)
			}
			if got := retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err); got != aws.TrueTernary {
				t.Errorf("SDK retryable classification = %v, want true (err %v)", got, err)
			}
			if got := p.Stats().Requests; got != 1 {
				t.Errorf("attempts = %d, want 1", got)
			}
		})
	}
}

// TestSDKErrorShapes checks that each injected error reaches the caller as
// the typed error or API error code AWS's own answer produces.
func TestSDKErrorShapes(t *testing.T) {
	byService := map[Service]sdkCase{}
	for _, tc := range sdkCases {
		byService[tc.service] = tc
	}
	tests := []struct {
		name         string
		service      Service
		opts         []Option
		faults       Faults
		wantCode     string
		wantStatus   int
		wantThrottle bool
		as           func(error) bool // the typed error, where the SDK has one
	}{
		{
			name: "dynamodb default throttle", service: DynamoDB,
			faults: Faults{FailNext: 1}, wantCode: "ProvisionedThroughputExceededException", wantStatus: 400, wantThrottle: true,
			as: func(err error) bool {
				var e *ddbtypes.ProvisionedThroughputExceededException
				return errors.As(err, &e) && len(e.ThrottlingReasons) == 1 &&
					aws.ToString(e.ThrottlingReasons[0].Reason) == "TableWriteProvisionedThroughputExceeded" &&
					aws.ToString(e.ThrottlingReasons[0].Resource) == "arn:aws:dynamodb:eu-west-1:000000000000:table/votes"
			},
		},
		{
			name: "dynamodb ThrottlingException", service: DynamoDB, opts: []Option{WithDynamoDBThrottleCode(ThrottlingException)},
			faults: Faults{ThrottleRate: 1}, wantCode: "ThrottlingException", wantStatus: 400, wantThrottle: true,
			as: func(err error) bool { var e *ddbtypes.ThrottlingException; return errors.As(err, &e) },
		},
		{
			name: "dynamodb RequestLimitExceeded", service: DynamoDB, opts: []Option{WithDynamoDBThrottleCode(RequestLimitExceeded)},
			faults: Faults{FailNext: 1}, wantCode: "RequestLimitExceeded", wantStatus: 400, wantThrottle: true,
			as: func(err error) bool { var e *ddbtypes.RequestLimitExceeded; return errors.As(err, &e) },
		},
		{
			name: "dynamodb 500", service: DynamoDB,
			faults: Faults{ServerErrorRate: 1, ServerErrorStatus: 500}, wantCode: "InternalServerError", wantStatus: 500,
			as: func(err error) bool { var e *ddbtypes.InternalServerError; return errors.As(err, &e) },
		},
		{
			name: "dynamodb 503", service: DynamoDB,
			faults: Faults{ServerErrorRate: 1, ServerErrorStatus: 503}, wantCode: "ServiceUnavailable", wantStatus: 503,
		},
		{
			name: "sqs throttle", service: SQS,
			faults: Faults{FailNext: 1}, wantCode: "RequestThrottled", wantStatus: 403, wantThrottle: true,
			as: func(err error) bool { var e *sqstypes.RequestThrottled; return errors.As(err, &e) },
		},
		{
			name: "sqs 500", service: SQS,
			faults: Faults{ServerErrorRate: 1, ServerErrorStatus: 500}, wantCode: "InternalFailure", wantStatus: 500,
		},
		{
			name: "sqs 503", service: SQS,
			faults: Faults{ServerErrorRate: 1, ServerErrorStatus: 503}, wantCode: "ServiceUnavailable", wantStatus: 503,
		},
		{
			name: "s3 SlowDown", service: S3,
			faults: Faults{FailNext: 1}, wantCode: "SlowDown", wantStatus: 503, wantThrottle: true,
		},
		{
			name: "s3 500", service: S3,
			faults: Faults{ServerErrorRate: 1, ServerErrorStatus: 500}, wantCode: "InternalError", wantStatus: 500,
		},
		{
			name: "s3 503", service: S3,
			faults: Faults{ServerErrorRate: 1, ServerErrorStatus: 503}, wantCode: "ServiceUnavailable", wantStatus: 503,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := byService[tt.service]
			upstream := MustUpstream(t, sc.upstream())
			p, endpoint := MustStart(t, tt.service, upstream.URL, tt.opts...)
			p.SetFaults(tt.faults)

			err := sc.call(t.Context(), endpoint, 1)
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want a smithy.APIError", err)
			}
			if got := apiErr.ErrorCode(); got != tt.wantCode {
				t.Errorf("ErrorCode() = %q, want %q", got, tt.wantCode)
			}
			var respErr *awshttp.ResponseError
			if !errors.As(err, &respErr) {
				t.Fatalf("err = %v, want an *awshttp.ResponseError", err)
			}
			if got := respErr.HTTPStatusCode(); got != tt.wantStatus {
				t.Errorf("HTTPStatusCode() = %d, want %d", got, tt.wantStatus)
			}
			if respErr.ServiceRequestID() == "" {
				t.Error("ServiceRequestID() is empty, want the proxy's request id")
			}
			if tt.as != nil && !tt.as(err) {
				t.Errorf("err = %#v, not the typed error wanted", err)
			}
			if got := retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool(); got != tt.wantThrottle {
				t.Errorf("SDK throttle classification = %v, want %v", got, tt.wantThrottle)
			}
			if got := retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err); got != aws.TrueTernary {
				t.Errorf("SDK retryable classification = %v, want true", got)
			}
		})
	}
}

// TestSDKRetriesDroppedConnections checks that a connection closed without
// a response is retried by the SDK, as a reset from AWS would be.
func TestSDKRetriesDroppedConnections(t *testing.T) {
	upstream := MustUpstream(t, newFakeDynamo(map[string]string{"votes": "pk"}))
	p, endpoint := MustStart(t, DynamoDB, upstream.URL)
	p.SetFaults(Faults{DropRate: 1})

	if err := sdkCases[0].call(t.Context(), endpoint, 0); err == nil {
		t.Fatal("call succeeded, want an error after the dropped attempts")
	}
	got := p.Stats().Counts
	want := Counts{Requests: 3, Dropped: 3}
	if got != want {
		t.Errorf("Stats = %+v, want %+v (3 attempts, all dropped)", got, want)
	}
}

// TestSDKLargePutObject sends an object big enough for the SDK to ask for
// 100 Continue, first refused with SlowDown (before the body is read), then
// forwarded whole.
func TestSDKLargePutObject(t *testing.T) {
	store := newFakeS3()
	upstream := MustUpstream(t, store)
	p, endpoint := MustStart(t, S3, upstream.URL)
	p.SetFaults(Faults{FailNext: 1})

	body := strings.Repeat("0123456789abcdef", 5<<16) // 5 MiB
	_, err := s3Client(endpoint, 0).PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String("docs"), Key: aws.String("big.bin"), Body: strings.NewReader(body),
	})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	store.mu.Lock()
	got := store.objects["/docs/big.bin"]
	store.mu.Unlock()
	if string(got) != body {
		t.Errorf("upstream stored %d bytes, want the %d sent", len(got), len(body))
	}
	if s := p.Stats(); s.Throttled != 1 || s.Forwarded != 1 {
		t.Errorf("Stats = %+v, want 1 throttled, 1 forwarded", s.Counts)
	}
}
