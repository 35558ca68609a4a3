package objectsddb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

// sizeOf is an item's size by DynamoDB's published rules: names and
// values, strings in UTF-8 bytes, numbers about one byte per two
// significant digits plus one, maps three bytes plus one per element. It
// only guides the search of measure.
func sizeOf(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		digits := len(strings.Trim(strings.TrimLeft(v.Value, "-"), "0"))
		return (digits+1)/2 + 1
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		return 3 + sizeOf(v.Value) + len(v.Value)
	}
	panic("unexpected attribute value")
}

// measure returns an item's size as DynamoDB Local counts it: the item is
// padded with a binary attribute until the table refuses it, and the size
// is what the largest accepted padding leaves of the limit.
func measure(t *testing.T, db *dynamodb.Client, table string, item map[string]types.AttributeValue) int {
	t.Helper()
	const pad = "pad"
	fits := func(p int) bool {
		padded := make(map[string]types.AttributeValue, len(item)+1)
		for k, v := range item {
			padded[k] = v
		}
		padded[pad] = &types.AttributeValueMemberB{Value: make([]byte, p)}
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: padded})
		if err != nil && !awserr.Is(err, "ValidationException") {
			t.Fatalf("PutItem: %v", err)
		}
		return err == nil
	}
	hint := objects.MaxItemBytes - len(pad) - sizeOf(item)
	lo, hi := hint, hint+1 // lo fits, hi does not
	for step := 16; !fits(lo); step *= 2 {
		hi, lo = lo, max(lo-step, 0)
	}
	for step := 16; fits(hi); step *= 2 {
		lo, hi = hi, hi+step
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return objects.MaxItemBytes - len(pad) - lo
}

