package votesddb

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

var seq atomic.Int64

// newStore creates a fresh counters table and ledger prefix.
func newStore(t *testing.T) (*Votes, *dynamodb.Client) {
	t.Helper()
	st := stacktest.Need(t)
	db := dynamodb.NewFromConfig(stacktest.Config(t, st, nil))
	name := fmt.Sprintf("counters-%d-%d", time.Now().UnixNano()%1e7, seq.Add(1))
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return New(db, name, name+"-ledger"), db
}

func entry(voteID, poll, option, voter string, one bool) votes.Entry {
	return votes.Entry{Vote: votes.Vote{VoteID: voteID, PollID: poll, OptionID: option, VoterID: voter,
		CastAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}, OneVotePerVoter: one}
}

func TestPolls(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	p := votes.Poll{ID: "color", Options: []string{"red", "blue"}, Shards: 4, OneVotePerVoter: true,
		Opens: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Closes: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := s.CreatePoll(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePoll(ctx, p); !errors.Is(err, votes.ErrPollExists) {
		t.Errorf("second create: got %v, want ErrPollExists", err)
	}
	if err := s.CreatePoll(ctx, votes.Poll{ID: "bad#id", Options: []string{"a"}, Shards: 1}); err == nil {
		t.Error("created a poll with '#' in its id")
	}
	got, err := s.Poll(ctx, "color")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != p.ID || fmt.Sprint(got.Options) != fmt.Sprint(p.Options) || got.Shards != 4 || !got.OneVotePerVoter || !got.Opens.Equal(p.Opens) || !got.Closes.Equal(p.Closes) || got.CreatedAt.IsZero() {
		t.Errorf("got %+v, want %+v", got, p)
	}
	if _, err := s.Poll(ctx, "nope"); !errors.Is(err, votes.ErrNoPoll) {
		t.Errorf("missing poll: got %v, want ErrNoPoll", err)
	}
	many, err := s.Polls(ctx, []string{"color", "nope", "bad#id"})
	if err != nil || len(many) != 1 || many["color"].Shards != 4 {
		t.Errorf("Polls: %v %+v", err, many)
	}
}

// Commit is all or nothing, and a repeated vote cancels the transaction
// with its index and the voteId that is stored.
func TestCommitExactlyOnce(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.CreatePoll(ctx, votes.Poll{ID: "p", Options: []string{"a", "b"}, Shards: 3}); err != nil {
		t.Fatal(err)
	}
	g := votes.Group{
		Entries:    []votes.Entry{entry("v1", "p", "a", "u1", false), entry("v2", "p", "a", "u2", false), entry("v3", "p", "b", "u3", false)},
		Increments: []votes.Increment{{PollID: "p", OptionID: "a", Shard: 0, N: 2}, {PollID: "p", OptionID: "b", Shard: 2, N: 1}},
	}
	if err := s.Commit(ctx, g); err != nil {
		t.Fatal(err)
	}
	again := votes.Group{
		Entries:    []votes.Entry{entry("v4", "p", "b", "u4", false), entry("v2", "p", "a", "u2", false)},
		Increments: []votes.Increment{{PollID: "p", OptionID: "a", Shard: 1, N: 1}, {PollID: "p", OptionID: "b", Shard: 1, N: 1}},
	}
	err := s.Commit(ctx, again)
	var ce *votes.CancelledError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a CancelledError", err)
	}
	if len(ce.Existing) != 1 || ce.Existing[1] != "v2" {
		t.Errorf("existing %v, want entry 1 holding v2", ce.Existing)
	}
	tot, err := votes.Results(ctx, s, "p", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if tot.Total != 3 || tot.Totals["a"] != 2 || tot.Totals["b"] != 1 {
		t.Errorf("totals %+v: the cancelled transaction must add nothing", tot)
	}
	voted, err := s.Voted(ctx, votes.Poll{ID: "p"}, "u2", "2026-11")
	if err != nil || !voted {
		t.Errorf("Voted(u2) = %v, %v; want true", voted, err)
	}
	if voted, _ := s.Voted(ctx, votes.Poll{ID: "p"}, "u9", "2026-11"); voted {
		t.Error("Voted(u9) = true for a voter with no vote")
	}
}

func TestOneVotePerVoterKeepsTheFirstVoteID(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	g := votes.Group{Entries: []votes.Entry{entry("first", "p", "a", "alice", true)}, Increments: []votes.Increment{{PollID: "p", OptionID: "a", N: 1}}}
	if err := s.Commit(ctx, g); err != nil {
		t.Fatal(err)
	}
	g2 := votes.Group{Entries: []votes.Entry{entry("second", "p", "b", "alice", true)}, Increments: []votes.Increment{{PollID: "p", OptionID: "b", N: 1}}}
	var ce *votes.CancelledError
	if err := s.Commit(ctx, g2); !errors.As(err, &ce) || ce.Existing[0] != "first" {
		t.Fatalf("got %v (%+v), want the stored voteId 'first'", err, ce)
	}
	voted, err := s.Voted(ctx, votes.Poll{ID: "p", OneVotePerVoter: true}, "alice", "2026-11")
	if err != nil || !voted {
		t.Errorf("Voted = %v, %v", voted, err)
	}
}

func TestAtLeastOnceWrites(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.CreatePoll(ctx, votes.Poll{ID: "q", Options: []string{"x"}, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	var entries []votes.Entry
	for i := 0; i < 60; i++ {
		entries = append(entries, entry(fmt.Sprint("v", i), "q", "x", fmt.Sprint("u", i), false))
	}
	if err := s.PutEntries(ctx, entries); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCounts(ctx, []votes.Increment{{PollID: "q", OptionID: "x", Shard: 0, N: 40}, {PollID: "q", OptionID: "x", Shard: 1, N: 20}}); err != nil {
		t.Fatal(err)
	}
	tot, err := votes.Results(ctx, s, "q", time.Now)
	if err != nil || tot.Total != 60 {
		t.Errorf("totals %+v, %v; want 60", tot, err)
	}
}

// Votes cast in two months land in two ledger tables, each created on first use.
func TestLedgerTablePerMonth(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	nov, dec := entry("n", "p", "a", "u1", false), entry("d", "p", "a", "u2", false)
	dec.CastAt = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Commit(ctx, votes.Group{Entries: []votes.Entry{nov, dec}, Increments: []votes.Increment{{PollID: "p", OptionID: "a", N: 2}}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"2026-11", "2026-12"} {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.LedgerTable(m))})
		if err != nil {
			t.Fatalf("ledger table of %s: %v", m, err)
		}
		if out.Table.StreamSpecification == nil || out.Table.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages {
			t.Errorf("ledger table of %s has stream %+v, want NEW_AND_OLD_IMAGES", m, out.Table.StreamSpecification)
		}
	}
	if err := s.EnsureLedgerTable(ctx, "2026-13"); err == nil {
		t.Error("a ledger table for month 13")
	}
}

// A retired month stays closed: once its table is gone and the next
// month's exists, no write creates it again (empty, ready to count its
// votes a second time); a store that knew the table finds out on its next
// write. Both write paths say so with *votes.MonthClosedError.
func TestRetiredMonthIsClosed(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	oct := entry("o1", "p", "a", "u1", false)
	oct.CastAt = time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)
	group := func(es ...votes.Entry) votes.Group {
		return votes.Group{Entries: es, Increments: []votes.Increment{{PollID: "p", OptionID: "a", N: int64(len(es))}}}
	}
	if err := s.Commit(ctx, group(oct)); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureLedgerTable(ctx, "2026-11"); err != nil {
		t.Fatal(err)
	}
	// The rotator retires October.
	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(s.LedgerTable("2026-10"))}); err != nil {
		t.Fatal(err)
	}
	late := oct
	late.VoteID = "o2"
	err := s.Commit(ctx, group(late))
	var mc *votes.MonthClosedError
	if err == nil || errors.As(err, &mc) {
		t.Fatalf("first write after the retirement: %v, want the write's own error (the store still knew the table)", err)
	}
	for name, write := range map[string]func() error{
		"Commit":     func() error { return s.Commit(ctx, group(late)) },
		"PutEntries": func() error { return s.PutEntries(ctx, []votes.Entry{late}) },
		"a fresh store": func() error {
			return New(db, s.counters, s.ledgerPrefix).Commit(ctx, group(late))
		},
	} {
		if err := write(); !errors.As(err, &mc) || mc.Month != "2026-10" {
			t.Errorf("%s: %v, want *MonthClosedError for 2026-10", name, err)
		}
	}
	if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.LedgerTable("2026-10"))}); err == nil {
		t.Error("October's table was created again")
	}
	// A month whose successor does not exist yet opens as before.
	dec := entry("d1", "p", "a", "u1", false)
	dec.CastAt = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if err := s.Commit(ctx, group(dec)); err != nil {
		t.Errorf("December: %v", err)
	}
}

