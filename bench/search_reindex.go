package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchlambda"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// reindexRun is a reindex of the loaded objects with searches running.
type reindexRun struct {
	res    search.ReindexResult
	settle time.Duration
	// took runs from Run's start to the switch of the aliases: from then
	// on the search alias names the new index, refreshed with every
	// document (Run waits until the engine counts them all before it
	// switches), as the plain loader's time runs to its last document
	// counted. whole runs on to the end of Run: the old index's deletion
	// after a linger for the searches still reading it, and the count
	// through the alias after.
	took, whole time.Duration
	// Searches through the objects API while the reindex ran, and those
	// begun after its last document was written: during the switch of the
	// aliases and the old index's deletion.
	searches, failed, empty                   int
	switchSearches, switchFailed, switchEmpty int
	failures                                  []string // the first few failed or empty answers
	answers                                   []searchAnswer
	// When Run began, and when its last document was written.
	began, lastWrite time.Time
}

// reindex rebuilds the index from the table (the n objects loaded, as the
// plain loader sent them) while a searcher keeps asking the objects API for
// one object after another by a word of its key.
func (b *searchBench) reindex(ctx context.Context) error {
	r := &b.reindexed
	r.settle = searchos.TargetsTTL() + time.Second
	var lastWrite atomic.Int64
	rx := &search.Reindex{
		Indexes: b.engine, Table: b.tableOf(), Payloads: b.store,
		Name:     b.engine.Alias() + "-" + time.Now().UTC().Format("20060102t150405"),
		Settle:   r.settle,
		Progress: func(search.ReindexProgress) { lastWrite.Store(time.Now().UnixNano()) },
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	r.began = start
	wg.Go(func() { b.searchDuring(ctx, stop, r) })
	res, err := rx.Run(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	r.res = res
	r.lastWrite = time.Unix(0, lastWrite.Load())
	r.count()
	counts, err := watchCount(ctx, counter{url: b.env.Search.URL, index: b.engine.Alias()}, b.n, b.limit(b.n))
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	r.took, r.whole = res.Switched, counts[len(counts)-1].at.Sub(start)
	fmt.Printf("  search: reindexed %d objects in %s (%s with the old index's deletion); %d searches, %d failed, %d empty (at the switch: %d, %d, %d) %q\n", res.Scanned, r.took.Round(time.Millisecond), r.whole.Round(time.Millisecond),
		r.searches, r.failed, r.empty, r.switchSearches, r.switchFailed, r.switchEmpty, r.failures)
	return nil
}

// searchDuring searches the objects API until stop, one search at a time,
// and keeps when each began and what it got.
func (b *searchBench) searchDuring(ctx context.Context, stop <-chan struct{}, r *reindexRun) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		// One object by a word of its key (its number): a search the
		// engine answers quickly, which must always find it.
		word := fmt.Sprintf("%07d", i%b.n)
		began := time.Now()
		res, err := b.client.Search(ctx, word, objectsclient.SearchOptions{Limit: 1})
		a := searchAnswer{began: began, word: word, err: err}
		a.empty = err == nil && (res.Total == 0 || len(res.Hits) == 0)
		r.answers = append(r.answers, a)
		select {
		case <-stop:
			return
		case <-time.After(time.Until(began.Add(reindexSearchEvery))):
		}
	}
}

// reindexSearchEvery paces the searches during a reindex: often enough to
// see the switch (a hundred or more of them in its seconds), not so often
// that they take the two cores from the engine the reindex is measured on
// (unpaced, the searcher sent about 350 a second).
const reindexSearchEvery = 50 * time.Millisecond

// searchAnswer is one search during the reindex.
type searchAnswer struct {
	began time.Time
	word  string
	err   error
	empty bool
}

// count sorts the searches into those before and after the last document
// was written, and keeps the first few failed or empty ones.
func (r *reindexRun) count() {
	for _, a := range r.answers {
		atSwitch := a.began.After(r.lastWrite)
		r.searches++
		if atSwitch {
			r.switchSearches++
		}
		if a.err == nil && !a.empty {
			continue
		}
		what := "empty"
		if a.err != nil {
			what = a.err.Error()
			r.failed++
			if atSwitch {
				r.switchFailed++
			}
		} else {
			r.empty++
			if atSwitch {
				r.switchEmpty++
			}
		}
		if len(r.failures) < 5 {
			r.failures = append(r.failures, fmt.Sprintf("%s at %s (a search for %s)", what, a.began.Sub(r.began).Round(time.Millisecond), a.word))
		}
	}
}

