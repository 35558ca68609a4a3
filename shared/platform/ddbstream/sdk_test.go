package ddbstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// These tests run the real SDK serializers and deserializers against canned
// HTTP exchanges: no request leaves the process.

const fixtureStreamARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Votes/stream/2024-03-05T10:00:00.000"

// doFunc is an SDK HTTPClient that answers every request itself.
type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

var (
	_ dynamodb.HTTPClient        = doFunc(nil)
	_ dynamodbstreams.HTTPClient = doFunc(nil)
)

func jsonResponse(r *http.Request, body []byte) *http.Response {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}

func newStreamsClient(respond doFunc) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:           "us-east-1",
		Credentials:      aws.AnonymousCredentials{},
		BaseEndpoint:     aws.String("http://streams.test.invalid"),
		HTTPClient:       respond,
		RetryMaxAttempts: 1,
	})
}

func newDynamoClient(respond doFunc) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		Credentials:      aws.AnonymousCredentials{},
		BaseEndpoint:     aws.String("http://dynamodb.test.invalid"),
		HTTPClient:       respond,
		RetryMaxAttempts: 1,
	})
}

func mustReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// decodeJSON reads JSON keeping numbers as their text, so that 1709632800
// and 1.7096328e9 compare unequal.
func decodeJSON(tb testing.TB, b []byte) any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func mustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func assertJSONEqual(tb testing.TB, what string, got, want []byte) {
	tb.Helper()
	if !reflect.DeepEqual(decodeJSON(tb, got), decodeJSON(tb, want)) {
		tb.Errorf("%s JSON differs\n got %s\nwant %s", what, got, want)
	}
}

// getRecordsBody turns the Lambda event fixture back into the GetRecords
// response it came from: the same records without eventSourceARN, and with
// userIdentity spelt as the Streams API spells its Identity shape
// (PrincipalId, Type) rather than as Lambda does (principalId, type).
func getRecordsBody(tb testing.TB, fixture []byte, region string) []byte {
	tb.Helper()
	ev := decodeJSON(tb, fixture).(map[string]any)
	records := ev["Records"].([]any)
	for _, r := range records {
		rec := r.(map[string]any)
		delete(rec, "eventSourceARN")
		if u, ok := rec["userIdentity"].(map[string]any); ok {
			rec["userIdentity"] = map[string]any{"PrincipalId": u["principalId"], "Type": u["type"]}
		}
		if region != "" {
			rec["awsRegion"] = region
		}
	}
	return mustMarshal(tb, map[string]any{"Records": records, "NextShardIterator": "next"})
}

// TestLambdaEventFromGetRecords reads the fixture's records through the
// dynamodbstreams SDK and checks that LambdaEvent gives back the Lambda event
// JSON AWS delivers.
func TestLambdaEventFromGetRecords(t *testing.T) {
	fixture := mustReadFile(t, "testdata/lambda-event.json")
	tests := []struct {
		name         string
		recordRegion string // awsRegion GetRecords reports; "" keeps the fixture's
		region       string // LambdaEvent's region argument
	}{
		{"region from the record", "", ""},
		{"region override for DynamoDB Local", "ddblocal", "us-east-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := getRecordsBody(t, fixture, tt.recordRegion)
			var target string
			client := newStreamsClient(func(r *http.Request) (*http.Response, error) {
				target = r.Header.Get("X-Amz-Target")
				return jsonResponse(r, body), nil
			})
			out, err := client.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("iterator")})
			if err != nil {
				t.Fatalf("GetRecords: %v", err)
			}
			if got, want := target, "DynamoDBStreams_20120810.GetRecords"; got != want {
				t.Errorf("X-Amz-Target = %q, want %q", got, want)
			}
			ev, err := LambdaEvent(out.Records, fixtureStreamARN, tt.region)
			if err != nil {
				t.Fatalf("LambdaEvent: %v", err)
			}
			assertJSONEqual(t, "Lambda event", mustMarshal(t, ev), fixture)

			// A handler's view: the same as reading the fixture itself.
			var want events.DynamoDBEvent
			if err := json.Unmarshal(fixture, &want); err != nil {
				t.Fatal(err)
			}
			var got events.DynamoDBEvent
			if err := json.Unmarshal(mustMarshal(t, ev), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("handler sees\n %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestFixtureWrittenBackThroughDynamoSDK is aws-lambda-go issue #58's use: a
// handler writes a stream image back with PutItem. The fixture's images
// must reach the wire as the stream carried them, and an item read back
// with GetItem must be the item LambdaToDynamo made.
func TestFixtureWrittenBackThroughDynamoSDK(t *testing.T) {
	fixture := mustReadFile(t, "testdata/lambda-event.json")
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(fixture, &ev); err != nil {
		t.Fatalf("unmarshal fixture: %v", err)
	}
	raw := decodeJSON(t, fixture).(map[string]any)["Records"].([]any)

	for i, rec := range ev.Records {
		images := map[string]map[string]events.DynamoDBAttributeValue{
			"NewImage": rec.Change.NewImage,
			"OldImage": rec.Change.OldImage,
			"Keys":     rec.Change.Keys,
		}
		for name, image := range images {
			if image == nil {
				continue
			}
			t.Run(rec.EventName+"/"+name, func(t *testing.T) {
				wantItem := raw[i].(map[string]any)["dynamodb"].(map[string]any)[name]
				wantJSON := mustMarshal(t, wantItem)

				item, err := LambdaToDynamo(image)
				if err != nil {
					t.Fatalf("LambdaToDynamo: %v", err)
				}

				var sent []byte
				client := newDynamoClient(func(r *http.Request) (*http.Response, error) {
					var err error
					if sent, err = io.ReadAll(r.Body); err != nil {
						return nil, err
					}
					return jsonResponse(r, []byte(`{}`)), nil
				})
				if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("Votes"), Item: item}); err != nil {
					t.Fatalf("PutItem: %v", err)
				}
				var req struct {
					TableName string
					Item      json.RawMessage
				}
				if err := json.Unmarshal(sent, &req); err != nil {
					t.Fatalf("PutItem request %s: %v", sent, err)
				}
				assertJSONEqual(t, "PutItem Item", req.Item, wantJSON)

				client = newDynamoClient(func(r *http.Request) (*http.Response, error) {
					return jsonResponse(r, []byte(`{"Item":`+string(wantJSON)+`}`)), nil
				})
				out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("Votes"), Key: item})
				if err != nil {
					t.Fatalf("GetItem: %v", err)
				}
				if !reflect.DeepEqual(out.Item, item) {
					t.Errorf("GetItem Item\n got %v\nwant %v", out.Item, item)
				}
			})
		}
	}
}

// TestNumbersKeepTheirText checks the case a float64 would break: a number
// with more digits than a float64 holds.
func TestNumbersKeepTheirText(t *testing.T) {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(mustReadFile(t, "testdata/lambda-event.json"), &ev); err != nil {
		t.Fatal(err)
	}
	item, err := LambdaToDynamo(ev.Records[0].Change.NewImage)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := item["count"].(*dynamotypes.AttributeValueMemberN)
	if !ok {
		t.Fatalf("count is %T, want a number", item["count"])
	}
	if got, want := n.Value, "12345678901234567890.123456789"; got != want {
		t.Errorf("count = %q, want %q", got, want)
	}
}