// Once the rotator has written a month's close markers, no transaction
// adds to that month, whichever marker it checks; the other months of the
// same batch commit once the closed month's entries are set apart.
func TestClosedMonthRefusesCommits(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	oct := func(id, voter string) votes.Entry {
		e := entry(id, "p", "a", voter, false)
		e.CastAt = time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)
		return e
	}
	group := func(es ...votes.Entry) votes.Group {
		return votes.Group{Entries: es, Increments: []votes.Increment{{PollID: "p", OptionID: "a", N: int64(len(es))}}}
	}
	if err := s.Commit(ctx, group(oct("o1", "u1"))); err != nil {
		t.Fatal(err)
	}
	for n := range CloseMarkers {
		pk, sk := CloseMarkerKey(n)
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.LedgerTable("2026-10")),
			Item: map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)}}); err != nil {
			t.Fatal(err)
		}
	}
	nov := entry("n1", "p", "a", "u1", false)
	nov.CastAt = time.Date(2026, 11, 1, 0, 0, 1, 0, time.UTC)
	var mc *votes.MonthClosedError
	for voter := range 40 { // voters spread over every marker
		g := group(oct(fmt.Sprintf("o-%d", voter), fmt.Sprintf("voter-%d", voter)), nov)
		if err := s.Commit(ctx, g); !errors.As(err, &mc) || mc.Month != "2026-10" {
			t.Fatalf("voter-%d: commit into closed October = %v, want *MonthClosedError for 2026-10", voter, err)
		}
	}
	// A copy of a counted vote is refused the same way: the month is closed.
	if err := s.Commit(ctx, group(oct("o1", "u1"))); !errors.As(err, &mc) {
		t.Errorf("copy of a counted vote: %v, want *MonthClosedError", err)
	}
	if err := s.Commit(ctx, group(nov)); err != nil {
		t.Fatalf("November alone: %v", err)
	}
	got, err := s.ShardCounts(ctx, "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got["a"] != 2 {
		t.Errorf("counted %d, want 2: October's first vote and November's", got["a"])
	}
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.LedgerTable("2026-10")), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if int(out.Count) != 1+CloseMarkers {
		t.Errorf("October's ledger holds %d items, want its one vote and %d markers", out.Count, CloseMarkers)
	}
}

// Materialized totals: a newer copy is never replaced by an older one.
func TestTotalsCache(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, ok, err := s.CachedTotals(ctx, "p"); ok || err != nil {
		t.Fatalf("empty cache: %v %v", ok, err)
	}
	t1 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	newer := votes.Totals{PollID: "p", Totals: map[string]int64{"a": 5, "b": 2}, Shards: 4, ReadAt: t1.Add(time.Second)}
	older := votes.Totals{PollID: "p", Totals: map[string]int64{"a": 1}, Shards: 4, ReadAt: t1.Add(500 * time.Millisecond)}
	for _, tt := range []votes.Totals{newer, older} {
		if err := s.PutTotals(ctx, tt); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.CachedTotals(ctx, "p")
	if err != nil || !ok || got.Total != 7 || got.Totals["b"] != 2 || !got.ReadAt.Equal(newer.ReadAt) || got.Shards != 4 {
		t.Errorf("cached %+v (%v %v), want the newer copy", got, ok, err)
	}
}
