package objectsddb

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

var _ objects.SweepTable = (*Refs)(nil)

// attrUnreferencedSince is set on a chunk item by a sweep that found no
// manifest naming it (MarkChunk): chunk items carry no time of their own,
// and the mark is an upper bound of the time the chunk was written.
const attrUnreferencedSince = "unreferencedSince"

// Refs reads the table's references for the orphan sweeper and for
// objects.Check (objects.SweepTable).
type Refs struct {
	db    *dynamodb.Client
	table string
	// Segments is how many parallel scan segments read the table
	// (default 4).
	Segments int
	// PageSize bounds the items of one scan page (0: DynamoDB's 1 MB pages).
	PageSize int32
}

// NewRefs returns a reader of the table's references.
func NewRefs(db *dynamodb.Client, table string) *Refs {
	return &Refs{db: db, table: table, Segments: 4}
}

// Scan implements objects.RefScanner. It reads every item of the table with a strongly consistent, parallel
// Scan that projects only the keys and the references (the payloads stay
// on the server; DynamoDB still bills the whole items), and calls fn for
// each, one call at a time. A reference committed before Scan began is
// seen (consistent reads), unless its item is removed meanwhile.
func (r *Refs) Scan(ctx context.Context, fn func(objects.ItemRef)) error {
	// The keys and the references only, with the blob's key and the
	// manifest's count (nested paths).
	proj := expression.NamesList(expression.Name(attrPK), expression.Name(attrSK),
		expression.Name(attrBlob+"."+attrKey), expression.Name(attrManifest+"."+attrCount),
		expression.Name(attrWriteID), expression.Name(attrUnreferencedSince), expression.Name(attrVersion), expression.Name(attrDeleted),
		// shared blobs' heads and reference records
		expression.Name(attrState), expression.Name(attrGen), expression.Name(attrToken), expression.Name(attrSince), expression.Name(attrKey))
	expr, err := expression.NewBuilder().WithProjection(proj).Build()
	if err != nil {
		return fmt.Errorf("objectsddb: scan %s: %w", r.table, err)
	}
	in := dynamodb.ScanInput{
		TableName:                aws.String(r.table),
		ProjectionExpression:     expr.Projection(),
		ExpressionAttributeNames: expr.Names(),
	}
	if r.PageSize > 0 {
		in.Limit = aws.Int32(r.PageSize)
	}
	var mu sync.Mutex
	err = parallelScan(ctx, r.db, in, r.Segments, func(items []map[string]types.AttributeValue) error {
		entries := make([]objects.ItemRef, 0, len(items))
		for _, item := range items {
			if e, ok := entry(item); ok {
				entries = append(entries, e)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range entries {
			fn(e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("objectsddb: scan %s: %w", r.table, err)
	}
	return nil
}

// parallelScan reads the table of in with a strongly consistent Scan in
// segments (at least 1) read in parallel, and calls page with each page's
// items, from several goroutines at once. The first error stops every
// segment and is returned.
func parallelScan(ctx context.Context, db dynamodb.ScanAPIClient, in dynamodb.ScanInput, segments int, page func([]map[string]types.AttributeValue) error) error {
	segments = max(segments, 1)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for seg := range segments {
		wg.Go(func() {
			in := in
			in.ConsistentRead = aws.Bool(true)
			in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(segments))
			p := dynamodb.NewScanPaginator(db, &in)
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err == nil {
					err = page(out.Items)
				} else {
					err = classify(err)
				}
				if err != nil {
					cancel(fmt.Errorf("segment %d: %w", seg, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// entry reads a projected item; ok is false for an item without a string
// key (never written by us).
func entry(item map[string]types.AttributeValue) (objects.ItemRef, bool) {
	a := &attrs{m: item}
	e := objects.ItemRef{PK: a.str(attrPK), SK: a.str(attrSK)}
	if a.err != nil || e.PK == "" {
		return objects.ItemRef{}, false
	}
	// Sort keys tell the kinds apart: an object's key may look like any
	// other partition key ("blob#…", "upload#…", "a#w1#00000"), but its
	// items' sort keys are always versions'.
	if e.SK == HeadSortKey || strings.HasPrefix(e.SK, refSortPrefix) {
		return sharedEntry(a, e.PK, e.SK)
	}
	if e.SK == objects.ChunkSortKey {
		c, ok := objects.ParseChunkKey(e.PK)
		if !ok {
			return objects.ItemRef{}, false
		}
		e.Chunk = &c
		if t := a.str(attrUnreferencedSince); t != "" {
			if at, err := time.Parse(time.RFC3339Nano, t); err == nil {
				e.UnreferencedSince = at
			}
		}
		return e, true
	}
	e.Version, e.WriteID, e.Deleted = a.num(attrVersion), a.str(attrWriteID), a.bool(attrDeleted)
	if b, ok := a.sub(attrBlob); ok {
		e.BlobKey = b.str(attrKey)
	}
	if m, ok := a.sub(attrManifest); ok {
		e.Manifest = &objects.Manifest{WriteID: a.str(attrWriteID), Count: int(m.num(attrCount))}
	}
	return e, true
}

// MarkChunk records on a chunk item that a sweep found no manifest naming
// it, at the time at (taken after the scan read it). An item already
// marked, or gone, is left as it is; marked reports whether this call set
// the mark.
func (r *Refs) MarkChunk(ctx context.Context, pk string, at time.Time) (marked bool, err error) {
	_, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.table),
		Key:                       key(pk, objects.ChunkSortKey),
		UpdateExpression:          aws.String("SET #u = :t"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#u)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#u": attrUnreferencedSince},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": str(at.UTC().Format(time.RFC3339Nano))},
	})
	if awserr.IsConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("objectsddb: mark chunk %s: %w", pk, classify(err))
	}
	return true, nil
}

// DeleteChunk deletes a chunk item if it still carries the mark a scan
// read (so a chunk rewritten since is kept); deleted is false otherwise.
func (r *Refs) DeleteChunk(ctx context.Context, pk string, markedAt time.Time) (deleted bool, err error) {
	_, err = r.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(r.table),
		Key:                       key(pk, objects.ChunkSortKey),
		ConditionExpression:       aws.String("#u = :t"),
		ExpressionAttributeNames:  map[string]string{"#u": attrUnreferencedSince},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": str(markedAt.UTC().Format(time.RFC3339Nano))},
	})
	if awserr.IsConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("objectsddb: delete chunk %s: %w", pk, classify(err))
	}
	return true, nil
}
