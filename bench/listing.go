package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// benchListing: listing by prefix over the write-sharded index, against a
// Scan of the table for the same answer; a delimiter listing's queries per
// folder; the index's write spread.
func benchListing(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	s := &section{title: "Objects: listing by prefix over the sharded index"}
	// A copy of the objects table's keys and listing index, without its
	// stream: 40,000 writes to the objects table would set the archiver
	// and the reaper reading 40,000 stream records while the sections
	// that follow measure. The index and what a listing reads are the same.
	table, drop, err := scratchCopy(ctx, env.Clients.DynamoDB, env.Vars["OBJECTS_TABLE_NAME"], "listing")
	if err != nil {
		return nil, err
	}
	defer drop()
	shards := objects.DefaultIndexShards
	// 20,000 at scale 1, loaded with BatchWriteItem as the items a commit
	// writes (v0 with its index key, and v1). Not the 100,000:
	// DynamoDB Local's writes slow down as the table grows (5,000 objects
	// load in 7 s, 100,000 had not loaded after 17 minutes), and what a
	// listing reads per 1,000 keys does not depend on how many there are.
	n := max(int(20000*scale), 2000)
	const folders = 10
	run := fmt.Sprintf("list-%d/", time.Now().UnixNano()%1e6)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sf%d/%07d.txt", run, i%folders, i)
	}
	start := time.Now()
	if err := commitKeys(ctx, env, table, shards, keys); err != nil {
		return nil, err
	}
	loaded := time.Since(start)
	s.printf("%d objects of 20 bytes under `%s` in %d folders, each as the two items a commit writes (v0 with its index key, and v1;\n"+
		"loaded with BatchWriteItem in %s on DynamoDB Local, into a copy of the objects table's keys and listing index without\n"+
		"its stream), the index at N = %d shards (the template's default). Read units are\n"+
		"DynamoDB Local's `ConsumedCapacity` of each request.\n\n", n, run, folders, loaded.Round(time.Second), shards)

	// The whole prefix, 1,000 keys a page.
	ix := objectsddb.NewIndex(env.Clients.DynamoDB, table)
	l := &objects.Lister{Index: ix, Shards: shards}
	start = time.Now()
	listed, pages, queries, err := listAll(ctx, l, objects.ListOptions{Prefix: run})
	if err != nil {
		return nil, err
	}
	listTook := time.Since(start)
	listUnits := ix.ReadUnits()
	start = time.Now()
	scanned, scanUnits, err := scanLatest(ctx, env.Clients.DynamoDB, table, run)
	if err != nil {
		return nil, err
	}
	scanTook := time.Since(start)
	slices.Sort(scanned)
	if !slices.Equal(listed, scanned) || len(listed) != n {
		return nil, fmt.Errorf("listing: %d keys listed, %d scanned, %d written: the answers differ", len(listed), len(scanned), n)
	}
	perK := listUnits / float64(n) * 1000
	s.printf("| read | answer | requests | read units | read units per 1,000 keys | wall time |\n|---|---:|---:|---:|---:|---:|\n")
	s.printf("| listing, %d pages of 1,000 | %d keys | %d queries | %.1f | %.1f | %s |\n", pages, len(listed), queries, listUnits, perK, listTook.Round(time.Millisecond))
	s.printf("| Scan of the table, filtered | %d keys | parallel segments | %.1f | %.1f | %s |\n\n", len(scanned), scanUnits, scanUnits/float64(n)*1000, scanTook.Round(time.Millisecond))
	s.printf("Goal: ≤ 25 read units per 1,000 keys listed: %s (%.1f). The listing reads the index's small projection (the key and one\n"+
		"packed attribute: version, size, time, type, SHA-256), eventually consistent, in key order; the Scan reads every item of the table (history, chunks,\n"+
		"other prefixes) and sorts nothing. Both answers are the same %d keys.\n\n", verdict(perK <= 25), perK, n)

	if err := listFolders(ctx, s, env, table, run, folders, n); err != nil {
		return nil, err
	}
	writeSpread(s, shards, max(int(20000*scale), 2000))
	chart := pngchart.Chart{Title: "read units per 1,000 keys: listing vs Scan", Unit: "read units"}
	chart.Bars = append(chart.Bars, pngchart.Bar{Label: "listing (index)", Value: perK}, pngchart.Bar{Label: "Scan (table)", Value: scanUnits / float64(n) * 1000})
	s.charts = append(s.charts, chart)
	return s, nil
}

// listFolders lists one level under the prefix run: its folders, in
// queries that do not grow with the n keys beneath.
func listFolders(ctx context.Context, s *section, env *stack.Env, table, run string, folders, n int) error {
	// One level under the prefix: the folders.
	shards := objects.DefaultIndexShards
	ix2 := objectsddb.NewIndex(env.Clients.DynamoDB, table)
	p, err := (&objects.Lister{Index: ix2, Shards: shards}).List(ctx, objects.ListOptions{Prefix: run, Delimiter: "/"})
	if err != nil {
		return err
	}
	if len(p.Prefixes) != folders {
		return fmt.Errorf("listing: %d folders, want %d", len(p.Prefixes), folders)
	}
	perFolder := float64(p.Queries) / float64(shards) / float64(folders)
	s.printf("With the delimiter `/` at `%s`: %d common prefixes in %d queries over %d shards, %.2f queries per shard per folder\n"+
		"returned (%.1f read units), not proportional to the %d keys beneath. Goal ≤ 3: %s.\n\n",
		run, len(p.Prefixes), p.Queries, shards, perFolder, ix2.ReadUnits(), n, verdict(perFolder <= 3))
	return nil
}