// replayRun is what older changes sent again did.
type replayRun struct {
	records, changes int
	batch            searchlambda.Batch
	since            int // of the replayed changes' keys, those written again since
	tombstones       int // stale deletes sent
	tombstoneOut     map[search.Class]int
	movedBack        int // keys the replays wrote that the index then held older than the table, or lost
	verifyTook       time.Duration
}

// replay sends older changes again once newer ones are indexed: the first
// batch of the objects table's stream (version 1 of the first objects,
// some of them written again by the lag run) through the indexer's own
// code, and deletes at version 1 of the keys the lag run wrote again (a
// tombstone arriving late) through the engine. Then it verifies the index
// against the table, key by key.
func (b *searchBench) replay(ctx context.Context) error {
	p := &b.replayed
	recs, arn, err := b.firstStreamBatch(ctx)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	ev, err := ddbstream.LambdaEvent(recs, arn, b.env.AWS.Region)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	h := &searchlambda.Indexer{
		Indexer: &search.Indexer{Index: b.engine, Payloads: b.store, Target: b.engine.WriteAlias(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
	}
	p.records = len(ev.Records)
	p.batch = h.Index(ctx, ev.Records)
	if p.batch.Err != nil {
		return fmt.Errorf("replay: the indexer: %w", p.batch.Err)
	}
	p.changes = p.batch.Changes
	version := make(map[string]int64, len(b.recs))
	for _, r := range b.recs {
		version[r.Key] = r.Version
	}
	touched := map[string]bool{} // the keys the replays write
	for _, r := range ev.Records {
		item, err := ddbstream.LambdaToDynamo(r.Change.NewImage)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if rec, ok, err := objectsddb.LatestRecord(item); err == nil && ok {
			touched[rec.Key] = true
			if version[rec.Key] > rec.Version {
				p.since++
			}
		}
	}

	// Late tombstones: deletes at version 1 of keys now at version 2 or more.
	var ops []search.Op
	for _, pr := range b.probes {
		if version[pr.key] > 1 && len(ops) < 1000 {
			ops = append(ops, search.OpOf(search.Document{Key: pr.key, Version: 1, Deleted: true}))
			touched[pr.key] = true
		}
	}
	p.tombstones = len(ops)
	p.tombstoneOut = map[search.Class]int{}
	if len(ops) > 0 {
		out, err := b.engine.Bulk(ctx, b.engine.WriteAlias(), ops)
		if err != nil {
			return fmt.Errorf("replay: late tombstones: %w", err)
		}
		for i, o := range out {
			p.tombstoneOut[o.Class(ops[i])]++
		}
	}

	start := time.Now()
	d, err := search.Verify(ctx, b.tableOf(), b.engine)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	p.verifyTook = time.Since(start)
	b.drift = d
	for _, m := range d.Behind {
		if touched[m.Key] {
			p.movedBack++
		}
	}
	for _, e := range d.Missing {
		if touched[e.Key] {
			p.movedBack++
		}
	}
	fmt.Printf("  search: replayed %d changes and %d late tombstones; %d moved back; verify: %d keys drift\n", p.changes, p.tombstones, p.movedBack, d.Count())
	return nil
}

// firstStreamBatch reads the objects table's stream from its start: one
// batch of the indexer's size, as its event source would read it.
func (b *searchBench) firstStreamBatch(ctx context.Context) ([]streamtypes.Record, string, error) {
	d, err := b.env.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(b.table)})
	if err != nil {
		return nil, "", err
	}
	arn := aws.ToString(d.Table.LatestStreamArn)
	s, err := b.env.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		return nil, "", err
	}
	if len(s.StreamDescription.Shards) == 0 {
		return nil, "", fmt.Errorf("stream %s has no shard", arn)
	}
	it, err := b.env.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
		ShardId: s.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return nil, "", err
	}
	var recs []streamtypes.Record
	iter := it.ShardIterator
	for len(recs) < b.batch && iter != nil {
		out, err := b.env.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(b.batch - len(recs)))})
		if err != nil {
			return nil, "", err
		}
		if len(out.Records) == 0 {
			break
		}
		recs = append(recs, out.Records...)
		iter = out.NextShardIterator
	}
	return recs, arn, nil
}
