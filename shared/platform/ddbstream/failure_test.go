package ddbstream

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// The sample of events/ reads into Failure and writes back the same JSON:
// no field of Lambda's record is lost or renamed.
func TestFailureRoundTripsLambdasRecord(t *testing.T) {
	raw, err := os.ReadFile("../../../events/stream-failure.json")
	if err != nil {
		t.Fatal(err)
	}
	var f Failure
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if f.Batch == nil || f.Batch.BatchSize != 100 || f.RequestContext.Condition != "RetryAttemptsExhausted" || f.RequestContext.ApproximateInvokeCount != 6 {
		t.Fatalf("read %+v (batch %+v)", f, f.Batch)
	}
	back, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(back, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("written back:\n%s\nwant the sample:\n%s", back, raw)
	}
	// Not a stream's failure: no batch.
	var other Failure
	if err := json.Unmarshal([]byte(`{"requestContext":{"condition":"RetriesExhausted"}}`), &other); err != nil || other.Batch != nil {
		t.Errorf("an SQS-style failure: %+v, %v; want no batch", other, err)
	}
}
