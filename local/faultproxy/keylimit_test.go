package faultproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestItemSize(t *testing.T) {
	tests := []struct {
		name, item string
		want       int
	}{
		{"string", `{"pk":{"S":"abc"}}`, 2 + 3},
		{"number counts two digits a byte plus one", `{"n":{"N":"-0123.4500"}}`, 1 + 4}, // 12345: 3 bytes, plus 1
		{"binary counts decoded bytes", `{"b":{"B":"AAEC"}}`, 1 + 3},
		{"binary with padding", `{"b":{"B":"AAE="}}`, 1 + 2},
		{"bool and null", `{"t":{"BOOL":true},"z":{"NULL":true}}`, 1 + 1 + 1 + 1},
		{"list", `{"l":{"L":[{"S":"a"},{"N":"1"}]}}`, 1 + 3 + (1 + 1) + (2 + 1)},
		{"map", `{"m":{"M":{"x":{"S":"ab"}}}}`, 1 + 3 + (1 + 2 + 1)},
		{"sets", `{"s":{"SS":["a","bc"]},"n":{"NS":["10","200"]}}`, 1 + 3 + 1 + (2 + 2)},
		{"utf-8 bytes", `{"é":{"S":"€"}}`, 2 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var item attributeMap
			if err := json.Unmarshal([]byte(tt.item), &item); err != nil {
				t.Fatal(err)
			}
			if got := itemSize(item); got != tt.want {
				t.Errorf("itemSize(%s) = %d, want %d", tt.item, got, tt.want)
			}
		})
	}
}

func TestWriteUnits(t *testing.T) {
	tests := []struct {
		size int
		want float64
	}{{0, 1}, {1, 1}, {1024, 1}, {1025, 2}, {400 * 1024, 400}}
	for _, tt := range tests {
		if got := writeUnits(tt.size); got != tt.want {
			t.Errorf("writeUnits(%d) = %v, want %v", tt.size, got, tt.want)
		}
	}
}

