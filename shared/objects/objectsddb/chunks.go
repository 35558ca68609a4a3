package objectsddb

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// DynamoDB's batch limits.
const (
	maxBatchWrite  = 25       // items per BatchWriteItem
	maxBatchGet    = 100      // keys per BatchGetItem
	maxBatchGetOut = 16 << 20 // bytes per BatchGetItem response
)

func chunkItemKey(k objects.ItemKey) map[string]types.AttributeValue { return key(k.PK, k.SK) }

// PutChunks implements objects.Chunks: BatchWriteItem puts, in parallel
// batches (see batches). A failure may leave some chunks written; the
// domain deletes them (DeleteChunks) or leaves them to the sweeper.
func (s *Store) PutChunks(ctx context.Context, key string, m objects.Manifest, chunks [][]byte) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("objectsddb: put chunks of %s: %w", key, err)
	}
	if len(chunks) != m.Count {
		return fmt.Errorf("objectsddb: put chunks of %s: %d chunks for a manifest of %d", key, len(chunks), m.Count)
	}
	reqs := make([]types.WriteRequest, m.Count)
	for i, k := range m.ChunkKeys(key) {
		item := chunkItemKey(k)
		item[attrData] = &types.AttributeValueMemberB{Value: chunks[i]}
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: item}}
	}
	if err := s.batchWrite(ctx, reqs); err != nil {
		return fmt.Errorf("objectsddb: put %d chunks of %s (write %s): %w", m.Count, key, m.WriteID, err)
	}
	return nil
}

// DeleteChunks implements objects.Chunks: BatchWriteItem deletes, in
// parallel batches; missing chunks are no error.
func (s *Store) DeleteChunks(ctx context.Context, key string, m objects.Manifest) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("objectsddb: delete chunks of %s: %w", key, err)
	}
	reqs := make([]types.WriteRequest, m.Count)
	for i, k := range m.ChunkKeys(key) {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: chunkItemKey(k)}}
	}
	if err := s.batchWrite(ctx, reqs); err != nil {
		return fmt.Errorf("objectsddb: delete %d chunks of %s (write %s): %w", m.Count, key, m.WriteID, err)
	}
	return nil
}

// GetChunks implements objects.Chunks: every chunk, as GetChunkRange
// reads them.
func (s *Store) GetChunks(ctx context.Context, key string, m objects.Manifest) ([][]byte, error) {
	return s.GetChunkRange(ctx, key, m, 0, m.Count)
}

