// Package votesddb keeps the votes domain in DynamoDB: polls and
// write-sharded counters in the counters table, and the vote ledger in one
// table per month (<prefix>-YYYY-MM), created on first use.
//
// Counters table items:
//
//	poll     pk = poll#<pollId>             sk = meta        options, shards, oneVotePerVoter, opensAt, closesAt
//	shard    pk = count#<pollId>#<shard>    sk = <optionId>  votes (ADD)
//
// Ledger items (see votes.Entry.LedgerKey):
//
//	pk = <pollId>#<hash(voterId) mod 16>    sk = <voterId>#<voteId> (or <voterId> for one-vote-per-voter polls)
package votesddb

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// API is the part of the DynamoDB client the store uses; *dynamodb.Client
// satisfies it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Votes stores polls, counters and the ledger.
type Votes struct {
	db           API
	counters     string
	ledgerPrefix string
	now          func() time.Time

	mu     sync.Mutex
	tables map[string]bool // ledger tables known to exist
}

var (
	_ votes.Store       = (*Votes)(nil)
	_ votes.CountReader = (*Votes)(nil)
)

// New returns a store over the counters table and the ledger tables named
// <ledgerPrefix>-YYYY-MM.
func New(db API, countersTable, ledgerPrefix string) *Votes {
	return &Votes{db: db, counters: countersTable, ledgerPrefix: ledgerPrefix, now: time.Now, tables: map[string]bool{}}
}

// LedgerTable is the ledger table of a month (YYYY-MM).
func (s *Votes) LedgerTable(month string) string { return s.ledgerPrefix + "-" + month }

func pollKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str("poll#" + id), "sk": str("meta")}
}

func shardPK(pollID string, shard int) string { return "count#" + pollID + "#" + strconv.Itoa(shard) }

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// classify wraps throttling errors with votes.ErrThrottled.
func classify(err error) error {
	if awserr.IsDynamoDBThrottle(err) {
		return fmt.Errorf("%w: %w", votes.ErrThrottled, err)
	}
	return err
}

// batchBackoff is the pause before retry n of unprocessed batch items:
// 20 ms doubling to 1 s.
var batchBackoff = retry.Backoff{Base: 20 * time.Millisecond, Max: time.Second}

const maxBatchAttempts = 10

// CreatePoll stores a new poll; ErrPollExists if the id is taken.
func (s *Votes) CreatePoll(ctx context.Context, p votes.Poll) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.now().UTC()
	}
	item := pollKey(p.ID)
	opts := make([]types.AttributeValue, len(p.Options))
	for i, o := range p.Options {
		opts[i] = str(o)
	}
	item["pollId"] = str(p.ID)
	item["options"] = &types.AttributeValueMemberL{Value: opts}
	item["shards"] = num(int64(p.Shards))
	item["oneVotePerVoter"] = &types.AttributeValueMemberBOOL{Value: p.OneVotePerVoter}
	item["createdAt"] = str(p.CreatedAt.Format(time.RFC3339Nano))
	if !p.Opens.IsZero() {
		item["opensAt"] = str(p.Opens.UTC().Format(time.RFC3339Nano))
	}
	if !p.Closes.IsZero() {
		item["closesAt"] = str(p.Closes.UTC().Format(time.RFC3339Nano))
	}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.counters), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if awserr.IsConditionFailed(err) {
		return fmt.Errorf("%w: %s", votes.ErrPollExists, p.ID)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create poll %s: %w", p.ID, classify(err))
	}
	return nil
}

func pollFrom(item map[string]types.AttributeValue) (votes.Poll, error) {
	var p votes.Poll
	get := func(k string) string {
		if v, ok := item[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	p.ID = get("pollId")
	if l, ok := item["options"].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				p.Options = append(p.Options, s.Value)
			}
		}
	}
	if n, ok := item["shards"].(*types.AttributeValueMemberN); ok {
		p.Shards, _ = strconv.Atoi(n.Value)
	}
	if b, ok := item["oneVotePerVoter"].(*types.AttributeValueMemberBOOL); ok {
		p.OneVotePerVoter = b.Value
	}
	for k, dst := range map[string]*time.Time{"opensAt": &p.Opens, "closesAt": &p.Closes, "createdAt": &p.CreatedAt} {
		if v := get(k); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return p, fmt.Errorf("dynamostore: poll %s: %s %q: %w", p.ID, k, v, err)
			}
			*dst = t
		}
	}
	if p.ID == "" || p.Shards < 1 {
		return p, fmt.Errorf("dynamostore: poll item %v is incomplete", item["pk"])
	}
	return p, nil
}