func TestPlanWrites(t *testing.T) {
	big := strings.Repeat("x", 3000)
	tests := []struct {
		name, action, body string
		want               []keyWrite
		wantActions        int
	}{
		{
			name: "PutItem counts the item", action: "PutItem",
			body: `{"TableName":"votes","Item":{"pk":{"S":"a"},"doc":{"S":"` + big + `"}}}`,
			want: []keyWrite{{index: 0, table: "votes", key: "a", units: 3}},
		},
		{
			name: "UpdateItem counts the request", action: "UpdateItem",
			body: `{"TableName":"votes","Key":{"pk":{"N":"7"}},"UpdateExpression":"ADD c :one","ExpressionAttributeValues":{":one":{"N":"1"}}}`,
			want: []keyWrite{{index: 0, table: "votes", key: "7", units: 1}},
		},
		{
			name: "DeleteItem counts the request", action: "DeleteItem",
			body: `{"TableName":"votes","Key":{"pk":{"S":"a"}},"ConditionExpression":"attribute_exists(pk)","Pad":"` + big + `"}`,
			want: []keyWrite{{index: 0, table: "votes", key: "a", units: 4}}, // 3,000 + ~100 bytes
		},
		{
			name: "BatchWriteItem counts each request, tables in order", action: "BatchWriteItem",
			body: `{"RequestItems":{"votes":[{"PutRequest":{"Item":{"pk":{"S":"a"}}}},{"DeleteRequest":{"Key":{"pk":{"S":"b"}}}}],
				"ledger":[{"PutRequest":{"Item":{"pk":{"S":"c"},"doc":{"S":"` + big + `"}}}}]}}`,
			want: []keyWrite{
				{index: 0, table: "ledger", key: "c", units: 3},
				{index: 1, table: "votes", key: "a", units: 1},
				{index: 2, table: "votes", key: "b", units: 1},
			},
		},
		{
			name: "TransactWriteItems counts double", action: "TransactWriteItems",
			body: `{"TransactItems":[
				{"Put":{"TableName":"ledger","Item":{"pk":{"S":"vote-1"},"doc":{"S":"` + big + `"}}}},
				{"Update":{"TableName":"votes","Key":{"pk":{"S":"poll#3"}},"UpdateExpression":"ADD c :n"}},
				{"ConditionCheck":{"TableName":"votes","Key":{"pk":{"S":"poll"}},"ConditionExpression":"attribute_exists(pk)"}},
				{"Delete":{"TableName":"ledger","Key":{"pk":{"S":"vote-0"}}}}]}`,
			want: []keyWrite{
				{index: 0, table: "ledger", key: "vote-1", units: 6},
				{index: 1, table: "votes", key: "poll#3", units: 2},
				{index: 2, table: "votes", key: "poll", units: 2},
				{index: 3, table: "ledger", key: "vote-0", units: 2},
			},
			wantActions: 4,
		},
		{
			name: "item without the partition key is left to the upstream", action: "PutItem",
			body: `{"TableName":"votes","Item":{"other":{"S":"a"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newKeyLimiter(1000, newFakeClock(), func(context.Context, string, http.Header) (string, error) {
				return "pk", nil
			})
			got, actions, err := l.plan(t.Context(), tt.action, []byte(tt.body), nil)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			for i := range got {
				got[i].id = "" // internal; the key and table say the same
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan = %+v, want %+v", got, tt.want)
			}
			if actions != tt.wantActions {
				t.Errorf("actions = %d, want %d", actions, tt.wantActions)
			}
		})
	}
}

// putItem is a PutItem body of about units write units on key.
func putItem(table, key string, units int) string {
	pad := strings.Repeat("x", units*1024-100)
	return fmt.Sprintf(`{"TableName":%q,"Item":{"pk":{"S":%q},"sk":{"S":"v0"},"doc":{"S":%q}}}`, table, key, pad)
}

func TestKeyWriteLimitHotKeyVsSpread(t *testing.T) {
	const (
		rate     = 1000.0 // WCU/s per key: AWS's partition limit
		units    = 10     // per write
		perSec   = 150    // writes per second: 1,500 WCU/s in total
		seconds  = 10
		requests = perSec * seconds
	)
	tests := []struct {
		name          string
		keys          int
		wantThrottled bool
	}{
		{"one key at 1500 WCU/s is throttled", 1, true},
		{"ten keys at 150 WCU/s each are not", 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			upstream := MustUpstream(t, newFakeDynamo(map[string]string{"counters": "pk"}))
			p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(0))

			start := clock.Now()
			admitted := 0
			for i := range requests {
				key := fmt.Sprintf("poll#%d", i%tt.keys)
				switch status := dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", putItem("counters", key, units)); status {
				case http.StatusOK:
					admitted++
				case http.StatusBadRequest:
				default:
					t.Fatalf("request %d: status %d", i, status)
				}
				clock.Advance(time.Second / perSec)
			}
			elapsed := clock.Now().Sub(start) - time.Second/perSec // the last advance came after the last write

			s := p.Stats()
			throttled := requests - admitted
			if int(s.KeyThrottled) != throttled {
				t.Errorf("KeyThrottled = %d, clients saw %d", s.KeyThrottled, throttled)
			}
			if (throttled > 0) != tt.wantThrottled {
				t.Fatalf("throttled %d of %d writes, want throttling %v", throttled, requests, tt.wantThrottled)
			}
			// Each key may take its burst plus its rate over the run.
			capacity := float64(tt.keys) * (rate + rate*elapsed.Seconds())
			if got := float64(admitted * units); got > capacity || (tt.wantThrottled && got < capacity-2*units) {
				t.Errorf("admitted %v units, want the capacity %v (within a write)", got, capacity)
			}

			hot := p.HotKeys()
			if len(hot) != tt.keys {
				t.Fatalf("HotKeys has %d keys, want %d", len(hot), tt.keys)
			}
			var throttledSum int64
			for _, k := range hot {
				if k.Table != "counters" || k.Units != float64(requests/tt.keys*units) || k.Writes != int64(requests/tt.keys) {
					t.Errorf("HotKeys entry %+v, want %d writes of %d units on counters", k, requests/tt.keys, units)
				}
				throttledSum += k.Throttled
			}
			if throttledSum != s.KeyThrottled {
				t.Errorf("HotKeys throttled %d in all, Stats says %d", throttledSum, s.KeyThrottled)
			}
		})
	}
}

func TestHotKeysSortedByUnits(t *testing.T) {
	clock := newFakeClock()
	upstream := MustUpstream(t, newFakeDynamo(map[string]string{"votes": "pk"}))
	p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(1000))
	for _, w := range []struct {
		key   string
		units int
	}{{"b", 2}, {"a", 5}, {"c", 1}, {"b", 2}} {
		dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", putItem("votes", w.key, w.units))
	}
	var got []string
	for _, k := range p.HotKeys() {
		got = append(got, fmt.Sprintf("%s=%v", k.Key, k.Units))
	}
	if want := []string{"a=5", "b=4", "c=1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("HotKeys = %v, want %v", got, want)
	}
}

func TestKeyWriteLimitThroughSDK(t *testing.T) {
	bigItem := func(key string, kb int) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{
			"pk":  &ddbtypes.AttributeValueMemberS{Value: key},
			"sk":  &ddbtypes.AttributeValueMemberS{Value: "v0"},
			"doc": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", kb*1024-100)},
		}
	}
	key := func(k string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: k},
			"sk": &ddbtypes.AttributeValueMemberS{Value: "v0"},
		}
	}

	t.Run("BatchWriteItem on an exhausted key", func(t *testing.T) {
		clock := newFakeClock()
		upstream := MustUpstream(t, newFakeDynamo(map[string]string{"votes": "pk"}))
		p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(10))
		batch := func(items ...map[string]ddbtypes.AttributeValue) *dynamodb.BatchWriteItemInput {
			var reqs []ddbtypes.WriteRequest
			for _, it := range items {
				reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: it}})
			}
			return &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{"votes": reqs}}
		}

		// 11 units on a fresh key: more than the burst, let through on a full
		// bucket, which it leaves in debt.
		if _, err := dynamoClient(endpoint, 1).BatchWriteItem(t.Context(), batch(bigItem("hot", 11), bigItem("cold", 1))); err != nil {
			t.Fatalf("first batch: %v", err)
		}
		_, err := dynamoClient(endpoint, 1).BatchWriteItem(t.Context(), batch(bigItem("cold2", 1), bigItem("hot", 1)))
		var ptee *ddbtypes.ProvisionedThroughputExceededException
		if !errors.As(err, &ptee) {
			t.Fatalf("second batch: err = %v, want ProvisionedThroughputExceededException", err)
		}
		if len(ptee.ThrottlingReasons) != 1 ||
			aws.ToString(ptee.ThrottlingReasons[0].Reason) != "TableWriteKeyRangeThroughputExceeded" ||
			aws.ToString(ptee.ThrottlingReasons[0].Resource) != "arn:aws:dynamodb:eu-west-1:000000000000:table/votes" {
			t.Errorf("ThrottlingReasons = %+v, want TableWriteKeyRangeThroughputExceeded on the votes table", ptee.ThrottlingReasons)
		}

		// The SDK retries it (a throttle); the bucket stays empty while the
		// clock stands still.
		if _, err := dynamoClient(endpoint, 0).BatchWriteItem(t.Context(), batch(bigItem("hot", 1))); err == nil {
			t.Fatal("batch on the exhausted key succeeded, want throttled")
		}
		if got := p.Stats().ByAction["BatchWriteItem"].KeyThrottled; got != 1+3 {
			t.Errorf("KeyThrottled[BatchWriteItem] = %d, want 4", got)
		}

		clock.Advance(time.Second)
		if _, err := dynamoClient(endpoint, 1).BatchWriteItem(t.Context(), batch(bigItem("hot", 1))); err != nil {
			t.Errorf("after a second of refill: %v", err)
		}
	})

	t.Run("TransactWriteItems cancels with ThrottlingError at the action's index", func(t *testing.T) {
		clock := newFakeClock()
		upstream := MustUpstream(t, newFakeDynamo(map[string]string{"votes": "pk", "ledger": "pk"}))
		p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(10))
		if _, err := dynamoClient(endpoint, 1).PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("votes"), Item: bigItem("poll#1", 10)}); err != nil {
			t.Fatalf("PutItem: %v", err)
		}

		_, err := dynamoClient(endpoint, 0).TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{
			TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: aws.String("ledger"), Item: bigItem("vote-1", 1)}},
				{Update: &ddbtypes.Update{
					TableName: aws.String("votes"), Key: key("poll#1"),
					UpdateExpression:          aws.String("ADD c :one"),
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
				}},
				{ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String("votes"), Key: key("poll#2"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			},
		})
		var tce *ddbtypes.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("err = %v, want TransactionCanceledException", err)
		}
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		if want := []string{"None", "ThrottlingError", "None"}; !reflect.DeepEqual(codes, want) {
			t.Errorf("CancellationReasons = %v, want %v", codes, want)
		}
		if !strings.Contains(tce.ErrorMessage(), "[None, ThrottlingError, None]") {
			t.Errorf("message = %q, want the reasons listed", tce.ErrorMessage())
		}
		if got := p.Stats().ByAction["TransactWriteItems"]; got.Requests != 1 || got.KeyThrottled != 1 {
			t.Errorf("ByAction[TransactWriteItems] = %+v, want 1 request, refused, not retried by the SDK", got)
		}
	})
}

func TestKeyWriteLimitLearnsKeySchema(t *testing.T) {
	clock := newFakeClock()
	dynamo := newFakeDynamo(map[string]string{"votes": "pk", "ledger": "id"})
	upstream := MustUpstream(t, dynamo)
	_, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(1000))

	for range 3 {
		dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", putItem("votes", "a", 1))
		dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", `{"TableName":"ledger","Item":{"id":{"S":"v1"}}}`)
	}
	if got := dynamo.Calls("DescribeTable"); got != 2 {
		t.Errorf("DescribeTable calls = %d, want 2 (one per table, then cached)", got)
	}
	for _, h := range dynamo.Describes() {
		if !strings.Contains(h.Get("Authorization"), "Credential=AKIDFAULTPROXY/") {
			t.Errorf("DescribeTable Authorization = %q, want the client's credentials", h.Get("Authorization"))
		}
	}

	dynamoRequest(t, http.DefaultClient, endpoint, "DeleteTable", `{"TableName":"votes"}`)
	dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", putItem("votes", "a", 1))
	if got := dynamo.Calls("DescribeTable"); got != 3 {
		t.Errorf("DescribeTable calls = %d, want 3 (votes described again after DeleteTable)", got)
	}
}

func TestKeyWriteLimitPassesUndescribableTables(t *testing.T) {
	clock := newFakeClock()
	upstream := MustUpstream(t, newFakeDynamo(nil))
	p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(1), WithLogger(discardLogger()))
	for i := range 5 {
		if status := dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", putItem("missing", "a", 5)); status != http.StatusOK {
			t.Errorf("write %d: status %d, want it forwarded", i, status)
		}
	}
	if got := p.Stats().KeyThrottled; got != 0 {
		t.Errorf("KeyThrottled = %d, want 0", got)
	}
}

func TestKeyLimiterForgetsIdleKeys(t *testing.T) {
	clock := newFakeClock()
	l := newKeyLimiter(10, clock, nil)
	write := func(key string, units float64) []bool {
		return l.admit([]keyWrite{{table: "t", key: key, id: key, units: units}})
	}
	for i := range 5 {
		write(fmt.Sprint(i), 1)
	}
	write("throttled", 10)
	if write("throttled", 1) == nil {
		t.Fatal("write on an exhausted key admitted")
	}
	clock.Advance(time.Second)
	write("busy", 1)

	l.sweep(clock.Now())
	var got []string
	for _, k := range l.hotKeys() {
		got = append(got, k.Key)
	}
	if want := []string{"throttled", "busy"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys kept = %v, want %v (idle full buckets forgotten)", got, want)
	}
}

func TestSetKeyWriteLimitOnARunningProxy(t *testing.T) {
	clock := newFakeClock()
	upstream := MustUpstream(t, newFakeDynamo(map[string]string{"counters": "pk"}))
	p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithKeyWriteLimit(1000))
	// admitted writes 10-unit puts on one key until the first refusal.
	admitted := func() int {
		for n := 0; ; n++ {
			switch status := dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", putItem("counters", "hot", 10)); status {
			case http.StatusOK:
			case http.StatusBadRequest:
				return n
			default:
				t.Fatalf("status %d", status)
			}
		}
	}
	if got := p.KeyWriteLimit(); got != 1000 {
		t.Fatalf("KeyWriteLimit = %v, want 1000", got)
	}
	if n := admitted(); n != 100 {
		t.Fatalf("at 1,000 units/s a full bucket admitted %d writes of 10 units, want 100", n)
	}
	clock.Advance(time.Second) // the bucket refills to 1,000 units at the old rate...
	if err := p.SetKeyWriteLimit(100); err != nil {
		t.Fatal(err)
	}
	if got := p.KeyWriteLimit(); got != 100 {
		t.Fatalf("KeyWriteLimit = %v, want 100", got)
	}
	// ...and is capped at the new burst.
	if n := admitted(); n != 10 {
		t.Fatalf("at 100 units/s a full bucket admitted %d writes of 10 units, want 10", n)
	}
	clock.Advance(500 * time.Millisecond)
	if n := admitted(); n != 5 {
		t.Fatalf("half a second at 100 units/s admitted %d writes of 10 units, want 5", n)
	}
	// Back to the default: the bucket refills at the new rate from where it was.
	if err := p.SetKeyWriteLimit(0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * time.Millisecond)
	if n := admitted(); n != 10 {
		t.Fatalf("0.1 s at 1,000 units/s admitted %d writes of 10 units, want 10", n)
	}
	clock.Advance(10 * time.Second)
	if n := admitted(); n != 100 {
		t.Fatalf("a full bucket at 1,000 units/s admitted %d writes of 10 units, want 100", n)
	}
	// The statistics survive the changes.
	hot := p.HotKeys()
	if len(hot) != 1 || hot[0].Writes != 100+1+10+1+5+1+10+1+100+1 || hot[0].Throttled != 5 {
		t.Errorf("HotKeys = %+v, want one key with 230 writes, 5 throttled", hot)
	}
	if len(hot) == 1 && (hot[0].AdmittedUnits != 225*10 || hot[0].Units != 230*10) {
		t.Errorf("HotKeys = %+v, want 2,250 units admitted of 2,300 asked", hot)
	}

	plain, _ := MustStart(t, DynamoDB, upstream.URL)
	if err := plain.SetKeyWriteLimit(100); !errors.Is(err, ErrBadOption) {
		t.Errorf("SetKeyWriteLimit without the limiter: %v, want ErrBadOption", err)
	}
	if got := plain.KeyWriteLimit(); got != 0 {
		t.Errorf("KeyWriteLimit without the limiter = %v, want 0", got)
	}
}
