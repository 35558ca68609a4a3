// Package votesddb keeps the votes domain in DynamoDB: polls and
// write-sharded counters, one-vote-per-voter claims and the tally's stream
// checkpoints in the counters table, and the vote ledger in one table per
// month (<prefix>-YYYY-MM), created by the rotator alone.
//
// Counters table items:
//
//	poll     pk = poll#<pollId>             sk = meta        options, shards, oneVotePerVoter, opensAt, closesAt, pollCatalog
//	shard    pk = count#<pollId>#<shard>    sk = <optionId>[#<slot>]  votes (ADD); a slot is one
//	                                        stream shard's tally's own (votes.StreamPick)
//	claim    pk = voter#<pollId>#<voterId>  sk = voter       voteId, castAt (one-vote-per-voter polls)
//	ckpt     pk = ckpt#<ledger table>       sk = <shard id>  seq, at, lastWrittenAt, votes, ttl (tally.go)
//	rejects  pk = rejects#<pollId>#<shard>  sk = counts      <reason>: n (ADD), per reason (rejects.go)
//	reject   pk = rejects#<pollId>#<shard>  sk = at#<sentAt ms, 13 digits>#<messageId>
//	                                        messageId, sentAt, reason, detail, voteId, optionId,
//	                                        excerpt or excerptBinary, bodySize, ttl (14 days)
//
// A poll's rejects are spread over votes.RejectShards shards by message id,
// as the counters are over their shards: a flood of bad votes naming one
// poll is not one hot partition. Each reject is one transaction (its record
// if new, and its count), so a redelivered reject counts nothing.
//
// Poll items alone carry pollCatalog = "poll": the sparse index PollsIndex
// (pollCatalog, pollId) lists every poll in id order without reading the
// counters, claims and checkpoints beside them. Its one partition key takes
// a write per poll created, far below a partition's 1,000 writes/s.
//
// Ledger items (see votes.Entry.LedgerKey):
//
//	pk = <pollId>#<hash(voterId) mod 16>    sk = <voterId>#<voteId> (or <voterId> for one-vote-per-voter polls)
package votesddb

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Votes stores polls, counters and the ledger.
type Votes struct {
	db           *dynamodb.Client
	counters     string
	ledgerPrefix string
	now          func() time.Time
	realNow      func() time.Time // for TTLs, which DynamoDB applies on the real clock
}

var (
	_ votes.Store       = (*Votes)(nil)
	_ votes.CountReader = (*Votes)(nil)
)

// PollsIndex is the counters table's index of polls (template.yaml).
const (
	PollsIndex   = "polls"
	pollCatalog  = "pollCatalog"
	catalogValue = "poll"
)

// New returns a store over the counters table and the ledger tables named
// <ledgerPrefix>-YYYY-MM.
func New(db *dynamodb.Client, countersTable, ledgerPrefix string) *Votes {
	return &Votes{db: db, counters: countersTable, ledgerPrefix: ledgerPrefix, now: time.Now, realNow: time.Now}
}

// SetClock sets the clock the store writes times with (time.Now by default).
func (s *Votes) SetClock(now func() time.Time) { s.now = now }

// LedgerTable is the ledger table of a month (YYYY-MM).
func (s *Votes) LedgerTable(month string) string { return ledger.TableName(s.ledgerPrefix, month) }

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
	item, err := attributevalue.MarshalMapWithOptions(pollItem{
		PollID: p.ID, Options: p.Options, Shards: p.Shards, OneVotePerVoter: p.OneVotePerVoter,
		CreatedAt: p.CreatedAt, OpensAt: p.Opens.UTC(), ClosesAt: p.Closes.UTC(),
	}, func(o *attributevalue.EncoderOptions) { o.OmitEmptyTime = true })
	if err != nil {
		return fmt.Errorf("votesddb: create poll %s: %w", p.ID, err)
	}
	maps.Copy(item, pollKey(p.ID))
	item[pollCatalog] = str(catalogValue)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.counters), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if awserr.IsConditionFailed(err) {
		return fmt.Errorf("%w: %s", votes.ErrPollExists, p.ID)
	}
	if err != nil {
		return fmt.Errorf("votesddb: create poll %s: %w", p.ID, classify(err))
	}
	return nil
}

// pollItem is a poll's item in the counters table, beside its key. Times
// are RFC 3339 strings: createdAt as given, opensAt and closesAt in UTC and
// only when set.
type pollItem struct {
	PollID          string    `dynamodbav:"pollId"`
	Options         []string  `dynamodbav:"options"`
	Shards          int       `dynamodbav:"shards"`
	OneVotePerVoter bool      `dynamodbav:"oneVotePerVoter"`
	CreatedAt       time.Time `dynamodbav:"createdAt"`
	OpensAt         time.Time `dynamodbav:"opensAt,omitempty"`
	ClosesAt        time.Time `dynamodbav:"closesAt,omitempty"`
}

func pollFrom(item map[string]types.AttributeValue) (votes.Poll, error) {
	var it pollItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return votes.Poll{}, fmt.Errorf("votesddb: poll item %v: %w", item["pk"], err)
	}
	p := votes.Poll{
		ID: it.PollID, Options: it.Options, Shards: it.Shards, OneVotePerVoter: it.OneVotePerVoter,
		Opens: it.OpensAt, Closes: it.ClosesAt, CreatedAt: it.CreatedAt,
	}
	if p.ID == "" || p.Shards < 1 {
		return p, fmt.Errorf("votesddb: poll item %v is incomplete", item["pk"])
	}
	return p, nil
}

