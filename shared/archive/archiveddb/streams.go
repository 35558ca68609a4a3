package archiveddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

var _ archive.Streams = (*Streams)(nil)

// Streams lists what a table's stream still holds: the rotator's drain
// check. It reads every shard from its trim horizon — at most 24 hours of
// records, and for a cold table usually few or none — and so works the same
// against AWS and DynamoDB Local, whatever consumes the stream.
type Streams struct {
	API *dynamodbstreams.Client
	// EmptyPages: an open shard is taken as read to its end after this many
	// empty pages in a row (default 2). Closed shards are read until the
	// service says they end.
	EmptyPages int
}

// Records lists every record the stream holds, from every shard.
func (s *Streams) Records(ctx context.Context, arn string) ([]archive.StreamRecord, error) {
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := s.API.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		var nf *streamtypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("archiveddb: stream %s: %w", arn, archive.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("archiveddb: describe stream %s: %w", arn, err)
		}
		if out.StreamDescription == nil {
			break
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			break
		}
	}
	var recs []archive.StreamRecord
	for _, sh := range shards {
		got, err := s.shard(ctx, arn, aws.ToString(sh.ShardId))
		if err != nil {
			return nil, err
		}
		recs = append(recs, got...)
	}
	return recs, nil
}

func (s *Streams) shard(ctx context.Context, arn, shard string) ([]archive.StreamRecord, error) {
	it, err := s.API.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	})
	var nf *streamtypes.ResourceNotFoundException
	var trimmed *streamtypes.TrimmedDataAccessException
	if errors.As(err, &nf) || errors.As(err, &trimmed) {
		return nil, nil // the shard aged out
	}
	if err != nil {
		return nil, fmt.Errorf("archiveddb: shard iterator %s/%s: %w", arn, shard, err)
	}
	maxEmpty := s.EmptyPages
	if maxEmpty <= 0 {
		maxEmpty = 2
	}
	var recs []archive.StreamRecord
	iter, empty := it.ShardIterator, 0
	for iter != nil && empty < maxEmpty {
		out, err := s.API.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if errors.As(err, &nf) || errors.As(err, &trimmed) {
			break // the shard aged out meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("archiveddb: get records %s/%s: %w", arn, shard, err)
		}
		if len(out.Records) == 0 {
			empty++
		} else {
			empty = 0
		}
		for _, r := range out.Records {
			if r.Dynamodb == nil {
				continue
			}
			rec := archive.StreamRecord{Shard: shard, SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber)}
			if t := r.Dynamodb.ApproximateCreationDateTime; t != nil {
				rec.CreatedAt = t.UTC()
			}
			recs = append(recs, rec)
		}
		iter = out.NextShardIterator
	}
	return recs, nil
}
