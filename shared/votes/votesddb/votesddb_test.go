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
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
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
	attr := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	key := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(rng), KeyType: types.KeyTypeRange}}
	}
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{ // as template.yaml's CountersTable
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{attr("pk"), attr("sk"), attr(pollCatalog), attr("pollId")},
		KeySchema:            key("pk", "sk"),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String(PollsIndex), KeySchema: key(pollCatalog, "pollId"),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
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

// createLedger creates the month's ledger table as the rotator does.
func createLedger(t *testing.T, s *Votes, db *dynamodb.Client, month string) {
	t.Helper()
	if _, err := db.CreateTable(context.Background(), archiveddb.CreateInput(archive.Spec{Name: s.LedgerTable(month), Month: month})); err != nil {
		t.Fatal(err)
	}
}

// PutVote writes a vote once: a redelivery fails its condition and names
// the vote that holds the key.
// AllPolls lists every poll in id order across pages, and nothing else of
// the counters table: not the counters, claims or checkpoints beside them.
func TestAllPolls(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	if got, err := s.AllPolls(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty table: %v, %d polls", err, len(got))
	}
	var want []string
	for i := range 130 { // more than a page
		id := fmt.Sprintf("p-%03d", 129-i)
		if err := s.CreatePoll(ctx, votes.Poll{ID: id, Options: []string{"a", "b"}, Shards: 1 + i%5}); err != nil {
			t.Fatal(err)
		}
		want = append([]string{id}, want...)
	}
	for _, k := range [][2]string{{shardPK("p-007", 0), "a"}, {"voter#p-007#u1", "voter"}, {"ckpt#ledger-2026-11", "shard-1"}} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.counters), Item: map[string]types.AttributeValue{
			"pk": str(k[0]), "sk": str(k[1]), "pollId": str("p-007")}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.AllPolls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d polls, want %d", len(got), len(want))
	}
	for i, p := range got {
		if p.ID != want[i] || len(p.Options) != 2 || p.Shards < 1 || p.CreatedAt.IsZero() {
			t.Fatalf("poll %d = %+v, want id %s with its definition", i, p, want[i])
		}
	}
}

func TestPutVoteOnce(t *testing.T) {
	s, db := newStore(t)
	createLedger(t, s, db, "2026-11")
	ctx := context.Background()
	for _, e := range []votes.Entry{entry("v1", "p", "a", "u1", false), entry("v2", "p", "a", "u2", false), entry("first", "one", "a", "alice", true)} {
		if err := s.PutVote(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	var ex *votes.ExistsError
	for _, tt := range []struct {
		e    votes.Entry
		want string
	}{
		{entry("v1", "p", "a", "u1", false), "v1"},
		{entry("second", "one", "b", "alice", true), "first"},
	} {
		if err := s.PutVote(ctx, tt.e); !errors.As(err, &ex) || ex.StoredVoteID != tt.want {
			t.Errorf("put %s again: %v, want *ExistsError holding %s", tt.e.VoteID, err, tt.want)
		}
	}
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.LedgerTable("2026-11"))})
	if err != nil || out.Count != 3 {
		t.Errorf("ledger holds %d items (%v), want 3", out.Count, err)
	}
	voted, err := s.Voted(ctx, votes.Poll{ID: "p"}, "u2", "2026-11")
	if err != nil || !voted {
		t.Errorf("Voted(u2) = %v, %v; want true", voted, err)
	}
	if voted, _ := s.Voted(ctx, votes.Poll{ID: "p"}, "u9", "2026-11"); voted {
		t.Error("Voted(u9) = true for a voter with no vote")
	}
	if voted, err := s.Voted(ctx, votes.Poll{ID: "one", OneVotePerVoter: true}, "alice", "2026-11"); err != nil || !voted {
		t.Errorf("Voted(alice) = %v, %v", voted, err)
	}
}

