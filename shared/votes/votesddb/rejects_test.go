package votesddb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

var sent0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func reject(id string, sec int, reason votes.Reason, body string) votes.Rejected {
	return votes.Rejected{MessageID: id, SentAt: sent0.Add(time.Duration(sec) * time.Second), Body: []byte(body),
		Reason: reason, Detail: "detail of " + id, PollID: "p", VoteID: "v-" + id, OptionID: "a"}
}

func TestRecordRejectsCountsEachMessageOnce(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	var rs []votes.Rejected
	for i := range 30 { // spread over every shard
		reason := votes.ReasonUnknownOption
		if i%3 == 0 {
			reason = votes.ReasonMalformedJSON
		}
		rs = append(rs, reject("m"+strconv.Itoa(i), i, reason, "{}"))
	}
	if err := s.RecordRejects(ctx, rs); err != nil {
		t.Fatal(err)
	}
	// The whole batch again, as SQS redelivers it: the same ids and sent times.
	if err := s.RecordRejects(ctx, rs); err != nil {
		t.Fatalf("recording a redelivery: %v", err)
	}
	got, err := s.RejectCounts(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	want := map[votes.Reason]int64{votes.ReasonMalformedJSON: 10, votes.ReasonUnknownOption: 20}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	if got, err := s.RejectCounts(ctx, "other"); err != nil || len(got) != 0 || got == nil {
		t.Errorf("counts of a poll without rejects: %v, %v; want an empty map", got, err)
	}
}

func TestRecentRejectsNewestFirst(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	var rs []votes.Rejected
	for i := range 25 {
		rs = append(rs, reject(fmt.Sprintf("m%02d", i), i, votes.ReasonBadCastAt, `{"pollId":"p"}`))
	}
	if err := s.RecordRejects(ctx, rs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		limit int
		want  []string
	}{
		{"one", 1, []string{"m24"}},
		{"five", 5, []string{"m24", "m23", "m22", "m21", "m20"}},
		{"more than there are", 100, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.RecentRejects(ctx, "p", tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.MessageID)
			}
			if tt.want == nil {
				if len(got) != 25 || ids[0] != "m24" || ids[24] != "m00" {
					t.Errorf("got %v, want all 25 newest first", ids)
				}
				return
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", ids, tt.want)
			}
		})
	}
	got, _ := s.RecentRejects(ctx, "p", 1)
	want := votes.RejectRecord{MessageID: "m24", SentAt: sent0.Add(24 * time.Second), Reason: votes.ReasonBadCastAt,
		Detail: "detail of m24", VoteID: "v-m24", OptionID: "a", Excerpt: `{"pollId":"p"}`, BodySize: 14}
	if len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Errorf("record %+v, want %+v", got, want)
	}
}

// A hostile body keeps only its excerpt; a body that is not UTF-8 keeps
// its bytes; every record expires.
func TestRecordRejectKeepsAnExcerptWithTTL(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	huge := reject("huge", 1, votes.ReasonTooLarge, `{"pollId":"p","x":"`+strings.Repeat("é", 600<<10)+`"}`)
	binary := reject("binary", 2, votes.ReasonInvalidUTF8, "{\"pollId\":\"p\",\"x\":\"\xff\xfe\"}")
	binary.Detail = "bad \xff detail" // DynamoDB strings must be UTF-8
	if err := s.RecordRejects(ctx, []votes.Rejected{huge, binary}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RecentRejects(ctx, "p", 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %+v, %v", got, err)
	}
	b, h := got[0], got[1]
	if h.MessageID != "huge" || len(h.Excerpt) > votes.MaxRejectExcerpt || len(h.Excerpt) < votes.MaxRejectExcerpt-2 || h.BodySize != len(huge.Body) {
		t.Errorf("huge body: excerpt of %d bytes, size %d; want at most %d of %d", len(h.Excerpt), h.BodySize, votes.MaxRejectExcerpt, len(huge.Body))
	}
	if b.MessageID != "binary" || b.Excerpt != "" || string(b.ExcerptBase64) != string(binary.Body) || b.Detail != "bad \uFFFD detail" {
		t.Errorf("binary body: %+v", b)
	}
	out, err := db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.counters), KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(rejectsPK("p", votes.RejectShard("huge")))},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		ttl, ok := it[TTLAttribute].(*types.AttributeValueMemberN)
		switch {
		case sk == rejectCountsSK && ok:
			t.Errorf("the counts item expires: %v", ttl.Value)
		case sk != rejectCountsSK && !ok:
			t.Errorf("record %s has no %s", sk, TTLAttribute)
		case sk != rejectCountsSK:
			exp, _ := strconv.ParseInt(ttl.Value, 10, 64)
			if d := time.Until(time.Unix(exp, 0)); d < RejectTTL-time.Minute || d > RejectTTL {
				t.Errorf("record %s expires in %s, want %s", sk, d, RejectTTL)
			}
		}
	}
}

