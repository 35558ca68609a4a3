package archiveddb

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// TallyCheckpoints reads the tally's per stream shard checkpoints from
// the counters table: items pk = ckpt#<ledger table>, sk = <shard id>,
// with the attributes shared/ledger names (ledger.CheckpointSeq, the last
// sequence number counted; ledger.CheckpointVotes, the votes counted). The
// votes flow writes them (votesddb.CheckpointKey); both flows take the key
// and the names from shared/ledger, so that neither links the other. A
// checkpoint without them is an error (ledger.ErrMissingAttribute): left
// out, its shard would read as never counted, or its votes as none. It
// implements archive.Counted.
type TallyCheckpoints struct {
	DB    *dynamodb.Client
	Table string // the counters table
}

var _ archive.Counted = (*TallyCheckpoints)(nil)

// Uncounted returns the records of the shards whose last record is past
// the shard's checkpoint (or that have none).
func (c *TallyCheckpoints) Uncounted(ctx context.Context, table string, recs []archive.StreamRecord) ([]archive.StreamRecord, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	ckpt := map[string]string{}
	err := c.each(ctx, table, ledger.CheckpointSeq, func(shard string, v types.AttributeValue) error {
		seq, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return fmt.Errorf("%w: no string %s", ledger.ErrMissingAttribute, ledger.CheckpointSeq)
		}
		ckpt[shard] = seq.Value
		return nil
	})
	if err != nil {
		return nil, err
	}
	last := map[string]string{}
	for _, r := range recs {
		last[r.Shard] = r.SequenceNumber
	}
	var out []archive.StreamRecord
	for _, r := range recs {
		if ledger.SeqLess(ckpt[r.Shard], last[r.Shard]) && ledger.SeqLess(ckpt[r.Shard], r.SequenceNumber) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Tallied sums the votes the tally's checkpoints of the ledger table
// counted (each checkpoint's ledger.CheckpointVotes; the tally keeps a
// month's checkpoints until 60 days after it ends).
func (c *TallyCheckpoints) Tallied(ctx context.Context, table string) (int64, error) {
	var sum int64
	err := c.each(ctx, table, ledger.CheckpointVotes, func(_ string, v types.AttributeValue) error {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return fmt.Errorf("%w: no number %s", ledger.ErrMissingAttribute, ledger.CheckpointVotes)
		}
		votes, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return fmt.Errorf("counted %q votes: %w", n.Value, err)
		}
		sum += votes
		return nil
	})
	return sum, err
}

// each reads the ledger table's checkpoints (strongly consistent) and
// hands got each one's shard id and its attribute attr (nil when it has
// none); an error of got's names the checkpoint and ends the read.
func (c *TallyCheckpoints) each(ctx context.Context, table, attr string, got func(shard string, v types.AttributeValue) error) error {
	p := dynamodb.NewQueryPaginator(c.DB, &dynamodb.QueryInput{
		TableName: aws.String(c.Table), KeyConditionExpression: aws.String("#pk = :pk"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: ledger.CheckpointPK(table)}},
		ProjectionExpression:      aws.String("#sk, #attr"),
		ExpressionAttributeNames:  map[string]string{"#pk": ledger.AttrPK, "#sk": ledger.AttrSK, "#attr": attr},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("archiveddb: read the tally's checkpoints of %s: %w", table, err)
		}
		for _, it := range page.Items {
			sk, ok := it[ledger.AttrSK].(*types.AttributeValueMemberS)
			if !ok {
				return fmt.Errorf("archiveddb: a checkpoint of %s: %w: no string %s", table, ledger.ErrMissingAttribute, ledger.AttrSK)
			}
			if err := got(sk.Value, it[attr]); err != nil {
				return fmt.Errorf("archiveddb: checkpoint of %s/%s: %w", table, sk.Value, err)
			}
		}
	}
	return nil
}