// A voter's claim is held by the first vote, in whatever month.
func TestClaimVoterKeepsTheFirstVote(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	first := entry("first", "one", "a", "alice", true)
	if err := s.ClaimVoter(ctx, first); err != nil {
		t.Fatal(err)
	}
	later := entry("later", "one", "b", "alice", true)
	later.CastAt = later.CastAt.AddDate(0, 1, 0)
	var ex *votes.ExistsError
	for _, e := range []votes.Entry{first, later} {
		if err := s.ClaimVoter(ctx, e); !errors.As(err, &ex) || ex.StoredVoteID != "first" {
			t.Errorf("claim by %s: %v, want *ExistsError holding first", e.VoteID, err)
		}
	}
	if err := s.ClaimVoter(ctx, entry("b1", "one", "a", "bob", true)); err != nil {
		t.Errorf("another voter: %v", err)
	}
}

// The counter never creates a table: a month without one is ErrNoLedger,
// and stays without one.
func TestPutVoteIntoAMonthWithNoTable(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	e := entry("v1", "p", "a", "u1", false)
	e.CastAt = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.PutVote(ctx, e); !errors.Is(err, votes.ErrNoLedger) {
		t.Errorf("put into 1970: %v, want ErrNoLedger", err)
	}
	if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.LedgerTable("1970-01"))}); err == nil {
		t.Error("a ledger table for 1970 exists")
	}
}

// A tally commit adds its increments and moves the checkpoint together,
// only from the checkpoint it was planned from; 99 increments and the
// checkpoint fill one transaction.
func TestCommitTally(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	clock := time.Now().UTC().Truncate(time.Second)
	s.SetClock(func() time.Time { return clock })
	s.realNow = func() time.Time { return clock }
	opts := make([]string, 99)
	for i := range opts {
		opts[i] = fmt.Sprint("o", i)
	}
	if err := s.CreatePoll(ctx, votes.Poll{ID: "p", Options: opts, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	sh := votes.StreamShard{Table: s.LedgerTable(ledger.MonthOf(clock)), Shard: "shardId-1"}
	if ck, err := s.Checkpoint(ctx, sh); err != nil || ck != "" {
		t.Fatalf("fresh checkpoint %q, %v", ck, err)
	}
	wide := votes.TallyCommit{Seq: "000000000000000000100", Votes: 99, LastWrittenAt: clock.Add(-3 * time.Second)}
	for i, o := range opts {
		wide.Increments = append(wide.Increments, votes.Increment{PollID: "p", OptionID: o, Shard: i % 2, N: 1})
	}
	if err := s.CommitTally(ctx, sh, "", wide); err != nil {
		t.Fatal(err)
	}
	// A replay planned from the old checkpoint adds nothing.
	if err := s.CommitTally(ctx, sh, "", wide); !errors.Is(err, votes.ErrCheckpointMoved) {
		t.Errorf("replay: %v, want ErrCheckpointMoved", err)
	}
	// A stream shard's own slot: an item of its own, summed with the rest.
	next := votes.TallyCommit{Seq: "000000000000000000200", Votes: 5, Increments: []votes.Increment{{PollID: "p", OptionID: "o0", Shard: 1, Slot: "a1", N: 5}}}
	if err := s.CommitTally(ctx, sh, "000000000000000000050", next); !errors.Is(err, votes.ErrCheckpointMoved) {
		t.Errorf("from a wrong checkpoint: %v, want ErrCheckpointMoved", err)
	}
	if err := s.CommitTally(ctx, sh, wide.Seq, next); err != nil {
		t.Fatal(err)
	}
	if ck, err := s.Checkpoint(ctx, sh); err != nil || ck != next.Seq {
		t.Errorf("checkpoint %q, %v; want %s", ck, err, next.Seq)
	}
	slotted, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "count#p#1"}, "sk": &types.AttributeValueMemberS{Value: "o0#a1"}}})
	if err != nil || slotted.Item == nil {
		t.Errorf("the slot's item count#p#1 / o0#a1: %v, %v", slotted, err)
	}
	tot, err := votes.Results(ctx, s, "p", func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	if tot.Total != 104 || tot.Totals["o0"] != 6 || tot.Totals["o98"] != 1 {
		t.Errorf("totals %d (o0 %d, o98 %d), want 104 (6, 1)", tot.Total, tot.Totals["o0"], tot.Totals["o98"])
	}
	if !tot.Counters.CountedAt.Equal(clock) {
		t.Errorf("counters counted at %s, want %s", tot.Counters.CountedAt, clock)
	}
	// The checkpoint of this month's ledger is kept until 60 days after
	// the month ends (the rotator sums them when it retires the month), by
	// the real clock (DynamoDB's TTL), even when the store's clock is moved.
	monthStart, _ := ledger.Opens(ledger.MonthOf(clock))
	keep := monthStart.AddDate(0, 1, 0).Add(CheckpointKeep)
	item, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: CheckpointKey(sh)})
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := item.Item["ttl"].(*types.AttributeValueMemberN)
	if ttl == nil || ttl.Value != fmt.Sprint(keep.Unix()) {
		t.Errorf("ttl %v, want %d (60 days after the month)", item.Item["ttl"], keep.Unix())
	}
	s.SetClock(func() time.Time { return time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC) })
	if err := s.CommitTally(ctx, sh, next.Seq, votes.TallyCommit{Seq: "000000000000000000300"}); err != nil {
		t.Fatal(err)
	}
	item, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: CheckpointKey(sh)})
	if err != nil {
		t.Fatal(err)
	}
	if ttl, _ := item.Item["ttl"].(*types.AttributeValueMemberN); ttl == nil || ttl.Value != fmt.Sprint(keep.Unix()) {
		t.Errorf("with the store's clock in October: ttl %v, want %d (the real clock's)", item.Item["ttl"], keep.Unix())
	}
	// A month long past, or a table not named for a month: two days after
	// the last commit.
	for _, table := range []string{s.LedgerTable("2020-01"), s.LedgerTable("x"), "other"} {
		if got := s.checkpointExpiry(table); !got.Equal(clock.Add(CheckpointTTL)) {
			t.Errorf("expiry of %s's checkpoints %s, want %s", table, got, clock.Add(CheckpointTTL))
		}
	}
	if n, _ := item.Item["votes"].(*types.AttributeValueMemberN); n == nil || n.Value != "104" {
		t.Errorf("checkpoint votes %v, want 104", item.Item["votes"])
	}
}

