package schedule

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ScheduledEvent builds the event a scheduled EventBridge rule sends to its
// Lambda target when it fires at at:
//
//	{"version":"0","id":"…","detail-type":"Scheduled Event","source":"aws.events",
//	 "account":"123456789012","time":"2015-10-08T16:53:06Z","region":"us-east-1",
//	 "resources":["arn:aws:events:us-east-1:123456789012:rule/my-rule"],"detail":{}}
//
// The account and region come from ruleARN. id is the event id (EventBridge
// uses a UUID); the caller supplies it so runs can be replayed. The time is
// UTC with whole seconds, as EventBridge sends it. aws-lambda-go calls the
// type events.EventBridgeEvent (an alias of events.CloudWatchEvent), and its
// json.Marshal output is the payload Lambda receives.
func ScheduledEvent(ruleARN string, at time.Time, id string) (events.EventBridgeEvent, error) {
	region, account, err := parseRuleARN(ruleARN)
	if err != nil {
		return events.EventBridgeEvent{}, err
	}
	if id == "" {
		return events.EventBridgeEvent{}, fmt.Errorf("schedule: scheduled event for %q: empty event id", ruleARN)
	}
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         id,
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  account,
		Time:       at.UTC().Truncate(time.Second),
		Region:     region,
		Resources:  []string{ruleARN},
		Detail:     json.RawMessage(`{}`),
	}, nil
}

// parseRuleARN splits arn:PARTITION:events:REGION:ACCOUNT:rule/[BUS/]NAME.
func parseRuleARN(arn string) (region, account string, err error) {
	bad := func(msg string) error {
		return fmt.Errorf("schedule: rule ARN %q: %s", arn, msg)
	}
	parts := strings.SplitN(arn, ":", 6)
	switch {
	case len(parts) != 6 || parts[0] != "arn" || parts[1] == "":
		return "", "", bad("want arn:partition:events:region:account:rule/name")
	case parts[2] != "events":
		return "", "", bad(fmt.Sprintf("service is %q, want events", parts[2]))
	case parts[3] == "":
		return "", "", bad("missing region")
	case len(parts[4]) != 12 || !isDigits(parts[4]):
		return "", "", bad("account must be 12 digits")
	case !strings.HasPrefix(parts[5], "rule/") || len(parts[5]) == len("rule/"):
		return "", "", bad("resource must be rule/name")
	}
	return parts[3], parts[4], nil
}
