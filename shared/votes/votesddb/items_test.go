package votesddb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsstub"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// stubbed is a DynamoDB client whose calls answer gives (awsstub).
func stubbed(answer func(in any) (any, error)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: "us-east-1", APIOptions: []func(*middleware.Stack) error{awsstub.Answer(answer)}})
}

// putRecorder records PutItem calls and answers GetItem with the item last
// put; any other call fails.
type putRecorder struct {
	puts []*dynamodb.PutItemInput
}

func (r *putRecorder) client() *dynamodb.Client {
	return stubbed(func(in any) (any, error) {
		switch in := in.(type) {
		case *dynamodb.PutItemInput:
			r.puts = append(r.puts, in)
			return &dynamodb.PutItemOutput{}, nil
		case *dynamodb.GetItemInput:
			if len(r.puts) == 0 {
				return &dynamodb.GetItemOutput{}, nil
			}
			return &dynamodb.GetItemOutput{Item: r.puts[len(r.puts)-1].Item}, nil
		}
		return nil, fmt.Errorf("putRecorder: unexpected %T", in)
	})
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// The items the store writes keep their attribute names and types (the
// archive, the CLI and older readers rely on them), and read back as
// written.
func TestItemShapes(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 500, time.FixedZone("CET", 3600))
	opens := time.Date(2026, 3, 2, 0, 0, 0, 0, time.FixedZone("CET", 3600))
	readAt := time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)
	tests := []struct {
		name string
		put  func(*Votes) error
		want map[string]types.AttributeValue
		read func(t *testing.T, s *Votes)
	}{
		{
			name: "poll, all fields",
			put: func(st *Votes) error {
				return st.CreatePoll(context.Background(), votes.Poll{ID: "p1", Options: []string{"a", "b"}, Shards: 4, OneVotePerVoter: true, Opens: opens, Closes: opens.Add(time.Hour), CreatedAt: created})
			},
			want: map[string]types.AttributeValue{
				"pk": avS("poll#p1"), "sk": avS("meta"), "pollId": avS("p1"), "pollCatalog": avS("poll"),
				"options": &types.AttributeValueMemberL{Value: []types.AttributeValue{avS("a"), avS("b")}},
				"shards":  avN("4"), "oneVotePerVoter": &types.AttributeValueMemberBOOL{Value: true},
				"createdAt": avS("2026-03-01T12:00:00.0000005+01:00"),
				"opensAt":   avS("2026-03-01T23:00:00Z"), "closesAt": avS("2026-03-02T00:00:00Z"),
			},
			read: func(t *testing.T, st *Votes) {
				got, err := st.Poll(context.Background(), "p1")
				want := votes.Poll{ID: "p1", Options: []string{"a", "b"}, Shards: 4, OneVotePerVoter: true, Opens: opens, Closes: opens.Add(time.Hour), CreatedAt: created}
				if err != nil || got.ID != want.ID || !reflect.DeepEqual(got.Options, want.Options) || got.Shards != want.Shards || !got.OneVotePerVoter ||
					!got.Opens.Equal(want.Opens) || !got.Closes.Equal(want.Closes) || !got.CreatedAt.Equal(want.CreatedAt) {
					t.Errorf("Poll = %+v, %v; want %+v", got, err, want)
				}
			},
		},
		{
			name: "poll, no times",
			put: func(st *Votes) error {
				return st.CreatePoll(context.Background(), votes.Poll{ID: "p2", Options: []string{"a"}, Shards: 1, CreatedAt: readAt})
			},
			want: map[string]types.AttributeValue{
				"pk": avS("poll#p2"), "sk": avS("meta"), "pollId": avS("p2"), "pollCatalog": avS("poll"),
				"options": &types.AttributeValueMemberL{Value: []types.AttributeValue{avS("a")}},
				"shards":  avN("1"), "oneVotePerVoter": &types.AttributeValueMemberBOOL{Value: false},
				"createdAt": avS("2026-03-01T12:00:01Z"),
			},
			read: func(t *testing.T, st *Votes) {
				got, err := st.Poll(context.Background(), "p2")
				if err != nil || !got.Opens.IsZero() || !got.Closes.IsZero() || got.OneVotePerVoter {
					t.Errorf("Poll = %+v, %v; want no times", got, err)
				}
			},
		},
		{
			name: "totals",
			put: func(st *Votes) error {
				return st.PutTotals(context.Background(), votes.Totals{PollID: "p1", Totals: map[string]int64{"a": 5, "b": 2}, Total: 7, Shards: 4, ReadAt: readAt,
					Rejected: map[votes.Reason]int64{votes.ReasonUnknownOption: 3}})
			},
			want: map[string]types.AttributeValue{
				"pk": avS("total#p1"), "sk": avS("total"),
				"totals": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": avN("5"), "b": avN("2")}},
				"total":  avN("7"), "shards": avN("4"), "readAt": avS("2026-03-01T12:00:01.000000000Z"),
				"rejected": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"unknown-option": avN("3")}},
			},
			read: func(t *testing.T, st *Votes) {
				got, ok, err := st.CachedTotals(context.Background(), "p1")
				if err != nil || !ok || got.Total != 7 || !reflect.DeepEqual(got.Totals, map[string]int64{"a": 5, "b": 2}) || got.Shards != 4 || !got.ReadAt.Equal(readAt) ||
					got.Rejected[votes.ReasonUnknownOption] != 3 {
					t.Errorf("CachedTotals = %+v, %v, %v", got, ok, err)
				}
			},
		},
		{
			name: "totals, none yet",
			put: func(st *Votes) error {
				return st.PutTotals(context.Background(), votes.Totals{PollID: "p3", Shards: 2, ReadAt: readAt})
			},
			want: map[string]types.AttributeValue{
				"pk": avS("total#p3"), "sk": avS("total"),
				"totals": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
				"total":  avN("0"), "shards": avN("2"), "readAt": avS("2026-03-01T12:00:01.000000000Z"),
				"rejected": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
			},
			read: func(t *testing.T, st *Votes) {
				got, ok, err := st.CachedTotals(context.Background(), "p3")
				if err != nil || !ok || got.Total != 0 || got.Totals == nil || len(got.Totals) != 0 || got.Rejected == nil || len(got.Rejected) != 0 {
					t.Errorf("CachedTotals = %+v, %v, %v", got, ok, err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &putRecorder{}
			st := New(rec.client(), "counters", "ledger")
			if err := tt.put(st); err != nil {
				t.Fatal(err)
			}
			if len(rec.puts) != 1 || aws.ToString(rec.puts[0].TableName) != "counters" {
				t.Fatalf("puts = %+v, want one to the counters table", rec.puts)
			}
			if got := rec.puts[0].Item; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("item =\n%s\nwant\n%s", describe(got), describe(tt.want))
			}
			tt.read(t, st)
		})
	}
}