// GetChunkRange implements objects.Chunks: chunks [from, to), with strongly
// consistent BatchGetItem reads (a chunk is written just before the commit
// that references it, and an eventually consistent read could miss it), in
// parallel batches sized so that no response passes DynamoDB's 16 MB. No
// other chunk is asked for. A missing chunk is objects.ErrBlobNotFound.
func (s *Store) GetChunkRange(ctx context.Context, key string, m objects.Manifest, from, to int) ([][]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("objectsddb: get chunks of %s: %w", key, err)
	}
	if from < 0 || to > m.Count || from > to {
		return nil, fmt.Errorf("objectsddb: get chunks [%d, %d) of %s: the manifest has %d", from, to, key, m.Count)
	}
	n := to - from
	keys := make([]objects.ItemKey, n)
	for i := range keys {
		keys[i] = m.ChunkKey(key, from+i)
	}
	out := make([][]byte, n)
	found := make([]bool, n)
	perItem := m.ChunkSize + 2*len(key) + 256 // the payload, its key (twice: pk and the response's) and names
	limit := min(maxBatchGet, max(1, (maxBatchGetOut-64<<10)/perItem))
	err := s.parallel(ctx, batches(n, limit, s.parallelism()), func(ctx context.Context, lo, hi int) error {
		index := make(map[string]int, hi-lo)
		req := make([]map[string]types.AttributeValue, 0, hi-lo)
		for i := lo; i < hi; i++ {
			index[keys[i].PK] = i
			req = append(req, chunkItemKey(keys[i]))
		}
		return s.batchGet(ctx, req, func(item map[string]types.AttributeValue) {
			a := &attrs{m: item}
			if i, ok := index[a.str(attrPK)]; ok {
				out[i], found[i] = a.bytes(attrData), true
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("objectsddb: get %d chunks of %s (write %s): %w", n, key, m.WriteID, err)
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("objectsddb: chunk %s of %s: %w", keys[i].PK, key, objects.ErrBlobNotFound)
		}
	}
	return out, nil
}

// batches cuts n items into ranges [lo, hi) of at most limit items, and
// into at least min(n, parallel) ranges, so that a payload of a few big
// chunks still goes over several connections at once.
func batches(n, limit, parallel int) [][2]int {
	if n == 0 {
		return nil
	}
	count := max((n+limit-1)/limit, min(n, parallel))
	out := make([][2]int, count)
	lo := 0
	for i := range out {
		size := n / count
		if i < n%count {
			size++
		}
		out[i] = [2]int{lo, lo + size}
		lo += size
	}
	return out
}

// parallel runs fn over the ranges, at most Parallelism at a time. The first
// error cancels the others and is returned.
func (s *Store) parallel(ctx context.Context, ranges [][2]int, fn func(ctx context.Context, lo, hi int) error) error {
	if len(ranges) == 1 {
		return fn(ctx, ranges[0][0], ranges[0][1])
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, s.parallelism())
	var wg sync.WaitGroup
	for _, r := range ranges {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, r[0], r[1]); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// batchWrite writes the requests with BatchWriteItem in parallel batches,
// each retrying its unprocessed items with backoff, up to MaxBatchAttempts
// requests.
func (s *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	return s.parallel(ctx, batches(len(reqs), maxBatchWrite, s.parallelism()), func(ctx context.Context, lo, hi int) error {
		pending := reqs[lo:hi]
		for attempt := 1; len(pending) > 0; attempt++ {
			if attempt > s.maxBatchAttempts() {
				return fmt.Errorf("%d items still unprocessed after %d requests: %w", len(pending), attempt-1, objects.ErrThrottled)
			}
			if attempt > 1 {
				if err := s.pause(ctx, attempt-1); err != nil {
					return err
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: pending}})
			if err != nil {
				return classify(err)
			}
			pending = out.UnprocessedItems[s.table]
		}
		return nil
	})
}

// batchGet reads the keys with BatchGetItem (strongly consistent; the key
// and data only), retrying unprocessed keys with backoff, and hands each
// item to got.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, got func(map[string]types.AttributeValue)) error {
	ka := types.KeysAndAttributes{Keys: keys, ProjectionExpression: aws.String("#pk, #data"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#data": attrData}}
	return batchGetItems(ctx, s.db, s.table, ka, s.maxBatchAttempts(), s.Backoff, func(item map[string]types.AttributeValue) error {
		got(item)
		return nil
	})
}

// batchGetItems reads ka's keys of table with strongly consistent
// BatchGetItem requests, sending the keys DynamoDB leaves unprocessed
// again with backoff, up to attempts requests, and hands each item to got.
func batchGetItems(ctx context.Context, db API, table string, ka types.KeysAndAttributes, attempts int, backoff retry.Backoff,
	got func(map[string]types.AttributeValue) error) error {
	ka.ConsistentRead = aws.Bool(true)
	for attempt := 1; len(ka.Keys) > 0; attempt++ {
		if attempt > attempts {
			return fmt.Errorf("%d keys still unprocessed after %d requests: %w", len(ka.Keys), attempt-1, objects.ErrThrottled)
		}
		if attempt > 1 {
			if err := backoff.Wait(ctx, attempt-1); err != nil {
				return err
			}
		}
		out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: ka}})
		if err != nil {
			return classify(err)
		}
		for _, item := range out.Responses[table] {
			if err := got(item); err != nil {
				return err
			}
		}
		ka.Keys = out.UnprocessedKeys[table].Keys
	}
	return nil
}
