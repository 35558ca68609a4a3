package objectsddb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

func TestChunksRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		chunkSize int
	}{
		{"no chunks", 0, 1 * KB},
		{"one short chunk", 100, 1 * KB},
		{"three chunks", 2*KB + 1, 1 * KB},
		{"more than a batch of 25, in parallel batches", 60*KB + 5, 1 * KB},
		{"twenty chunks of 256 KB", 5 * MB, 256 * KB},
		{"the largest chunk the policy allows", objects.MaxItemBytes - 160 - objects.MaxKeyBytes, objects.MaxItemBytes - 160 - objects.MaxKeyBytes},
	}
	s, db := newStore(t)
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := random(tt.size, uint64(i))
			m, chunks, err := objects.Split(data, tt.chunkSize, fmt.Sprint("w", i))
			if err != nil {
				t.Fatal(err)
			}
			key := tt.name
			if err := s.PutChunks(ctx, key, m, chunks); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetChunks(ctx, key, m)
			if err != nil {
				t.Fatal(err)
			}
			joined, err := objects.Join(m, got)
			if err != nil || !bytes.Equal(joined, data) {
				t.Fatalf("joined %d bytes, %v; want the %d bytes written", len(joined), err, len(data))
			}
			if m.Count > 0 {
				k := m.ChunkKey(key, m.Count-1)
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: chunkItemKey(k)}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.GetChunks(ctx, key, m); !errors.Is(err, objects.ErrBlobNotFound) {
					t.Errorf("a missing chunk: %v, want ErrBlobNotFound", err)
				}
			}
			for range 2 { // missing chunks are no error
				if err := s.DeleteChunks(ctx, key, m); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if items := scan(t, db, s.table); len(items) != 0 {
		t.Errorf("%d items left after deleting every chunk", len(items))
	}
	if err := s.PutChunks(ctx, "k", objects.Manifest{WriteID: "w", Count: 2, ChunkSize: 1, Size: 2}, [][]byte{{1}}); err == nil {
		t.Error("PutChunks took 1 chunk for a manifest of 2")
	}
	if _, err := s.GetChunks(ctx, "k", objects.Manifest{WriteID: "w", Count: 3, ChunkSize: 1, Size: 2}); err == nil {
		t.Error("GetChunks took an inconsistent manifest")
	}
}

// partialAPI forwards only the first item or key of each batch and hands
// the rest back as unprocessed, as DynamoDB does under load; with stuck
// set it processes nothing.
type partialAPI struct {
	API
	stuck bool

	mu     sync.Mutex
	writes int
	gets   int
}

func (p *partialAPI) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	p.mu.Lock()
	p.writes++
	p.mu.Unlock()
	out := &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{}}
	for table, reqs := range in.RequestItems {
		if p.stuck {
			out.UnprocessedItems[table] = reqs
			continue
		}
		if _, err := p.API.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs[:1]}}, opts...); err != nil {
			return nil, err
		}
		if len(reqs) > 1 {
			out.UnprocessedItems[table] = reqs[1:]
		}
	}
	return out, nil
}

func (p *partialAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	p.mu.Lock()
	p.gets++
	p.mu.Unlock()
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}, UnprocessedKeys: map[string]types.KeysAndAttributes{}}
	for table, ka := range in.RequestItems {
		if p.stuck {
			out.UnprocessedKeys[table] = ka
			continue
		}
		first := ka
		first.Keys = ka.Keys[:1]
		res, err := p.API.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: first}}, opts...)
		if err != nil {
			return nil, err
		}
		out.Responses[table] = res.Responses[table]
		if len(ka.Keys) > 1 {
			rest := ka
			rest.Keys = ka.Keys[1:]
			out.UnprocessedKeys[table] = rest
		}
	}
	return out, nil
}

// Unprocessed items and keys are retried until done, within
// MaxBatchAttempts requests per batch; past that the call is throttled.
func TestUnprocessedItemsAreRetried(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	data := random(8*KB, 1)
	m, chunks, _ := objects.Split(data, KB, "w1")

	slow := &partialAPI{API: s.db}
	ss := *s
	ss.db, ss.Parallelism, ss.MaxBatchAttempts = slow, 1, 8 // one batch of 8: 8 requests, each doing one item
	if err := ss.PutChunks(ctx, "k", m, chunks); err != nil {
		t.Fatal(err)
	}
	got, err := ss.GetChunks(ctx, "k", m)
	if err != nil {
		t.Fatal(err)
	}
	if joined, err := objects.Join(m, got); err != nil || !bytes.Equal(joined, data) {
		t.Fatalf("read back %v", err)
	}
	if slow.writes != 8 || slow.gets != 8 {
		t.Errorf("%d write and %d get requests, want 8 and 8", slow.writes, slow.gets)
	}

	ss.MaxBatchAttempts = 7
	if err := ss.PutChunks(ctx, "k2", m, chunks); !errors.Is(err, objects.ErrThrottled) {
		t.Errorf("8 items one at a time in 7 requests: %v, want ErrThrottled", err)
	}
	stuck := &partialAPI{API: s.db, stuck: true}
	ss.db, ss.MaxBatchAttempts = stuck, 3
	if _, err := ss.GetChunks(ctx, "k", m); !errors.Is(err, objects.ErrThrottled) {
		t.Errorf("keys never processed: %v, want ErrThrottled", err)
	}
	if err := ss.DeleteHistory(ctx, "k", []int64{1, 2}); !errors.Is(err, objects.ErrThrottled) {
		t.Errorf("deletes never processed: %v, want ErrThrottled", err)
	}
	if stuck.gets != 3 || stuck.writes != 3 {
		t.Errorf("%d get and %d write requests, want 3 each", stuck.gets, stuck.writes)
	}
}
