package faultproxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestS3Operation(t *testing.T) {
	tests := []struct {
		method, target string
		host           string
		header         map[string]string
		want           Operation
	}{
		{"GET", "/", "", nil, Operation{Action: "ListBuckets"}},
		{"PUT", "/docs", "", nil, Operation{Action: "CreateBucket", Bucket: "docs"}},
		{"HEAD", "/docs", "", nil, Operation{Action: "HeadBucket", Bucket: "docs"}},
		{"DELETE", "/docs/", "", nil, Operation{Action: "DeleteBucket", Bucket: "docs"}},
		{"GET", "/docs?list-type=2&prefix=a%2F", "", nil, Operation{Action: "ListObjectsV2", Bucket: "docs"}},
		{"GET", "/docs?prefix=a", "", nil, Operation{Action: "ListObjects", Bucket: "docs"}},
		{"GET", "/docs?versions", "", nil, Operation{Action: "ListObjectVersions", Bucket: "docs"}},
		{"GET", "/docs?uploads", "", nil, Operation{Action: "ListMultipartUploads", Bucket: "docs"}},
		{"GET", "/docs?location", "", nil, Operation{Action: "GetBucketLocation", Bucket: "docs"}},
		{"PUT", "/docs?versioning", "", nil, Operation{Action: "PutBucketVersioning", Bucket: "docs"}},
		{"PUT", "/docs?notification", "", nil, Operation{Action: "PutBucketNotificationConfiguration", Bucket: "docs"}},
		{"DELETE", "/docs?lifecycle", "", nil, Operation{Action: "DeleteBucketLifecycle", Bucket: "docs"}},
		{"POST", "/docs?delete", "", nil, Operation{Action: "DeleteObjects", Bucket: "docs"}},
		{"PUT", "/docs/a/b.json", "", nil, Operation{Action: "PutObject", Bucket: "docs", Key: "a/b.json"}},
		{"PUT", "/docs/a%20b%21", "", nil, Operation{Action: "PutObject", Bucket: "docs", Key: "a b!"}},
		{"PUT", "/docs/copy", "", map[string]string{"X-Amz-Copy-Source": "/docs/a"}, Operation{Action: "CopyObject", Bucket: "docs", Key: "copy"}},
		{"PUT", "/docs/k?partNumber=2&uploadId=u", "", nil, Operation{Action: "UploadPart", Bucket: "docs", Key: "k"}},
		{"PUT", "/docs/k?partNumber=2&uploadId=u", "", map[string]string{"X-Amz-Copy-Source": "/docs/a"}, Operation{Action: "UploadPartCopy", Bucket: "docs", Key: "k"}},
		{"PUT", "/docs/k?tagging", "", nil, Operation{Action: "PutObjectTagging", Bucket: "docs", Key: "k"}},
		{"POST", "/docs/k?uploads", "", nil, Operation{Action: "CreateMultipartUpload", Bucket: "docs", Key: "k"}},
		{"POST", "/docs/k?uploadId=u", "", nil, Operation{Action: "CompleteMultipartUpload", Bucket: "docs", Key: "k"}},
		{"DELETE", "/docs/k?uploadId=u", "", nil, Operation{Action: "AbortMultipartUpload", Bucket: "docs", Key: "k"}},
		{"GET", "/docs/k?uploadId=u", "", nil, Operation{Action: "ListParts", Bucket: "docs", Key: "k"}},
		{"GET", "/docs/k", "", nil, Operation{Action: "GetObject", Bucket: "docs", Key: "k"}},
		{"GET", "/docs/k?attributes", "", nil, Operation{Action: "GetObjectAttributes", Bucket: "docs", Key: "k"}},
		{"HEAD", "/docs/k", "", nil, Operation{Action: "HeadObject", Bucket: "docs", Key: "k"}},
		{"DELETE", "/docs/k", "", nil, Operation{Action: "DeleteObject", Bucket: "docs", Key: "k"}},
		{"DELETE", "/docs/k?tagging", "", nil, Operation{Action: "DeleteObjectTagging", Bucket: "docs", Key: "k"}},
		{"GET", "/a/b", "docs.localhost:9000", nil, Operation{Action: "GetObject", Bucket: "docs", Key: "a/b"}},
		{"GET", "/?list-type=2", "docs.localhost", nil, Operation{Action: "ListObjectsV2", Bucket: "docs"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.host+tt.target, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			if tt.host != "" {
				r.Host = tt.host
			}
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			tt.want.Service = S3
			if got := s3Operation(r); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("s3Operation = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDynamoOperation(t *testing.T) {
	tests := []struct {
		name, target, body string
		want               Operation
	}{
		{
			name: "PutItem", target: "DynamoDB_20120810.PutItem", body: `{"TableName":"votes","Item":{"pk":{"S":"a"}}}`,
			want: Operation{Action: "PutItem", Table: "votes", Tables: []string{"votes"}},
		},
		{
			name: "BatchWriteItem on one table", target: "DynamoDB_20120810.BatchWriteItem",
			body: `{"RequestItems":{"votes":[{"PutRequest":{"Item":{"pk":{"S":"a"}}}}]}}`,
			want: Operation{Action: "BatchWriteItem", Table: "votes", Tables: []string{"votes"}},
		},
		{
			name: "TransactWriteItems on two tables", target: "DynamoDB_20120810.TransactWriteItems",
			body: `{"TransactItems":[{"Put":{"TableName":"ledger"}},{"Update":{"TableName":"counters"}},{"Put":{"TableName":"ledger"}}]}`,
			want: Operation{Action: "TransactWriteItems", Tables: []string{"counters", "ledger"}},
		},
		{
			name: "ListTables", target: "DynamoDB_20120810.ListTables", body: `{}`,
			want: Operation{Action: "ListTables"},
		},
		{
			name: "streams GetRecords", target: "DynamoDBStreams_20120810.GetRecords", body: `{"ShardIterator":"x"}`,
			want: Operation{Action: "GetRecords"},
		},
		{
			name: "broken json", target: "DynamoDB_20120810.PutItem", body: `{"TableName":`,
			want: Operation{Action: "PutItem"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			r.Header.Set("X-Amz-Target", tt.target)
			got, body, err := dynamoOperation(r)
			if err != nil {
				t.Fatalf("dynamoOperation: %v", err)
			}
			tt.want.Service = DynamoDB
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("dynamoOperation = %+v, want %+v", got, tt.want)
			}
			if string(body) != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
			rest, _ := io.ReadAll(r.Body)
			if string(rest) != tt.body {
				t.Errorf("request body after classification = %q, want it replayed whole", rest)
			}
		})
	}
}

func TestSQSOperation(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		header                     map[string]string
		want                       Operation
	}{
		{
			name: "json", method: http.MethodPost, target: "/",
			header: map[string]string{"X-Amz-Target": "AmazonSQS.ReceiveMessage", "Content-Type": "application/x-amz-json-1.0"},
			body:   `{"QueueUrl":"http://127.0.0.1:9324/000000000000/votes","MaxNumberOfMessages":10}`,
			want:   Operation{Action: "ReceiveMessage", QueueURL: "http://127.0.0.1:9324/000000000000/votes"},
		},
		{
			name: "query form", method: http.MethodPost, target: "/",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
			body:   "Action=SendMessage&QueueUrl=http%3A%2F%2F127.0.0.1%3A9324%2F000000000000%2Fvotes&MessageBody=hi",
			want:   Operation{Action: "SendMessage", QueueURL: "http://127.0.0.1:9324/000000000000/votes"},
		},
		{
			name: "query form posted to the queue", method: http.MethodPost, target: "/000000000000/votes",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			body:   "Action=DeleteMessage&ReceiptHandle=r",
			want:   Operation{Action: "DeleteMessage", QueueURL: "http://example.com/000000000000/votes"},
		},
		{
			name: "query in the URL", method: http.MethodGet, target: "/?Action=ListQueues",
			want: Operation{Action: "ListQueues"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			got, _, err := sqsOperation(r)
			if err != nil {
				t.Fatalf("sqsOperation: %v", err)
			}
			tt.want.Service = SQS
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("sqsOperation = %+v, want %+v", got, tt.want)
			}
			rest, _ := io.ReadAll(r.Body)
			if string(rest) != tt.body {
				t.Errorf("request body after classification = %q, want it replayed whole", rest)
			}
		})
	}
}

func TestBufferBodyStreamsOversizedBodies(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", io.LimitReader(&repeatReader{}, maxParseBytes+10))
	r.ContentLength = -1 // as for a chunked request: the size is learnt by reading
	body, complete, err := bufferBody(r)
	if err != nil || body != nil || complete {
		t.Fatalf("bufferBody = %d bytes, %v, %v; want nil, false, nil", len(body), complete, err)
	}
	n, _ := io.Copy(io.Discard, r.Body)
	if n != maxParseBytes+10 {
		t.Errorf("replayed %d bytes, want %d", n, maxParseBytes+10)
	}
}

func TestS3ErrorCode(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"result", `<?xml version="1.0"?><CompleteMultipartUploadResult><ETag>"x"</ETag></CompleteMultipartUploadResult>`, ""},
		{"error after keep-alive spaces", "   \n <?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code></Error>", "InternalError"},
		{"error without code", `<Error><Message>m</Message></Error>`, "UnknownError"},
		{"empty", "", ""},
		{"not xml", "{}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s3ErrorCode([]byte(tt.body)); got != tt.want {
				t.Errorf("s3ErrorCode = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSQSQueryProtocolThrottle(t *testing.T) {
	upstream := MustUpstream(t, fakeSQS())
	p, endpoint := MustStart(t, SQS, upstream.URL)
	p.SetFaults(Faults{FailNext: 1})

	resp, err := http.Post(endpoint+"/000000000000/votes", "application/x-www-form-urlencoded", strings.NewReader("Action=SendMessage&MessageBody=hi"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "text/xml" {
		t.Errorf("status, Content-Type = %d, %q, want 403, text/xml", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"<ErrorResponse", "<Type>Sender</Type>", "<Code>RequestThrottled</Code>", "<RequestId>"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body %s lacks %s", body, want)
		}
	}
	if got := p.Stats().ByAction["SendMessage"].Throttled; got != 1 {
		t.Errorf("Throttled[SendMessage] = %d, want 1", got)
	}
}

func TestS3HeadErrorHasNoBody(t *testing.T) {
	upstream := MustUpstream(t, newFakeS3())
	p, endpoint := MustStart(t, S3, upstream.URL)
	p.SetFaults(Faults{FailNext: 1})

	resp, err := http.Head(endpoint + "/docs/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Amz-Request-Id") == "" {
		t.Errorf("status = %d, request id %q; want 503 with a request id", resp.StatusCode, resp.Header.Get("X-Amz-Request-Id"))
	}
}

// TablesWritten names the tables of a DynamoDB write that succeeded, and
// nothing else: a refused or failed write, a read, another service.
func TestTablesWritten(t *testing.T) {
	ddb := func(action string, tables ...string) Operation {
		return Operation{Service: DynamoDB, Action: action, Tables: tables}
	}
	for _, tc := range []struct {
		name string
		ex   Exchange
		want []string
	}{
		{"put", Exchange{Operation: ddb("PutItem", "t"), StatusCode: 200}, []string{"t"}},
		{"update", Exchange{Operation: ddb("UpdateItem", "t"), StatusCode: 200}, []string{"t"}},
		{"delete", Exchange{Operation: ddb("DeleteItem", "t"), StatusCode: 200}, []string{"t"}},
		{"batch", Exchange{Operation: ddb("BatchWriteItem", "a", "b"), StatusCode: 200}, []string{"a", "b"}},
		{"transaction", Exchange{Operation: ddb("TransactWriteItems", "a", "b"), StatusCode: 200}, []string{"a", "b"}},
		{"refused", Exchange{Operation: ddb("PutItem", "t"), StatusCode: 400}, nil},
		{"throttled", Exchange{Operation: ddb("PutItem", "t"), StatusCode: 503}, nil},
		{"broken answer", Exchange{Operation: ddb("PutItem", "t"), StatusCode: 200, Err: errors.New("reset")}, nil},
		{"read", Exchange{Operation: ddb("GetItem", "t"), StatusCode: 200}, nil},
		{"stream read", Exchange{Operation: ddb("GetRecords"), StatusCode: 200}, nil},
		{"sqs", Exchange{Operation: Operation{Service: SQS, Action: "SendMessage"}, StatusCode: 200}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ex.TablesWritten(); !slices.Equal(got, tc.want) {
				t.Errorf("TablesWritten() = %v, want %v", got, tc.want)
			}
		})
	}
}
