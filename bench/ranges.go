package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/bodies"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// chunkReads counts the chunk items a DynamoDB client asks for: every key
// with the chunk sort key in a GetItem or BatchGetItem request (a key sent
// again after DynamoDB left it unprocessed counts again), and every Query
// of a chunk's partition. It sees the requests as the SDK sends them, not
// what the store says it did.
type chunkReads struct{ items, requests atomic.Int64 }

func (c *chunkReads) add(stack *middleware.Stack) error {
	isChunk := func(k map[string]ddbtypes.AttributeValue) bool {
		sk, ok := k["sk"].(*ddbtypes.AttributeValueMemberS)
		return ok && sk.Value == objects.ChunkSortKey
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountChunkReads", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		n := 0
		switch p := in.Parameters.(type) {
		case *dynamodb.GetItemInput:
			if isChunk(p.Key) {
				n = 1
			}
		case *dynamodb.BatchGetItemInput:
			for _, ka := range p.RequestItems {
				for _, k := range ka.Keys {
					if isChunk(k) {
						n++
					}
				}
			}
		case *dynamodb.QueryInput:
			for _, v := range p.ExpressionAttributeValues {
				if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok {
					if _, chunk := objects.ParseChunkKey(s.Value); chunk {
						n = 1
					}
				}
			}
		}
		if n > 0 {
			c.items.Add(int64(n))
			c.requests.Add(1)
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.Before)
}

// benchRanges: 1 KiB ranges of a chunked document, the chunk reads each
// costs, against reading the document whole.
func benchRanges(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	s := &section{title: "Objects: ranges of a chunked document"}
	var reads chunkReads
	cfg := env.AWS.Copy()
	cfg.APIOptions = append(slices.Clone(cfg.APIOptions), reads.add)
	items := objectsddb.New(awsenv.DynamoDB(cfg), env.Vars["OBJECTS_TABLE_NAME"])
	store := &objects.Store{Items: items, Chunks: items, Policy: objects.Policy{}}

	// 4 MiB at small scales, up to the 16 MiB a chunked document may hold.
	size := min(objects.DefaultChunkedMax, max(4<<20, int(16<<20*scale)))
	body := bodies.Random(size, 19)
	key := fmt.Sprintf("bench/ranges/%d/doc.bin", time.Now().UnixNano())
	rec, err := store.Put(ctx, key, body, objects.PutOptions{KeepInTable: true, NoCompress: true})
	if err != nil {
		return nil, fmt.Errorf("put %d bytes: %w", size, err)
	}
	if rec.Kind != objects.Chunked || rec.Manifest == nil || !rec.Manifest.HasSums() {
		return nil, fmt.Errorf("stored as %s (manifest %+v), want chunked with chunk digests", rec.Kind, rec.Manifest)
	}
	m := *rec.Manifest

	n := max(20, int(200*scale))
	ranges := kibRanges(n, size, m)
	perRange := make([]int64, len(ranges))
	lat := make([]time.Duration, len(ranges))
	across := 0
	for i, r := range ranges {
		before := reads.items.Load()
		start := time.Now()
		p, err := store.GetRange(ctx, key, 0, r)
		if err != nil {
			return nil, fmt.Errorf("range %d-%d: %w", r.Start, r.Last(), err)
		}
		lat[i] = time.Since(start)
		perRange[i] = reads.items.Load() - before
		if !bytes.Equal(p.Body, body[r.Start:r.End]) {
			return nil, fmt.Errorf("range %d-%d: the bytes differ from the document's", r.Start, r.Last())
		}
		if from, to := m.ChunkSpan(r); to-from > 1 {
			across++
		}
	}
	worst := slices.Max(perRange)
	var total int64
	for _, v := range perRange {
		total += v
	}
	slices.Sort(lat)

	before := reads.items.Load()
	start := time.Now()
	obj, err := store.Get(ctx, key, 0)
	if err != nil {
		return nil, err
	}
	whole := time.Since(start)
	wholeReads := reads.items.Load() - before
	if !bytes.Equal(obj.Body, body) {
		return nil, fmt.Errorf("the whole read differs from the document")
	}

	s.printf("A %s random document kept in the table (`?placement=table`: %d chunks of %s, each chunk's SHA-256 in the manifest),\n"+
		"read with `Store.GetRange` (the path `GET` with `Range` takes) over DynamoDB Local. Chunk reads are the chunk keys the\n"+
		"SDK sends (GetItem, BatchGetItem, Query), counted by a middleware on the bench's own client, not by the store.\n\n",
		humanBytes(float64(size)), m.Count, humanBytes(float64(m.ChunkSize)))
	s.printf("| read | reads | chunk reads per read (worst) | chunk reads per read (mean) | p50 | p99 |\n|---|---:|---:|---:|---:|---:|\n")
	s.printf("| 1 KiB range (%d random, %d across a chunk boundary) | %d | %d | %.2f | %s | %s |\n", n, across, len(ranges), worst,
		float64(total)/float64(len(ranges)), lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*99/100].Round(100*time.Microsecond))
	s.printf("| the whole document (`Store.Get`) | 1 | %d | %d | %s | |\n\n", wholeReads, wholeReads, whole.Round(time.Millisecond))
	s.printf("Goal: a 1 KiB range of a chunked document of 4 MiB or more: ≤ 2 chunk reads: %s (worst %d, over %d ranges; the\n"+
		"whole document is %d). Each chunk read is verified against its own digest; the chunks a range does not touch are not read.\n",
		verdict(worst <= 2 && size >= 4<<20), worst, len(ranges), m.Count)
	chart := pngchart.Chart{Title: fmt.Sprintf("chunk reads, %s chunked document", humanBytes(float64(size))), Unit: "chunk items"}
	chart.Bars = append(chart.Bars, pngchart.Bar{Label: "1 KiB range (worst)", Value: float64(worst)}, pngchart.Bar{Label: "whole document", Value: float64(wholeReads)})
	s.charts = append(s.charts, chart)
	return s, nil
}

// kibRanges is n 1 KiB ranges at random offsets of a document of size
// bytes, and one across each of its first chunk boundaries (up to 4: the
// worst case, two chunks).
func kibRanges(n, size int, m objects.Manifest) []objects.Range {
	rng := rand.New(rand.NewPCG(7, 11))
	const span = 1 << 10
	ranges := make([]objects.Range, 0, n+4)
	for range n {
		start := rng.Int64N(int64(size - span))
		ranges = append(ranges, objects.Range{Start: start, End: start + span})
	}
	for i := 1; i <= 4 && i < m.Count; i++ {
		b := int64(i * m.ChunkSize)
		ranges = append(ranges, objects.Range{Start: b - span/2, End: b + span/2})
	}
	return ranges
}