// Poll reads one poll (strongly consistent); votes.ErrNoPoll if missing.
func (s *Votes) Poll(ctx context.Context, id string) (votes.Poll, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: pollKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return votes.Poll{}, fmt.Errorf("dynamostore: get poll %s: %w", id, classify(err))
	}
	if out.Item == nil {
		return votes.Poll{}, fmt.Errorf("%w: %s", votes.ErrNoPoll, id)
	}
	return pollFrom(out.Item)
}

// Polls reads many polls with BatchGetItem, retrying unprocessed keys.
func (s *Votes) Polls(ctx context.Context, ids []string) (map[string]votes.Poll, error) {
	out := map[string]votes.Poll{}
	for start := 0; start < len(ids); start += 100 {
		keys := []map[string]types.AttributeValue{}
		for _, id := range ids[start:min(start+100, len(ids))] {
			if votes.ValidID(id) == nil {
				keys = append(keys, pollKey(id))
			}
		}
		req := map[string]types.KeysAndAttributes{s.counters: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0 && len(req[s.counters].Keys) > 0; attempt++ {
			if attempt >= maxBatchAttempts {
				return nil, fmt.Errorf("dynamostore: read polls: keys still unprocessed after %d attempts: %w", attempt, votes.ErrThrottled)
			}
			if attempt > 0 {
				if err := batchBackoff.Wait(ctx, attempt); err != nil {
					return nil, err
				}
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("dynamostore: read polls: %w", classify(err))
			}
			for _, item := range res.Responses[s.counters] {
				p, err := pollFrom(item)
				if err != nil {
					return nil, err
				}
				out[p.ID] = p
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// ShardCounts reads one shard's per-option counts.
func (s *Votes) ShardCounts(ctx context.Context, pollID string, shard int) (map[string]int64, error) {
	counts := map[string]int64{}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 aws.String(s.counters),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(shardPK(pollID, shard))},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: read shard %d of %s: %w", shard, pollID, classify(err))
		}
		for _, item := range page.Items {
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			n, _ := item["votes"].(*types.AttributeValueMemberN)
			if sk == nil || n == nil {
				continue
			}
			v, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("dynamostore: shard %d of %s: votes %q: %w", shard, pollID, n.Value, err)
			}
			counts[sk.Value] += v
		}
	}
	return counts, nil
}

func totalsKey(pollID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str("total#" + pollID), "sk": str("total")}
}

var _ votes.TotalsCache = (*Votes)(nil)

// CachedTotals reads the materialized totals of a poll.
func (s *Votes) CachedTotals(ctx context.Context, pollID string) (votes.Totals, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: totalsKey(pollID)})
	if err != nil {
		return votes.Totals{}, false, fmt.Errorf("dynamostore: read totals of %s: %w", pollID, classify(err))
	}
	if out.Item == nil {
		return votes.Totals{}, false, nil
	}
	t := votes.Totals{PollID: pollID, Totals: map[string]int64{}}
	if m, ok := out.Item["totals"].(*types.AttributeValueMemberM); ok {
		for o, v := range m.Value {
			if n, ok := v.(*types.AttributeValueMemberN); ok {
				x, _ := strconv.ParseInt(n.Value, 10, 64)
				t.Totals[o] = x
				t.Total += x
			}
		}
	}
	if n, ok := out.Item["shards"].(*types.AttributeValueMemberN); ok {
		t.Shards, _ = strconv.Atoi(n.Value)
	}
	if r, ok := out.Item["readAt"].(*types.AttributeValueMemberS); ok {
		t.ReadAt, _ = time.Parse(time.RFC3339Nano, r.Value)
	}
	return t, true, nil
}

// PutTotals stores totals unless newer ones are there already.
func (s *Votes) PutTotals(ctx context.Context, t votes.Totals) error {
	m := map[string]types.AttributeValue{}
	for o, n := range t.Totals {
		m[o] = num(n)
	}
	item := totalsKey(t.PollID)
	item["totals"] = &types.AttributeValueMemberM{Value: m}
	item["total"] = num(t.Total)
	item["shards"] = num(int64(t.Shards))
	// Fixed width, so the condition's string comparison orders times.
	item["readAt"] = str(t.ReadAt.UTC().Format("2006-01-02T15:04:05.000000000Z"))
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.counters), Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR readAt < :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": item["readAt"]},
	})
	if err != nil && !awserr.IsConditionFailed(err) { // a newer copy won: fine
		return fmt.Errorf("dynamostore: store totals of %s: %w", t.PollID, classify(err))
	}
	return nil
}
