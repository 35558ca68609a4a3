package runner

import (
	"context"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Lambda's ParallelizationFactor: "the number of batches to process
// concurrently from each shard" (1–10, default 1), while the order of the
// records of one item (its partition and sort key) is kept. The runner
// does it as Lambda describes it: the shard's reader deals each record by
// its item key to one of N lanes; a lane batches its records (BatchSize,
// MaximumBatchingWindowInSeconds) and delivers them with the stream's
// retry rules (process), one batch at a time. So an item's records reach
// the function in order and never in two batches at once, and a lane that
// retries or bisects holds up its own keys only. The reader runs a few
// reads ahead of its lanes at most (laneDepth); a lane that cannot keep up
// stops the reader, as a stuck batch holds Lambda's shard iterator. The
// shard counts as read to its end when every lane delivered its last
// batch, so its children are not read before.

// laneDepth is how many of the reader's reads a lane may hold unbatched.
const laneDepth = 4

// shardLanes are one shard's lanes.
type shardLanes struct {
	in    []chan []streamRecord
	wg    sync.WaitGroup
	close sync.Once
}

// startLanes starts the shard's Parallelization lanes. ctx is the
// runner's: when it ends, the lanes stop (an invocation that started
// finishes; no retry starts).
func (p *streamPoller) startLanes(ctx context.Context, shard string) *shardLanes {
	l := &shardLanes{in: make([]chan []streamRecord, p.m.Parallelization)}
	for i := range l.in {
		l.in[i] = make(chan []streamRecord, laneDepth)
		l.wg.Go(func() { p.lane(ctx, shard, l.in[i]) })
	}
	return l
}

// deal sends each record to its item key's lane, in the order read; false
// when ctx ended first.
func (l *shardLanes) deal(ctx context.Context, records []streamRecord) bool {
	parts := make([][]streamRecord, len(l.in))
	for _, rec := range records {
		i := laneOf(rec, len(l.in))
		parts[i] = append(parts[i], rec)
	}
	for i, part := range parts {
		if len(part) == 0 {
			continue
		}
		select {
		case l.in[i] <- part:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// finish tells the lanes that no record follows and waits until they
// delivered what they hold (or the runner stopped).
func (l *shardLanes) finish() {
	l.close.Do(func() {
		for _, c := range l.in {
			close(c)
		}
	})
	l.wg.Wait()
}

// laneOf is the lane of a record's item: a hash of its key attributes.
func laneOf(rec streamRecord, n int) int {
	if n <= 1 || rec.Dynamodb == nil {
		return 0
	}
	names := make([]string, 0, len(rec.Dynamodb.Keys))
	for name := range rec.Dynamodb.Keys {
		names = append(names, name)
	}
	sort.Strings(names)
	h := fnv.New32a()
	for _, name := range names {
		h.Write([]byte(name))
		h.Write([]byte{0})
		switch v := rec.Dynamodb.Keys[name].(type) {
		case *streamtypes.AttributeValueMemberS:
			h.Write([]byte{'S'})
			h.Write([]byte(v.Value))
		case *streamtypes.AttributeValueMemberN:
			h.Write([]byte{'N'})
			h.Write([]byte(v.Value))
		case *streamtypes.AttributeValueMemberB:
			h.Write([]byte{'B'})
			h.Write(v.Value)
		}
		h.Write([]byte{0})
	}
	return int(h.Sum32() % uint32(n))
}

// lane batches the records dealt to it as readShard batches a whole
// shard's, and delivers each batch with process before the next.
func (p *streamPoller) lane(ctx context.Context, shard string, in <-chan []streamRecord) {
	batches := batcher{p: p, shard: shard}
	open := true
	take := func(recs []streamRecord, ok bool) {
		if !ok {
			open = false
			return
		}
		batches.add(recs)
	}
	for {
		switch left := batches.due(); {
		case !open || len(batches.buf) >= p.m.BatchSize:
		case len(batches.buf) == 0:
			select {
			case recs, ok := <-in:
				take(recs, ok)
			case <-ctx.Done():
				return
			}
		case left <= 0:
			select { // what the reader sent already joins the batch
			case recs, ok := <-in:
				take(recs, ok)
				continue
			default:
			}
		default:
			select {
			case recs, ok := <-in:
				take(recs, ok)
			case <-time.After(left):
			case <-ctx.Done():
				return
			}
		}
		if !batches.deliver(ctx, !open) || !open && len(batches.buf) == 0 {
			return
		}
	}
}