// writeSpread writes how puts PUTs under one prefix spread their index
// entries over the index's shards.
func writeSpread(s *section, shards, puts int) {
	// The index's write spread: each PUT's v0 goes to shard hash(key) mod N.
	perShard := make([]float64, shards)
	for i := range puts {
		perShard[objects.IndexShard(fmt.Sprintf("uploads/2026/11/%07d.bin", i), shards)]++
	}
	hottest := slices.Max(perShard) / float64(puts)
	s.printf("%d PUTs under one prefix (`uploads/2026/11/…`) write their index entries to shard hash(key) mod %d: the hottest\n"+
		"shard takes %.3f of them, goal ≤ 1.5/N = %.3f: %s. One unsharded index key would take every PUT: a GSI partition takes\n"+
		"1,000 write units per second, and DynamoDB throttles the table's own writes when an index cannot keep up, so every\n"+
		"document write of the stack would share 1,000 per second.\n",
		puts, shards, hottest, 1.5/float64(shards), verdict(hottest <= 1.5/float64(shards)))
}

// scratchCopy creates a table with the key schema and secondary indexes of
// table, on demand and without a stream, named <table>-<purpose>-bench;
// drop deletes it.
func scratchCopy(ctx context.Context, db *dynamodb.Client, table, purpose string) (string, func(), error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", nil, fmt.Errorf("scratch copy of %s: %w", table, err)
	}
	t := d.Table
	in := &dynamodb.CreateTableInput{TableName: aws.String(table + "-" + purpose + "-bench"), AttributeDefinitions: t.AttributeDefinitions,
		KeySchema: t.KeySchema, BillingMode: ddbtypes.BillingModePayPerRequest}
	for _, g := range t.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
	}
	for _, l := range t.LocalSecondaryIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, ddbtypes.LocalSecondaryIndex{IndexName: l.IndexName, KeySchema: l.KeySchema, Projection: l.Projection})
	}
	if _, err := db.CreateTable(ctx, in); err != nil {
		return "", nil, fmt.Errorf("scratch copy of %s: %w", table, err)
	}
	name := aws.ToString(in.TableName)
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, time.Minute); err != nil {
		return "", nil, fmt.Errorf("scratch copy of %s: %w", table, err)
	}
	drop := func() {
		_, _ = db.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: in.TableName})
	}
	return name, drop, nil
}

// verdict is a goal's verdict in the report.
func verdict(met bool) string {
	if met {
		return "**met**"
	}
	return "**not met**"
}

// commitKeys writes version 1 of each key as the items a commit writes
// (commitRecords).
func commitKeys(ctx context.Context, env *stack.Env, table string, shards int, keys []string) error {
	items := objectsddb.New(env.Clients.DynamoDB, table)
	items.IndexShards = shards
	body := []byte("twenty bytes of text")
	now := time.Now().UTC()
	recs := make([]objects.Record, len(keys))
	for i, k := range keys {
		recs[i] = objects.Record{Key: k, Version: 1, Kind: objects.Inline, Size: int64(len(body)), SHA256: objects.SumOf(body),
			ContentType: "text/plain", Codec: objects.Identity, Data: body, WriteID: fmt.Sprintf("w%d", i), CreatedAt: now}
	}
	return commitRecords(ctx, env.Clients.DynamoDB, table, items, recs)
}

// batchWrite writes one batch, sending unprocessed items again (with
// backoff: 50 ms doubling to 1 s) until none is left.
func batchWrite(ctx context.Context, db *dynamodb.Client, table string, writes []ddbtypes.WriteRequest) error {
	backoff := retry.Backoff{Base: 50 * time.Millisecond, Max: time.Second}
	for attempt := 0; len(writes) > 0; attempt++ {
		if attempt > 0 {
			if attempt > 20 {
				return fmt.Errorf("batch write: %d items still unprocessed after %d attempts", len(writes), attempt)
			}
			if err := backoff.Wait(ctx, attempt); err != nil {
				return err
			}
		}
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: writes}})
		if err != nil {
			return fmt.Errorf("batch write: %w", err)
		}
		writes = out.UnprocessedItems[table]
	}
	return nil
}

// listAll follows the cursors to the end.
func listAll(ctx context.Context, l *objects.Lister, o objects.ListOptions) (keys []string, pages, queries int, err error) {
	for {
		p, err := l.List(ctx, o)
		if err != nil {
			return nil, 0, 0, err
		}
		pages++
		queries += p.Queries
		for _, e := range p.Entries {
			keys = append(keys, e.Key)
		}
		if p.Cursor == "" {
			return keys, pages, queries, nil
		}
		o.Cursor = p.Cursor
	}
}

// scanLatest answers the same question with a parallel Scan: the live v0
// items whose key starts with prefix.
func scanLatest(ctx context.Context, db *dynamodb.Client, table, prefix string) ([]string, float64, error) {
	const segments = 4
	var mu sync.Mutex
	var keys []string
	var units float64
	var wg sync.WaitGroup
	errs := make([]error, segments)
	for seg := range segments {
		wg.Go(func() {
			p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
				TableName: aws.String(table), Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(segments),
				FilterExpression:          aws.String("begins_with(pk, :p) AND sk = :v0 AND attribute_not_exists(deleted)"),
				ProjectionExpression:      aws.String("pk"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: prefix}, ":v0": &ddbtypes.AttributeValueMemberS{Value: objects.LatestSortKey}},
				ReturnConsumedCapacity:    ddbtypes.ReturnConsumedCapacityTotal,
			})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					errs[seg] = err
					return
				}
				mu.Lock()
				for _, it := range page.Items {
					keys = append(keys, it["pk"].(*ddbtypes.AttributeValueMemberS).Value)
				}
				if cc := page.ConsumedCapacity; cc != nil && cc.CapacityUnits != nil {
					units += *cc.CapacityUnits
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return keys, units, nil
}