// Poll reads one poll (strongly consistent); votes.ErrNoPoll if missing.
func (s *Votes) Poll(ctx context.Context, id string) (votes.Poll, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: pollKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return votes.Poll{}, fmt.Errorf("votesddb: get poll %s: %w", id, classify(err))
	}
	if out.Item == nil {
		return votes.Poll{}, fmt.Errorf("%w: %s", votes.ErrNoPoll, id)
	}
	return pollFrom(out.Item)
}

// AllPolls lists every poll in id order, from the sparse polls index
// (eventually consistent: a poll created a moment ago may be missing), a
// page of up to 100 at a time.
func (s *Votes) AllPolls(ctx context.Context) ([]votes.Poll, error) {
	var out []votes.Poll
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(s.counters), IndexName: aws.String(PollsIndex),
			KeyConditionExpression:    aws.String("#c = :c"),
			ExpressionAttributeNames:  map[string]string{"#c": pollCatalog},
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(catalogValue)},
			ExclusiveStartKey:         start, Limit: aws.Int32(100),
		})
		if err != nil {
			return nil, fmt.Errorf("votesddb: list polls: %w", classify(err))
		}
		for _, item := range res.Items {
			p, err := pollFrom(item)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
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
				return nil, fmt.Errorf("votesddb: read polls: keys still unprocessed after %d attempts: %w", attempt, votes.ErrThrottled)
			}
			if attempt > 0 {
				if err := batchBackoff.Wait(ctx, attempt); err != nil {
					return nil, err
				}
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("votesddb: read polls: %w", classify(err))
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
			return nil, fmt.Errorf("votesddb: read shard %d of %s: %w", shard, pollID, classify(err))
		}
		var items []struct {
			Option string `dynamodbav:"sk"`
			Votes  *int64 `dynamodbav:"votes"`
		}
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &items); err != nil {
			return nil, fmt.Errorf("votesddb: shard %d of %s: %w", shard, pollID, err)
		}
		for _, it := range items {
			if it.Votes != nil {
				option, _, _ := strings.Cut(it.Option, "#") // <option> or <option>#<slot>
				counts[option] += *it.Votes
			}
		}
	}
	return counts, nil
}

func totalsKey(pollID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str("total#" + pollID), "sk": str("total")}
}

var _ votes.TotalsCache = (*Votes)(nil)

// totalsItem is a poll's cached totals, beside its key.
type totalsItem struct {
	Totals map[string]int64 `dynamodbav:"totals"`
	Total  int64            `dynamodbav:"total"`
	Shards int              `dynamodbav:"shards"`
	// Rejected is the poll's reject counts by reason, read with the shards.
	Rejected map[votes.Reason]int64 `dynamodbav:"rejected"`
	// ReadAt is fixed-width, so the condition's string comparison orders times.
	ReadAt string `dynamodbav:"readAt"`
}

const readAtLayout = "2006-01-02T15:04:05.000000000Z"

// CachedTotals reads the materialized totals of a poll.
func (s *Votes) CachedTotals(ctx context.Context, pollID string) (votes.Totals, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.counters), Key: totalsKey(pollID)})
	if err != nil {
		return votes.Totals{}, false, fmt.Errorf("votesddb: read totals of %s: %w", pollID, classify(err))
	}
	if out.Item == nil {
		return votes.Totals{}, false, nil
	}
	var it totalsItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return votes.Totals{}, false, fmt.Errorf("votesddb: totals of %s: %w", pollID, err)
	}
	t := votes.Totals{PollID: pollID, Totals: map[string]int64{}, Shards: it.Shards, Rejected: it.Rejected}
	if t.Rejected == nil { // cached before rejects were counted
		t.Rejected = map[votes.Reason]int64{}
	}
	for o, n := range it.Totals {
		t.Totals[o] = n
		t.Total += n
	}
	if it.ReadAt != "" {
		if t.ReadAt, err = time.Parse(time.RFC3339Nano, it.ReadAt); err != nil {
			return votes.Totals{}, false, fmt.Errorf("votesddb: totals of %s: readAt %q: %w", pollID, it.ReadAt, err)
		}
	}
	return t, true, nil
}

// PutTotals stores totals unless newer ones are there already.
func (s *Votes) PutTotals(ctx context.Context, t votes.Totals) error {
	totals := t.Totals
	if totals == nil {
		totals = map[string]int64{} // an empty map, not NULL
	}
	rejected := t.Rejected
	if rejected == nil {
		rejected = map[votes.Reason]int64{}
	}
	readAt := t.ReadAt.UTC().Format(readAtLayout)
	item, err := attributevalue.MarshalMap(totalsItem{Totals: totals, Total: t.Total, Shards: t.Shards, Rejected: rejected, ReadAt: readAt})
	if err != nil {
		return fmt.Errorf("votesddb: store totals of %s: %w", t.PollID, err)
	}
	maps.Copy(item, totalsKey(t.PollID))
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.counters), Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR readAt < :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": str(readAt)},
	})
	if err != nil && !awserr.IsConditionFailed(err) { // a newer copy won: fine
		return fmt.Errorf("votesddb: store totals of %s: %w", t.PollID, classify(err))
	}
	return nil
}