// describe prints an item readably, for failure messages.
func describe(item map[string]types.AttributeValue) string {
	out := ""
	for k, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out += k + "=S:" + v.Value + " "
		case *types.AttributeValueMemberN:
			out += k + "=N:" + v.Value + " "
		default:
			out += k + "=" + reflect.TypeOf(v).String() + " "
		}
	}
	return out
}

// A ledger item's times are UTC to the microsecond, the archive's typed
// timestamp precision: a castAt with nanoseconds and an offset is written
// as its microsecond in UTC.
func TestLedgerItemTimes(t *testing.T) {
	counted := time.Date(2026, 11, 2, 3, 4, 5, 123456789, time.UTC)
	cast := time.Date(2026, 11, 2, 4, 4, 5, 987654321, time.FixedZone("CET", 3600))
	e := votes.Entry{Vote: votes.Vote{VoteID: "v1", PollID: "p", OptionID: "a", VoterID: "u", CastAt: cast}}
	item := ledgerItem(e, counted)
	for name, want := range map[string]string{"castAt": "2026-11-02T03:04:05.987654Z", "countedAt": "2026-11-02T03:04:05.123456Z"} {
		if got := item[name].(*types.AttributeValueMemberS).Value; got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// condFailed is a client whose PutItem fails its condition, returning the
// item that holds the key.
func condFailed(holder map[string]types.AttributeValue) *dynamodb.Client {
	return stubbed(func(in any) (any, error) {
		if _, ok := in.(*dynamodb.PutItemInput); ok {
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: holder}
		}
		return nil, fmt.Errorf("condFailed: unexpected %T", in)
	})
}

// A vote whose key is taken names the vote that holds it; a holder without
// a voteId is an error, not a vote of no id.
func TestPutVoteNamesTheHolder(t *testing.T) {
	e := votes.Entry{Vote: votes.Vote{VoteID: "v2", PollID: "p", OptionID: "a", VoterID: "u", CastAt: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}}
	for _, tt := range []struct {
		name   string
		holder map[string]types.AttributeValue
		want   string // StoredVoteID, "" for ledger.ErrMissingAttribute
	}{
		{"a vote", ledgerItem(votes.Entry{Vote: votes.Vote{VoteID: "v1", PollID: "p", OptionID: "a", VoterID: "u"}}, e.CastAt), "v1"},
		{"an item without voteId", map[string]types.AttributeValue{ledger.AttrPK: avS("p#3"), ledger.AttrSK: avS("u")}, ""},
		{"a voteId of another type", map[string]types.AttributeValue{ledger.AttrVoteID: avN("1")}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(condFailed(tt.holder), "counters", "votes")
			var ex *votes.ExistsError
			for _, put := range []func(context.Context, votes.Entry) error{s.PutVote, s.ClaimVoter} {
				err := put(context.Background(), e)
				if tt.want == "" && !errors.Is(err, ledger.ErrMissingAttribute) {
					t.Errorf("got %v, want ledger.ErrMissingAttribute", err)
				}
				if tt.want != "" && (!errors.As(err, &ex) || ex.StoredVoteID != tt.want) {
					t.Errorf("got %v, want *votes.ExistsError holding %s", err, tt.want)
				}
			}
		})
	}
}
