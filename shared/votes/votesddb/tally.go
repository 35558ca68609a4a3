package votesddb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Tally checkpoints live in the counters table, one item per ledger stream
// shard, with the attributes shared/ledger names (ledger.CheckpointSeq, …):
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
	return map[string]types.AttributeValue{ledger.AttrPK: str(ledger.CheckpointPK(s.Table)), ledger.AttrSK: str(s.Shard)}
}

// Checkpoint reads a stream shard's checkpoint (strongly consistent): ""
// when the shard has none, ledger.ErrMissingAttribute when its item has no
// sequence number (counting from none would count the shard twice).
func (s *Votes) Checkpoint(ctx context.Context, sh votes.StreamShard) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.counters), Key: CheckpointKey(sh), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#pk, #seq"),
		ExpressionAttributeNames: map[string]string{"#pk": ledger.AttrPK, "#seq": ledger.CheckpointSeq},
	})
	if err != nil {
		return "", fmt.Errorf("votesddb: read checkpoint of %s/%s: %w", sh.Table, sh.Shard, classify(err))
	}
	if out.Item == nil {
		return "", nil
	}
	seq, err := stringAttr(out.Item, ledger.CheckpointSeq)
	if err != nil {
		return "", fmt.Errorf("votesddb: checkpoint of %s/%s: %w", sh.Table, sh.Shard, err)
	}
	return seq, nil
}

// stringAttr is an item's string attribute; ledger.ErrMissingAttribute when
// the item has none by that name.
func stringAttr(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("%w: no string %s", ledger.ErrMissingAttribute, name)
	}
	return v.Value, nil
}

// CommitTally adds the increments and moves the checkpoint from `from` to
// c.Seq in one transaction (2 write units per item: the checkpoint and one
// per increment), conditioned on the checkpoint being `from`.
func (s *Votes) CommitTally(ctx context.Context, sh votes.StreamShard, from string, c votes.TallyCommit) error {
	now := s.now().UTC()
	names := map[string]string{"#seq": ledger.CheckpointSeq, "#at": ledger.CheckpointAt, "#votes": ledger.CheckpointVotes, "#ttl": TTLAttribute}
	vals := map[string]types.AttributeValue{}
	cond := "#seq = :from"
	if from == "" {
		cond, names["#pk"] = "attribute_not_exists(#pk)", ledger.AttrPK
	} else {
		vals[":from"] = str(from)
	}
	vals[":seq"] = str(c.Seq)
	vals[":at"] = str(now.Format(readAtLayout))
	vals[":n"] = num(int64(c.Votes))
	// The expiry is on the real clock, whatever the store's: DynamoDB's TTL
	// deletes by the real time, and a rehearsal's moved clock (the soak's
	// October) would have it delete checkpoints still in use.
	vals[":ttl"] = num(s.checkpointExpiry(sh.Table).Unix())
	set := "SET #seq = :seq, #at = :at, #ttl = :ttl"
	if !c.LastWrittenAt.IsZero() {
		names["#lw"] = ledger.CheckpointLastWrittenAt
		vals[":lw"] = str(c.LastWrittenAt.UTC().Format(readAtLayout))
		set += ", #lw = :lw"
	}
	items := make([]types.TransactWriteItem, 0, len(c.Increments)+1)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.counters), Key: CheckpointKey(sh),
		UpdateExpression:          aws.String(set + " ADD #votes :n"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
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
	if prefix, m, ok := ledger.SplitTable(table); ok && prefix == s.ledgerPrefix {
		opens, _ := ledger.Opens(m) // SplitTable's month is well formed
		if keep := ledger.End(opens).Add(CheckpointKeep); keep.After(exp) {
			exp = keep
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
// to counting at the latest commits. A checkpoint it cannot read is an
// error, not a shard left out of the figures.
func (s *Votes) Staleness(ctx context.Context, now time.Time) (votes.Staleness, error) {
	var st votes.Staleness
	cur := ledger.MonthOf(now)
	prev, _ := ledger.Add(cur, -1) // cur is well formed
	var commits []checkpointCommit
	for _, m := range []string{prev, cur} {
		table := s.LedgerTable(m)
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName: aws.String(s.counters), KeyConditionExpression: aws.String("#pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(ledger.CheckpointPK(table))},
			ProjectionExpression:      aws.String("#sk, #at, #lw"),
			ExpressionAttributeNames: map[string]string{"#pk": ledger.AttrPK, "#sk": ledger.AttrSK,
				"#at": ledger.CheckpointAt, "#lw": ledger.CheckpointLastWrittenAt},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return st, fmt.Errorf("votesddb: read checkpoints of %s: %w", m, classify(err))
			}
			for _, item := range page.Items {
				c, err := commitOf(item)
				if err != nil {
					shard, _ := stringAttr(item, ledger.AttrSK)
					return st, fmt.Errorf("votesddb: checkpoint of %s/%s: %w", table, shard, err)
				}
				commits = append(commits, c)
				if c.at.After(st.CountedAt) {
					st.CountedAt = c.at
				}
			}
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

// checkpointCommit is when a checkpoint was last committed, and the latest
// ledger write it counted (zero when unknown).
type checkpointCommit struct{ at, written time.Time }

// commitOf reads a checkpoint's commit times: its at, which every commit
// writes (ledger.ErrMissingAttribute without it), and its lastWrittenAt,
// which a commit of votes with no known write time leaves out.
func commitOf(item map[string]types.AttributeValue) (checkpointCommit, error) {
	var c checkpointCommit
	at, err := stringAttr(item, ledger.CheckpointAt)
	if err != nil {
		return c, err
	}
	if c.at, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return c, fmt.Errorf("%s: %w", ledger.CheckpointAt, err)
	}
	if w, ok := item[ledger.CheckpointLastWrittenAt].(*types.AttributeValueMemberS); ok {
		if c.written, err = time.Parse(time.RFC3339Nano, w.Value); err != nil {
			return c, fmt.Errorf("%s: %w", ledger.CheckpointLastWrittenAt, err)
		}
	}
	return c, nil
}

// asCondition finds a ConditionalCheckFailedException in err.
func asCondition(err error, cf **types.ConditionalCheckFailedException) bool {
	return errors.As(err, cf)
}