// cancelling counts transactions and cancels each with the given reasons.
type cancelling struct {
	codes []string
	calls int
}

func (c *cancelling) client() *dynamodb.Client {
	return stubbed(func(in any) (any, error) {
		if _, ok := in.(*dynamodb.TransactWriteItemsInput); !ok {
			return nil, fmt.Errorf("cancelling: unexpected %T", in)
		}
		c.calls++
		reasons := make([]types.CancellationReason, len(c.codes))
		for i, code := range c.codes {
			reasons[i] = types.CancellationReason{Code: aws.String(code)}
		}
		return nil, &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: reasons}
	})
}

// A record's transaction cancelled by its own condition is a redelivery;
// one cancelled for throttling is votes.ErrThrottled; any other is an error.
func TestRecordRejectCancelled(t *testing.T) {
	tests := []struct {
		name      string
		codes     []string
		wantErr   bool
		throttled bool
	}{
		{"recorded before", []string{"ConditionalCheckFailed", "None"}, false, false},
		{"throttled count", []string{"None", "ThrottlingError"}, true, true},
		{"conflict", []string{"None", "TransactionConflict"}, true, false},
	}
	tries := map[string]int{"conflict": recordTries} // a conflict is tried again
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &cancelling{codes: tt.codes}
			err := New(db.client(), "counters", "ledger").RecordRejects(context.Background(), []votes.Rejected{reject("m1", 0, votes.ReasonBadID, "{}")})
			calls := max(tries[tt.name], 1)
			if (err != nil) != tt.wantErr || errors.Is(err, votes.ErrThrottled) != tt.throttled || db.calls != calls {
				t.Errorf("err %v after %d calls; want error %v, throttled %v, %d calls", err, db.calls, tt.wantErr, tt.throttled, calls)
			}
		})
	}
}

// Rejects of one shard in one batch write the same count item, and
// DynamoDB cancels a transaction on an item another one is writing: they
// are recorded one after the other, so none conflicts (through the local
// stack's conflict rules, as on AWS), and every one is counted.
func TestRecordRejectsOfOneShardDoNotConflict(t *testing.T) {
	st := stacktest.Need(t)
	proxy, err := faultproxy.New(faultproxy.DynamoDB, st.Vars()[servers.EnvDynamoDB], faultproxy.WithTransactionConflicts())
	if err != nil {
		t.Fatal(err)
	}
	url, err := proxy.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s, _ := newStore(t)
	s.db = dynamodb.NewFromConfig(stacktest.Config(t, st, map[string]string{servers.EnvDynamoDB: url}))
	var rs []votes.Rejected
	for i := 0; len(rs) < 24; i++ { // 24 messages of one shard
		if id := "m" + strconv.Itoa(i); votes.RejectShard(id) == 0 {
			rs = append(rs, reject(id, i, votes.ReasonUnknownOption, "{}"))
		}
	}
	if err := s.RecordRejects(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	got, err := s.RejectCounts(context.Background(), "p")
	if err != nil || got[votes.ReasonUnknownOption] != 24 {
		t.Errorf("counts %v, %v; want 24 unknown-option", got, err)
	}
	if c := proxy.Stats().ByAction["TransactWriteItems"].Conflicts; c != 0 {
		t.Errorf("%d transactions cancelled for a conflict, want none", c)
	}
}
