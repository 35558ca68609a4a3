package runner

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
)

func TestLambdaAPIRejectsBadRequests(t *testing.T) {
	r := New()
	_ = r.AddFunction(Function{LogicalID: "Echo", Handler: lambda.NewHandler(func(ctx context.Context, in map[string]any) (map[string]any, error) { return in, nil })})
	srv := httptest.NewServer(r.LambdaAPI())
	defer srv.Close()
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantInBody               string
		wantHeader               string
	}{
		{"invoke ok", "POST", "/2015-03-31/functions/Echo/invocations", `{"a":1}`, 200, `"a":1`, ""},
		{"invoke unknown function", "POST", "/2015-03-31/functions/Nope/invocations", `{}`, 404, "ResourceNotFoundException", ""},
		{"invoke payload not JSON", "POST", "/2015-03-31/functions/Echo/invocations", `{"a":`, 200, "errorMessage", "Unhandled"},
		{"invoke payload over 6 MB", "POST", "/2015-03-31/functions/Echo/invocations", `"` + strings.Repeat("x", 6<<20) + `"`, 413, "RequestTooLargeException", ""},
		{"mapping body not JSON", "POST", "/2015-03-31/event-source-mappings/", `{`, 400, "InvalidParameterValueException", ""},
		{"mapping for unknown function", "POST", "/2015-03-31/event-source-mappings/", `{"FunctionName":"Nope","EventSourceArn":"arn:aws:sqs:us-east-1:0:q"}`, 404, "ResourceNotFoundException", ""},
		{"mapping for an unsupported source", "POST", "/2015-03-31/event-source-mappings/", `{"FunctionName":"Echo","EventSourceArn":"arn:aws:kinesis:us-east-1:0:stream/s"}`, 400, "not a DynamoDB stream or SQS queue", ""},
		{"mapping with no wiring", "POST", "/2015-03-31/event-source-mappings", `{"FunctionName":"Echo","EventSourceArn":"arn:aws:dynamodb:us-east-1:0:table/t/stream/x"}`, 400, "no streams client", ""},
		{"get unknown mapping", "GET", "/2015-03-31/event-source-mappings/0000", "", 404, "ResourceNotFoundException", ""},
		{"delete unknown mapping", "DELETE", "/2015-03-31/event-source-mappings/0000", "", 404, "ResourceNotFoundException", ""},
		{"list for unknown function", "GET", "/2015-03-31/event-source-mappings/?FunctionName=Nope", "", 404, "ResourceNotFoundException", ""},
		{"list empty", "GET", "/2015-03-31/event-source-mappings?FunctionName=Echo", "", 200, `"EventSourceMappings":[]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			// The error code travels in X-Amzn-ErrorType, as in Lambda's API.
			body := resp.Header.Get("X-Amzn-ErrorType") + " " + string(raw)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantInBody) {
				t.Errorf("got %d %s, want %d with %q", resp.StatusCode, body, tt.wantStatus, tt.wantInBody)
			}
			if tt.wantHeader != "" && resp.Header.Get("X-Amz-Function-Error") != tt.wantHeader {
				t.Errorf("X-Amz-Function-Error = %q, want %q", resp.Header.Get("X-Amz-Function-Error"), tt.wantHeader)
			}
		})
	}
}

// Lambda keeps one mapping of a function and a stream: of several created
// at once (two rotations subscribing a new month), one is made and the
// others are refused with ResourceConflictException; once it is deleted, a
// new one can be made.
func TestLambdaAPIOneMappingPerFunctionAndStream(t *testing.T) {
	r := New()
	_ = r.AddFunction(Function{LogicalID: "Echo", Handler: lambda.NewHandler(func(ctx context.Context, in map[string]any) (map[string]any, error) { return in, nil })})
	r.SetWiring(Wiring{Streams: &fakeStream{}})
	srv := httptest.NewServer(r.LambdaAPI())
	defer srv.Close()
	create := func() (int, string) {
		resp, err := http.Post(srv.URL+"/2015-03-31/event-source-mappings/", "application/json",
			strings.NewReader(`{"FunctionName":"Echo","EventSourceArn":"arn:aws:dynamodb:us-east-1:0:table/t/stream/x","StartingPosition":"TRIM_HORIZON"}`))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType") + " " + string(raw)
	}
	const n = 4
	statuses := make(chan int, n)
	bodies := make(chan string, n)
	for range n {
		go func() {
			s, b := create()
			statuses <- s
			bodies <- b
		}()
	}
	made := 0
	var uuid string
	for range n {
		s, b := <-statuses, <-bodies
		switch {
		case s == http.StatusAccepted:
			made++
			var e ESM
			if err := json.Unmarshal([]byte(strings.TrimPrefix(b, " ")), &e); err != nil {
				t.Fatal(err)
			}
			uuid = e.UUID
		case s != http.StatusConflict || !strings.Contains(b, "ResourceConflictException"):
			t.Errorf("got %d %s, want 202 or 409 ResourceConflictException", s, b)
		}
	}
	if made != 1 {
		t.Fatalf("%d mappings made, want 1", made)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/2015-03-31/event-source-mappings/"+uuid, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s, b := create(); s != http.StatusAccepted {
		t.Errorf("after the delete: %d %s, want the mapping made", s, b)
	}
}
