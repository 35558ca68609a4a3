package votesddb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Tally checkpoints live in the counters table, one item per ledger stream
// shard:
//
//	checkpoint  pk = ckpt#<ledger table>  sk = <stream shard id>  seq, at, lastWrittenAt, votes, ttl
//
// A checkpoint expires (ttl) CheckpointTTL after its last commit, and not
// before CheckpointKeep after its ledger month ends. After the first, the
// stream has trimmed every record it covers (records live 24 hours), so no
// redelivery can need it; an open shard's own commits keep renewing it. The
// second keeps a month's checkpoints, and the votes each counted, until the
// rotator retires the month: it compares their sum with the month's items,
// verified against the archive, and alarms when they differ.
const (
	CheckpointTTL  = 48 * time.Hour
	CheckpointKeep = 60 * 24 * time.Hour
)

// TTLAttribute is the checkpoint's expiry (Unix seconds): the counters
// table's TimeToLiveSpecification names it.
const TTLAttribute = "ttl"

var _ votes.TallyStore = (*Votes)(nil)

// CheckpointKey is the key of a stream shard's checkpoint item.
func CheckpointKey(s votes.StreamShard) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(ledger.CheckpointPK(s.Table)), "sk": str(s.Shard)}
}

// Checkpoint reads a stream shard's checkpoint (strongly consistent).
func (s *Votes) Checkpoint(ctx context.Context, sh votes.StreamShard) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.counters), Key: CheckpointKey(sh), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("seq"),
	})
	if err != nil {
		return "", fmt.Errorf("votesddb: read checkpoint of %s/%s: %w", sh.Table, sh.Shard, classify(err))
	}
	if v, ok := out.Item["seq"].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}

// CommitTally adds the increments and moves the checkpoint from `from` to
// c.Seq in one transaction (2 write units per item: the checkpoint and one
// per increment), conditioned on the checkpoint being `from`.
func (s *Votes) CommitTally(ctx context.Context, sh votes.StreamShard, from string, c votes.TallyCommit) error {
	now := s.now().UTC()
	cond, vals := "attribute_not_exists(pk)", map[string]types.AttributeValue{}
	if from != "" {
		cond, vals[":from"] = "seq = :from", str(from)
	}
	vals[":seq"] = str(c.Seq)
	vals[":at"] = str(now.Format(readAtLayout))
	vals[":n"] = num(int64(c.Votes))
	// The expiry is on the real clock, whatever the store's: DynamoDB's TTL
	// deletes by the real time, and a rehearsal's moved clock (the soak's
	// October) would have it delete checkpoints still in use.
	vals[":ttl"] = num(s.checkpointExpiry(sh.Table).Unix())
	set := "SET seq = :seq, #at = :at, #ttl = :ttl"
	if !c.LastWrittenAt.IsZero() {
		vals[":lw"] = str(c.LastWrittenAt.UTC().Format(readAtLayout))
		set += ", lastWrittenAt = :lw"
	}
	items := make([]types.TransactWriteItem, 0, len(c.Increments)+1)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.counters), Key: CheckpointKey(sh),
		UpdateExpression:          aws.String(set + " ADD votes :n"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#at": "at", "#ttl": TTLAttribute},
		ExpressionAttributeValues: vals,
	}})
	for _, inc := range c.Increments {
		items = append(items, types.TransactWriteItem{Update: s.increment(inc)})
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	if codes, ok := awserr.CancellationCodes(err); ok {
		for i, code := range codes {
			switch {
			case i == 0 && code == "ConditionalCheckFailed":
				return fmt.Errorf("votesddb: commit tally of %s/%s at %s: %w", sh.Table, sh.Shard, c.Seq, votes.ErrCheckpointMoved)
			case code == "ThrottlingError" || code == "ProvisionedThroughputExceeded":
				return fmt.Errorf("votesddb: commit tally of %s/%s: %w: %w", sh.Table, sh.Shard, votes.ErrThrottled, err)
			case code == "TransactionConflict":
				return fmt.Errorf("votesddb: commit tally of %s/%s: %w: %w", sh.Table, sh.Shard, votes.ErrConflict, err)
			}
		}
	}
	return fmt.Errorf("votesddb: commit tally of %s/%s: %w", sh.Table, sh.Shard, classify(err))
}

// checkpointExpiry is when a checkpoint of the ledger table expires if no
// commit renews it: CheckpointTTL from now, and not before CheckpointKeep
// after the table's month ends (a table not named for a month: the first).
func (s *Votes) checkpointExpiry(table string) time.Time {
	exp := s.realNow().Add(CheckpointTTL)
	if m, ok := strings.CutPrefix(table, s.ledgerPrefix+"-"); ok {
		if start, err := ledger.Opens(m); err == nil {
			if keep := ledger.End(start).Add(CheckpointKeep); keep.After(exp) {
				exp = keep
			}
		}
	}
	return exp
}

func (s *Votes) increment(inc votes.Increment) *types.Update {
	sk := inc.OptionID
	if inc.Slot != "" {
		sk += "#" + inc.Slot // option ids hold no '#'
	}
	return &types.Update{
		TableName:                 aws.String(s.counters),
		Key:                       map[string]types.AttributeValue{"pk": str(shardPK(inc.PollID, inc.Shard)), "sk": str(sk)},
		UpdateExpression:          aws.String("ADD votes :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(inc.N)},
	}
}

// Staleness reads the checkpoints of the ledgers of month and the month
// before it: when the tally last committed, and the lag from ledger write
// to counting at the latest commits.
func (s *Votes) Staleness(ctx context.Context, now time.Time) (votes.Staleness, error) {
	var st votes.Staleness
	type ckpt struct {
		At            string `dynamodbav:"at"`
		LastWrittenAt string `dynamodbav:"lastWrittenAt"`
	}
	var all []ckpt
	cur := now.UTC()
	for _, m := range []string{ledger.MonthOf(cur.AddDate(0, -1, 1-cur.Day())), ledger.MonthOf(cur)} {
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName: aws.String(s.counters), KeyConditionExpression: aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(ledger.CheckpointPK(s.LedgerTable(m)))},
			ProjectionExpression:      aws.String("#at, lastWrittenAt"),
			ExpressionAttributeNames:  map[string]string{"#at": "at"},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return st, fmt.Errorf("votesddb: read checkpoints of %s: %w", m, classify(err))
			}
			var items []ckpt
			if err := attributevalue.UnmarshalListOfMaps(page.Items, &items); err != nil {
				return st, fmt.Errorf("votesddb: checkpoints of %s: %w", m, err)
			}
			all = append(all, items...)
		}
	}
	type commit struct{ at, written time.Time }
	var commits []commit
	for _, c := range all {
		at, err := time.Parse(time.RFC3339Nano, c.At)
		if err != nil {
			continue
		}
		w, _ := time.Parse(time.RFC3339Nano, c.LastWrittenAt)
		commits = append(commits, commit{at, w})
		if at.After(st.CountedAt) {
			st.CountedAt = at
		}
	}
	// The lag of the shards that committed within a minute of the latest
	// commit: a shard idle since holds an old figure.
	for _, c := range commits {
		if !c.written.IsZero() && st.CountedAt.Sub(c.at) <= time.Minute {
			st.LagSeconds = max(st.LagSeconds, c.at.Sub(c.written).Seconds())
		}
	}
	return st, nil
}

// asCondition finds a ConditionalCheckFailedException in err.
func asCondition(err error, cf **types.ConditionalCheckFailedException) bool {
	return errors.As(err, cf)
}
