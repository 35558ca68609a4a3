package schedule

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestScheduledEventMatchesAWS compares the marshalled event with the
// scheduled event in the EventBridge and Lambda documentation.
func TestScheduledEventMatchesAWS(t *testing.T) {
	fixture, err := os.ReadFile("testdata/scheduled-event.json")
	if err != nil {
		t.Fatal(err)
	}
	// Sub-second parts and time zones are dropped: EventBridge sends UTC seconds.
	at := time.Date(2015, 10, 8, 18, 53, 6, 789_000_000, time.FixedZone("CEST", 2*60*60))
	ev, err := ScheduledEvent("arn:aws:events:us-east-1:123456789012:rule/my-scheduled-rule", at, "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var gotV, wantV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fixture, &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotV, wantV) {
		t.Errorf("event JSON\n got %s\nwant %s", got, fixture)
	}

	// And the fixture reads back into the same value a handler would get.
	var back events.EventBridgeEvent
	if err := json.Unmarshal(fixture, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Time.Equal(ev.Time) || back.ID != ev.ID || back.Region != ev.Region || back.AccountID != ev.AccountID {
		t.Errorf("fixture read back as %+v, want %+v", back, ev)
	}
}

func TestScheduledEventErrors(t *testing.T) {
	at := time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		arn  string
		id   string
	}{
		{"empty arn", "", "id"},
		{"not an arn", "my-rule", "id"},
		{"other service", "arn:aws:sqs:us-east-1:123456789012:rule/x", "id"},
		{"no region", "arn:aws:events::123456789012:rule/x", "id"},
		{"short account", "arn:aws:events:us-east-1:1234:rule/x", "id"},
		{"not a rule", "arn:aws:events:us-east-1:123456789012:event-bus/default", "id"},
		{"empty rule name", "arn:aws:events:us-east-1:123456789012:rule/", "id"},
		{"empty id", "arn:aws:events:us-east-1:123456789012:rule/x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ev, err := ScheduledEvent(tt.arn, at, tt.id); err == nil {
				t.Errorf("ScheduledEvent(%q) = %+v, want an error", tt.arn, ev)
			}
		})
	}
}

func TestScheduledEventCustomBusRule(t *testing.T) {
	arn := "arn:aws-cn:events:cn-north-1:123456789012:rule/my-bus/my-rule"
	ev, err := ScheduledEvent(arn, time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC), "id-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ev.Region, "cn-north-1"; got != want {
		t.Errorf("Region = %q, want %q", got, want)
	}
	if got, want := ev.Resources, []string{arn}; !reflect.DeepEqual(got, want) {
		t.Errorf("Resources = %q, want %q", got, want)
	}
}
