package archiveddb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// QueryAPI is the part of DynamoDB the checkpoint reader uses;
// *dynamodb.Client satisfies it.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// TallyCheckpoints reads the tally's per stream shard checkpoints from
// the counters table: items pk = ckpt#<ledger table>, sk = <shard id>,
// seq = the last sequence number counted. The votes flow writes them
// (votesddb.CheckpointKey); both flows take the key from
// ledger.CheckpointPK, so that neither links the other. It implements
// archive.Counted.
type TallyCheckpoints struct {
	DB    QueryAPI
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
	p := dynamodb.NewQueryPaginator(c.DB, &dynamodb.QueryInput{
		TableName: aws.String(c.Table), KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: ledger.CheckpointPK(table)}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("archiveddb: read the tally's checkpoints of %s: %w", table, err)
		}
		for _, it := range page.Items {
			sk, _ := it["sk"].(*types.AttributeValueMemberS)
			seq, _ := it["seq"].(*types.AttributeValueMemberS)
			if sk != nil && seq != nil {
				ckpt[sk.Value] = seq.Value
			}
		}
	}
	last := map[string]string{}
	for _, r := range recs {
		last[r.Shard] = r.SequenceNumber
	}
	var out []archive.StreamRecord
	for _, r := range recs {
		if seqLess(ckpt[r.Shard], last[r.Shard]) && seqLess(ckpt[r.Shard], r.SequenceNumber) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Tallied sums the votes the tally's checkpoints of the ledger table
// counted (each checkpoint's votes attribute; the tally keeps a month's
// checkpoints until 60 days after it ends).
func (c *TallyCheckpoints) Tallied(ctx context.Context, table string) (int64, error) {
	var sum int64
	p := dynamodb.NewQueryPaginator(c.DB, &dynamodb.QueryInput{
		TableName: aws.String(c.Table), KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: ledger.CheckpointPK(table)}},
		ProjectionExpression:      aws.String("votes"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("archiveddb: read the tally's checkpoints of %s: %w", table, err)
		}
		for _, it := range page.Items {
			v, ok := it["votes"].(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("archiveddb: a checkpoint of %s counted %q votes: %w", table, v.Value, err)
			}
			sum += n
		}
	}
	return sum, nil
}

// seqLess orders sequence numbers as numbers ("" is before every one).
func seqLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
