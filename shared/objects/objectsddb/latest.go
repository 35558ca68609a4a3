package objectsddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// LatestRecord reads a stream image of an item: ok is true for the latest
// version item of a key (v0, a tombstone included), whose record it
// returns, and false for any other item (history, chunks, uploads, shared
// blobs' records).
func LatestRecord(image map[string]types.AttributeValue) (r objects.Record, ok bool, err error) {
	if sk, _ := image[attrSK].(*types.AttributeValueMemberS); sk == nil || sk.Value != objects.LatestSortKey {
		return objects.Record{}, false, nil
	}
	r, err = decode(image)
	if errors.Is(err, errNotVersion) {
		return objects.Record{}, false, nil
	}
	if err != nil {
		return objects.Record{}, false, err
	}
	return r, true, nil
}

// Latest reads the latest version item (v0) of keys, for the search flow:
// a batch of search hits checked against the table, and the whole table
// for a reindex or a verify.
type Latest struct {
	db    *dynamodb.Client
	table string
	// Segments is how many parallel scan segments read the table (default 4).
	Segments int
	// MaxBatchAttempts bounds the requests of one batch read whose keys
	// DynamoDB leaves unprocessed (default 8).
	MaxBatchAttempts int
	Backoff          retry.Backoff
}

// NewLatest returns a reader of the table's latest versions.
func NewLatest(db *dynamodb.Client, table string) *Latest {
	return &Latest{db: db, table: table, Segments: 4, MaxBatchAttempts: DefaultMaxBatchAttempts, Backoff: DefaultBackoff}
}

// Get reads the v0 items of keys with strongly consistent reads, without
// their payloads; a key without one is absent from the result.
func (l *Latest) Get(ctx context.Context, keys []string) (map[string]objects.Record, error) {
	expr, err := expression.NewBuilder().WithProjection(metaProjection()).Build()
	if err != nil {
		return nil, fmt.Errorf("objectsddb: latest: %w", err)
	}
	out := make(map[string]objects.Record, len(keys))
	seen := map[string]bool{}
	var batch []map[string]types.AttributeValue
	flush := func() error {
		err := l.getBatch(ctx, batch, expr, out)
		batch = batch[:0]
		return err
	}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		batch = append(batch, key(k, objects.LatestSortKey))
		if len(batch) == maxBatchGet {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func metaProjection() expression.ProjectionBuilder {
	p := expression.NamesList(expression.Name(metaAttrs[0]))
	for _, a := range metaAttrs[1:] {
		p = p.AddNames(expression.Name(a))
	}
	return p
}

func (l *Latest) getBatch(ctx context.Context, keys []map[string]types.AttributeValue, expr expression.Expression, out map[string]objects.Record) error {
	ka := types.KeysAndAttributes{Keys: keys, ProjectionExpression: expr.Projection(), ExpressionAttributeNames: expr.Names()}
	err := batchGetItems(ctx, l.db, l.table, ka, max(l.MaxBatchAttempts, 1), l.Backoff, func(item map[string]types.AttributeValue) error {
		r, err := decode(item)
		if err != nil {
			return err
		}
		out[r.Key] = r
		return nil
	})
	if err != nil {
		return fmt.Errorf("objectsddb: latest of %d keys: %w", len(keys), err)
	}
	return nil
}

// Scan reads every v0 item of the table (tombstones included) with a
// strongly consistent, parallel scan, and calls fn with each page's
// records, from several goroutines at once. With payloads, inline
// documents keep their bytes (a reindex reads their text); without, the
// scan projects the metadata only.
func (l *Latest) Scan(ctx context.Context, payloads bool, fn func([]objects.Record) error) error {
	b := expression.NewBuilder().WithFilter(expression.Name(attrSK).Equal(expression.Value(objects.LatestSortKey)))
	if !payloads {
		b = b.WithProjection(metaProjection())
	}
	expr, err := b.Build()
	if err != nil {
		return fmt.Errorf("objectsddb: scan latest: %w", err)
	}
	in := dynamodb.ScanInput{
		TableName: aws.String(l.table), FilterExpression: expr.Filter(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	err = parallelScan(ctx, l.db, in, l.Segments, func(items []map[string]types.AttributeValue) error {
		recs := make([]objects.Record, 0, len(items))
		for _, item := range items {
			r, err := decode(item)
			if errors.Is(err, errNotVersion) {
				continue
			}
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		if len(recs) == 0 {
			return nil
		}
		return fn(recs)
	})
	if err != nil {
		return fmt.Errorf("objectsddb: scan latest: %w", err)
	}
	return nil
}