// The items this store writes stay within the sizes the domain's placement
// estimates (objects.ItemOverhead and Policy.Place), measured by what
// DynamoDB Local accepts at the 400 KB limit, with the longest key, content
// type and write id the domain allows; and an inline version at the
// largest size the estimate allows commits, while one byte past the real
// limit is refused as not applied.
func TestItemSizesWithinTheDomainEstimates(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	long := strings.Repeat("é", objects.MaxKeyBytes/2)                             // 1,024 bytes
	longCT := "application/" + strings.Repeat("x", objects.MaxContentTypeBytes-12) // 255 bytes
	writeID := strings.Repeat("z", 64)
	at := time.Date(2026, 12, 31, 23, 59, 59, 123456789, time.UTC)
	sum := objects.SumOf([]byte("document"))
	const payload = 1000 // bytes of data in the inline and chunk items measured

	type keyCase struct{ name, key, ct string }
	keys := []keyCase{{"longest key and content type", long, longCT}, {"short key", "a", "text/plain"}}
	for _, kc := range keys {
		policy := objects.Policy{}
		s3Place, err := policy.Place(MB, nil, objects.PlaceOptions{Key: kc.key, ContentType: kc.ct})
		if err != nil || s3Place.Kind != objects.InS3 {
			t.Fatalf("placement %+v, %v", s3Place, err)
		}
		chunkPlace, err := policy.Place(MB, nil, objects.PlaceOptions{Key: kc.key, ContentType: kc.ct, KeepInTable: true})
		if err != nil || chunkPlace.Kind != objects.Chunked {
			t.Fatalf("placement %+v, %v", chunkPlace, err)
		}
		overhead := objects.ItemOverhead(kc.key, kc.ct)
		base := objects.Record{
			Key: kc.key, Version: objects.MaxVersion, Size: objects.DefaultMaxSize, SHA256: sum,
			ContentType: kc.ct, Codec: objects.Identity, WriteID: writeID, CreatedAt: at,
		}
		withKind := func(k objects.Kind, change func(*objects.Record)) objects.Record {
			r := base
			r.Kind = k
			if change != nil {
				change(&r)
			}
			return r
		}
		chunkM := objects.Manifest{WriteID: writeID, Count: objects.MaxChunks, ChunkSize: objects.DefaultChunkSize, Size: objects.DefaultChunkedMax, SHA256: sum}
		// v0 as a commit writes it, with the listing index's attribute:
		// a few bytes over vN (its sort key is shorter, but listShard is
		// added), so the larger of the two.
		latest := func(r objects.Record) map[string]types.AttributeValue {
			return s.indexed(encode(r, objects.LatestSortKey), r)
		}
		tests := []struct {
			name     string
			item     map[string]types.AttributeValue
			data     int // payload bytes in the item
			estimate int // the domain's estimate of the item without its payload
		}{
			{"inline", latest(withKind(objects.Inline, func(r *objects.Record) { r.Data = make([]byte, payload) })), payload, overhead},
			{"inline history", encode(withKind(objects.Inline, func(r *objects.Record) { r.Data = make([]byte, payload) }), objects.SortKey(objects.MaxVersion)), payload, overhead},
			{"compressed inline", latest(withKind(objects.CompressedInline, func(r *objects.Record) { r.Data, r.Codec = make([]byte, payload), objects.Gzip })), payload, overhead},
			{"chunked manifest", latest(withKind(objects.Chunked, func(r *objects.Record) { r.Manifest, r.Codec = &chunkM, objects.Gzip })), 0, chunkPlace.ItemBytes},
			{"chunked manifest with chunk digests", latest(withKind(objects.Chunked, func(r *objects.Record) {
				m := objects.Manifest{WriteID: writeID, Count: chunkPlace.Chunks, ChunkSize: chunkPlace.ChunkSize, Size: int64(chunkPlace.StoredSize), SHA256: sum,
					Sums: make([]objects.Sum, chunkPlace.Chunks)}
				r.Manifest = &m
			})), 0, chunkPlace.ItemBytes},
			{"s3 reference", latest(withKind(objects.InS3, func(r *objects.Record) {
				r.Blob = &objects.BlobRef{
					Bucket: strings.Repeat("b", 63), Key: objects.BlobKey(kc.key, writeID), VersionID: strings.Repeat("v", 32),
					Size: objects.DefaultMaxSize, SHA256: sum, ContentType: kc.ct, Codec: objects.Identity,
				}
			})), 0, s3Place.ItemBytes},
			{"tombstone", encode(objects.Record{Key: kc.key, Version: objects.MaxVersion, Deleted: true, CreatedAt: at}, objects.LatestSortKey), 0, overhead},
			{"chunk", func() map[string]types.AttributeValue {
				item := chunkItemKey(chunkM.ChunkKey(kc.key, objects.MaxChunks-1))
				item[attrData] = &types.AttributeValueMemberB{Value: make([]byte, payload)}
				return item
			}(), payload, chunkPlace.ChunkItemBytes - chunkPlace.ChunkSize},
		}
		for _, tt := range tests {
			t.Run(kc.name+"/"+tt.name, func(t *testing.T) {
				real := measure(t, db, s.table, tt.item) - tt.data
				if real > tt.estimate {
					t.Errorf("the item without its payload is %d bytes, over the domain's estimate of %d", real, tt.estimate)
				}
				t.Logf("%d bytes without the payload; the estimate is %d (margin %d); the published rules say %d", real, tt.estimate, tt.estimate-real, sizeOf(tt.item)-tt.data)
			})
		}

		t.Run(kc.name+"/commit at the limit", func(t *testing.T) {
			key := kc.key
			// The commit writes v0 and v1; v1's sort key is the longer. The
			// records differ only in their data (numbers are sized by
			// their digits, so the size is the same in all).
			record := func(data []byte) objects.Record {
				return withKind(objects.Inline, func(r *objects.Record) { r.Version, r.Size, r.Data = 1, 123456, data })
			}
			realOverhead := max(
				measure(t, db, s.table, encode(record(make([]byte, payload)), objects.SortKey(1))),
				measure(t, db, s.table, latest(record(make([]byte, payload)))),
			) - payload
			for _, tc := range []struct {
				name string
				data int
				ok   bool
			}{
				{"the largest payload the estimate allows", objects.MaxItemBytes - overhead, true},
				{"the largest payload the table takes", objects.MaxItemBytes - realOverhead, true},
				{"one byte more", objects.MaxItemBytes - realOverhead + 1, false},
			} {
				for _, old := range scan(t, db, s.table) { // the items measure left, and earlier commits
					db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: map[string]types.AttributeValue{attrPK: old[attrPK], attrSK: old[attrSK]}})
				}
				err := s.Commit(ctx, objects.Commit{Record: record(make([]byte, tc.data))})
				if tc.ok && err != nil {
					t.Errorf("%s (%d bytes): %v", tc.name, tc.data, err)
				}
				if !tc.ok && (!errors.Is(err, objects.ErrNotApplied) || errors.Is(err, objects.ErrConflict)) {
					t.Errorf("%s (%d bytes): %v, want ErrNotApplied", tc.name, tc.data, err)
				}
				_, ok, _ := s.Item(ctx, key, 0)
				if ok != tc.ok {
					t.Errorf("%s: committed %t, want %t", tc.name, ok, tc.ok)
				}
			}
		})
	}
}
