package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchddb"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// benchSearch measures the objects' search flow on the local stack
// (ZincSearch behind the search proxy): the indexer's documents per second
// on a backlog beside the engine's own ceiling, bulk requests per 1,000
// changes, a reindex against the plain bulk load of the same documents
// with searches running through the switch, the write → searchable lag at
// a steady rate, and replays of older changes, which must move nothing
// back.
func benchSearch(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	b, err := newSearchBench(ctx, env, scale)
	if err != nil {
		return nil, err
	}
	defer b.close()
	for _, step := range []func(context.Context) error{
		b.load,     // 1. n objects into the table, the indexer held
		b.ceilingA, // 2. the engine's ceiling: a plain loader, the template's batches
		b.drain,    // 3. the indexer released on the backlog
		b.ceilingB, // 4. the plain loader again, in the indexer's own batches
		b.reindex,  // 5. the same n objects reindexed, searches running
		b.paced,    // 6. 1,000 changes a second through the stream
		b.lag,      // 7. write → searchable at a steady rate, through the API
		b.replay,   // 8. older changes sent again, then the index verified against the table
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return b.report(), nil
}

// searchCores is the cores the search engine runs on (-search-cores): one,
// as an OpenSearch domain runs on nodes of its own. On every core of this
// machine, the engine would lose CPU to what feeds it (DynamoDB Local
// serving the stream, the functions, the bench), and the indexer's rate
// against the plain loader's would measure the shared machine.
var searchCores = 1

// searchIndexer is the indexer's logical id in the template.
const searchIndexer = "SearchIndexerFunction"

// searchBench is one run of benchSearch: its inputs, then what each step
// measured, in the order the steps fill it in.
type searchBench struct {
	env    *stack.Env
	scale  float64
	n      int // objects loaded at first
	run    string
	table  string
	items  *objectsddb.Store
	store  *objects.Store
	engine *searchos.Engine
	client *objectsclient.Client
	recs   []objects.Record // every key's latest record, as written, by number
	batch  int              // the indexer's event source BatchSize (stream records)
	// perBatch is the changes a full batch carries: BatchSize when the
	// event source's filter passes only v0 records, half of it when the
	// indexer also receives each change's history item.
	perBatch int
	filter   string   // the event source's filter patterns, as the report names them
	held     []func() // releases of the other stream readers, held for the section
	// releaseIndexer releases the indexer, held by load until drain.
	releaseIndexer func()

	loadBefore string // the machine's load average when the section began
	loadTook   time.Duration
	meanBytes  int64 // of the loaded documents
	ceilings   []ceilingRun
	drained    drainRun
	reindexed  reindexRun
	pacedRun   pacedRun
	probes     []lagProbe
	lagBegan   time.Time
	lagLooks   []float64 // the lag watch's searches, seconds each
	// The lag watch's searches the engine failed, and the first error.
	lagFailed  int
	lagFailure string
	// Probes searched by their own word after the lag run, and found.
	wordsChecked, wordsFound int
	replayed                 replayRun
	drift                    search.Drift
}

func newSearchBench(ctx context.Context, env *stack.Env, scale float64) (*searchBench, error) {
	if env.Search == nil {
		return nil, errors.New("search: the local stack runs no search engine (ddbpipe local install builds ZincSearch)")
	}
	alias := env.Vars["SEARCH_INDEX_NAME"]
	engine, err := searchos.FromAWS(env.AWS, "", alias)
	if err != nil {
		return nil, fmt.Errorf("search engine (SEARCH_INDEX_NAME %q): %w", alias, err)
	}
	client, err := objectsclient.NewSigned(env.APIURL, env.AWS, nil)
	if err != nil {
		return nil, err
	}
	db := awsenv.DynamoDB(env.AWS)
	table, bucket := env.Vars["OBJECTS_TABLE_NAME"], env.Vars["OBJECTS_BUCKET_NAME"]
	items := objectsddb.New(db, table)
	items.IndexShards = objects.DefaultIndexShards
	b := &searchBench{
		env: env, scale: scale, n: max(int(20000*scale), 2000),
		run: fmt.Sprintf("search-%d/", time.Now().UnixNano()%1e6), loadBefore: loadAverage(),
		table: table, items: items, engine: engine, client: client,
		store: objectslambda.NewReader(env.AWS, table, bucket, nil),
	}
	if b.batch, b.filter, err = indexerMapping(env); err != nil {
		return nil, err
	}
	b.perBatch = max(b.batch/2, 1)
	if b.filter != "" {
		b.perBatch = b.batch
	}
	// The objects table's other stream readers share two cores with
	// DynamoDB Local and ZincSearch here (on AWS each runs apart): they
	// are held for the section, as votes-ceiling holds the tally, so the
	// indexer and the plain loader are measured on the same quiet machine.
	for _, fn := range []string{"ObjectsReaperFunction", "ArchiverFunction"} {
		release, err := env.Runner.Hold(fn)
		if err != nil {
			b.close()
			return nil, err
		}
		b.held = append(b.held, release)
	}
	return b, nil
}

func (b *searchBench) close() {
	if b.releaseIndexer != nil {
		b.releaseIndexer()
	}
	for _, release := range b.held {
		release()
	}
	b.held = nil
}

// indexerMapping is the BatchSize of the indexer's stream event source,
// and its filter's patterns ("" without one).
func indexerMapping(env *stack.Env) (int, string, error) {
	fns, err := env.Stack.Functions()
	if err != nil {
		return 0, "", err
	}
	for _, f := range fns {
		if f.LogicalID != searchIndexer {
			continue
		}
		for _, ev := range f.Events {
			if ev.Type == "DynamoDB" {
				if n := atoi(ev.Properties["BatchSize"]); n > 0 {
					return n, strings.Join(cfn.FilterPatterns(ev.Properties), " or "), nil
				}
			}
		}
	}
	return 0, "", fmt.Errorf("template: %s or its DynamoDB event is missing", searchIndexer)
}

// searchWords are the words the bench's documents are made of.
var searchWords = strings.Fields("invoice order receipt shipment contract report memo ledger manifest quote statement summary")

// newRecords makes the version 1 records of objects from to from+n: small
// text/plain documents stored inline, each with the word searchbench and
// a few of searchWords.
func (b *searchBench) newRecords(from, n int) []objects.Record {
	now := time.Now().UTC()
	out := make([]objects.Record, n)
	for j := range out {
		i := from + j
		body := fmt.Appendf(nil, "searchbench %s %d for customer %d: %s, %s and %s",
			searchWords[i%len(searchWords)], i, i%997, searchWords[(i/7)%len(searchWords)], searchWords[(i/11)%len(searchWords)], b.run)
		out[j] = objects.Record{Key: fmt.Sprintf("%sf%d/doc-%07d.txt", b.run, i%10, i), Version: 1, Kind: objects.Inline,
			Size: int64(len(body)), SHA256: objects.SumOf(body), ContentType: "text/plain", Codec: objects.Identity,
			Data: body, WriteID: fmt.Sprintf("sb%d", i), CreatedAt: now}
	}
	return out
}

// documentOf is the document the indexer writes for r: its fields and its
// text, as the indexer reads an inline payload.
func documentOf(r objects.Record) search.Document {
	d := search.DocumentOf(r)
	if d.TextState == "" {
		d.Text, d.TextState = search.Text(r.Data, search.DefaultMaxText)
	}
	return d
}

// load writes n objects as the items a commit writes (v0 and v1) with
// BatchWriteItem, the indexer held: its stream records wait as a backlog.
func (b *searchBench) load(ctx context.Context) error {
	release, err := b.env.Runner.Hold(searchIndexer)
	if err != nil {
		return err
	}
	b.releaseIndexer = release
	b.drained.before = functionStats(b.env.Runner, searchIndexer)
	b.recs = b.newRecords(0, b.n)
	for _, r := range b.recs {
		b.meanBytes += r.Size
	}
	b.meanBytes /= int64(b.n)
	start := time.Now()
	if err := commitRecords(ctx, b.env.Clients.DynamoDB, b.table, b.items, b.recs); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	b.loadTook = time.Since(start)
	fmt.Printf("  search: %d objects loaded in %s\n", b.n, b.loadTook.Round(time.Second))
	return nil
}

// ceilingRun is one plain load of the documents into a fresh index.
type ceilingRun struct {
	label    string
	batches  int
	docs     int
	rate     float64       // documents per second, first to last counted
	span     time.Duration // first to last counted
	took     time.Duration // first request sent to the last document counted
	requests int
	bulks    []float64 // each bulk request's time, seconds
}

// ceilingA is the engine's ceiling before the indexer runs: the template's
// batches, each of the documents a full batch carries.
func (b *searchBench) ceilingA(ctx context.Context) error {
	per := b.perBatch
	var sizes []int
	for left := b.n; left > 0; left -= per {
		sizes = append(sizes, min(per, left))
	}
	return b.ceiling(ctx, fmt.Sprintf("before the indexer, %d documents a bulk", per), sizes)
}

// ceilingB is the engine's ceiling after the indexer ran, in the very
// batch sizes the indexer wrote.
func (b *searchBench) ceilingB(ctx context.Context) error {
	return b.ceiling(ctx, "after the indexer, in its batch sizes", b.drained.batches.sizes())
}

// ceiling sends the documents of the loaded objects into a fresh index,
// one bulk request at a time in batches of sizes, and counts them as the
// drain is counted.
func (b *searchBench) ceiling(ctx context.Context, label string, sizes []int) error {
	name := fmt.Sprintf("%s-ceiling-%d", b.engine.Alias(), len(b.ceilings)+1)
	if err := b.engine.CreateIndex(ctx, name); err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	defer func() { _ = b.engine.DeleteIndex(context.WithoutCancel(ctx), name) }()
	count := counter{url: b.env.Search.URL, index: name}
	docs := make([]search.Op, len(b.recs))
	for i, r := range b.recs {
		docs[i] = search.OpOf(documentOf(r))
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != len(docs) {
		return fmt.Errorf("ceiling %s: batches of %d documents in all, want %d", label, total, len(docs))
	}
	c := ceilingRun{label: label, batches: len(sizes), docs: len(docs)}
	ctx, cancel := context.WithCancel(ctx) // a failed request ends the count
	defer cancel()
	start := time.Now()
	sent := make(chan error, 1)
	go func() {
		from := 0
		for _, s := range sizes {
			began := time.Now()
			out, err := b.engine.Bulk(ctx, name, docs[from:from+s])
			c.bulks = append(c.bulks, time.Since(began).Seconds())
			c.requests++
			if err == nil {
				for i, o := range out {
					if o.Class(docs[from+i]) != search.Done {
						err = fmt.Errorf("document %s: %d %s %s", docs[from+i].Doc.Key, o.Status, o.Type, o.Reason)
						break
					}
				}
			}
			if err != nil {
				sent <- err
				cancel()
				return
			}
			from += s
		}
		sent <- nil
	}()
	counts, err := watchCount(ctx, count, len(docs), b.limit(len(docs)))
	if serr := <-sent; serr != nil {
		return fmt.Errorf("ceiling %s: %w", label, serr)
	}
	if err != nil {
		return fmt.Errorf("ceiling %s: %w", label, err)
	}
	c.took = counts[len(counts)-1].at.Sub(start)
	var ok bool
	if c.rate, c.span, ok = drainRate(counts, 0); !ok {
		return fmt.Errorf("ceiling %s: too few counts to time (%d documents)", label, len(docs))
	}
	b.ceilings = append(b.ceilings, c)
	fmt.Printf("  search: ceiling %s: %.0f documents/s (a bulk p50 %.3f s)\n", label, c.rate, percentile(c.bulks, 50))
	return nil
}

// limit is how long n documents may take to be counted.
func (b *searchBench) limit(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*10*time.Millisecond
}

// drainRun is the indexer on the backlog.
type drainRun struct {
	rate        float64
	span, took  time.Duration
	batches     indexerBatches
	records     int // stream records delivered to the indexer
	invocations int
	busy        time.Duration // the indexer's invocations, summed
	before      runner.Stats  // the indexer's, before the load
}

// drain releases the indexer on the backlog of n objects (2n stream
// records) and counts the documents through the search alias.
func (b *searchBench) drain(ctx context.Context) error {
	alias := counter{url: b.env.Search.URL, index: b.engine.Alias()}
	base, err := alias.count(ctx)
	if err != nil {
		return err
	}
	from := time.Now()
	b.releaseIndexer()
	counts, err := watchCount(ctx, alias, base+b.n, b.limit(b.n))
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	d := &b.drained
	d.took = counts[len(counts)-1].at.Sub(from)
	var ok bool
	if d.rate, d.span, ok = drainRate(counts, base); !ok {
		return fmt.Errorf("drain: too few counts to time (%d documents)", b.n)
	}
	d.batches = stackLog.waitIndexer(from, b.n)
	after := functionStats(b.env.Runner, searchIndexer)
	d.records, d.invocations = after.Records-d.before.Records, after.Invocations-d.before.Invocations
	d.busy = after.Total - d.before.Total
	fmt.Printf("  search: the indexer drained %d documents at %.0f/s (its invocations ran %s of it)\n", b.n, d.rate, d.busy.Round(100*time.Millisecond))
	return nil
}

// commitRecords writes each record as the items a commit writes (v0 with
// its index key, and the version's item), 12 objects (24 items) per
// BatchWriteItem, 8 batches at a time, sending again what DynamoDB leaves
// unprocessed.
func commitRecords(ctx context.Context, db *dynamodb.Client, table string, items *objectsddb.Store, recs []objects.Record) error {
	const perBatch = 12
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				from := int(next.Add(perBatch)) - perBatch
				if from >= len(recs) {
					return
				}
				var writes []ddbtypes.WriteRequest
				for _, r := range recs[from:min(from+perBatch, len(recs))] {
					latest, version := items.CommitItems(r)
					writes = append(writes, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: latest}}, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: version}})
				}
				if err := batchWrite(ctx, db, table, writes); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// tableOf is the objects table as the search flow reads it.
func (b *searchBench) tableOf() searchddb.Table {
	return searchddb.New(awsenv.DynamoDB(b.env.AWS), b.table)
}