// Staleness reports the lag of the shards that committed last.
func TestStaleness(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	clock := time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC)
	s.SetClock(func() time.Time { return clock })
	if st, err := s.Staleness(ctx, clock); err != nil || !st.CountedAt.IsZero() {
		t.Fatalf("no commits yet: %+v, %v", st, err)
	}
	// November's shard committed a 4-second-old write; December's a
	// 1-second-old one 10 s later; a shard an hour idle does not count.
	commit := func(month, shard string, at time.Time, lag time.Duration) {
		t.Helper()
		s.SetClock(func() time.Time { return at })
		sh := votes.StreamShard{Table: s.LedgerTable(month), Shard: shard}
		if err := s.CommitTally(ctx, sh, "", votes.TallyCommit{Seq: "1", LastWrittenAt: at.Add(-lag)}); err != nil {
			t.Fatal(err)
		}
	}
	commit("2026-11", "old", clock.Add(-time.Hour), time.Hour)
	commit("2026-11", "a", clock.Add(-10*time.Second), 4*time.Second)
	commit("2026-12", "b", clock, time.Second)
	st, err := s.Staleness(ctx, clock)
	if err != nil || !st.CountedAt.Equal(clock) || st.LagSeconds != 4 {
		t.Errorf("staleness %+v, %v; want counted at %s with a 4 s lag", st, err, clock)
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
