package objectsddb

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream/ddbstreamtest"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	doc := []byte("hello, world")
	sum := objects.SumOf(doc)
	stored := objects.SumOf([]byte("stored"))
	tests := []struct {
		name string
		rec  objects.Record
	}{
		{"inline", objects.Record{Key: "a/b", Version: 3, Kind: objects.Inline, Size: 12, SHA256: sum, ContentType: "text/plain", Codec: objects.Identity, Data: doc, WriteID: "w1", CreatedAt: at}},
		{"empty inline", objects.Record{Key: "e", Version: 1, Kind: objects.Inline, Size: 0, SHA256: objects.SumOf(nil), ContentType: "application/octet-stream", Codec: objects.Identity, WriteID: "w2", CreatedAt: at}},
		{"compressed", objects.Record{Key: "c", Version: 9_999_999_999, Kind: objects.CompressedInline, Size: 12, SHA256: sum, ContentType: "application/json", Codec: objects.Gzip, Data: []byte{0x1f, 0x8b}, WriteID: "w3", CreatedAt: at}},
		{"chunked", objects.Record{Key: "relatório", Version: 2, Kind: objects.Chunked, Size: 600 << 10, SHA256: sum, ContentType: "application/octet-stream", Codec: objects.Gzip, WriteID: "w4", CreatedAt: at,
			Manifest: &objects.Manifest{WriteID: "w4", Count: 3, ChunkSize: 256 << 10, Size: 600<<10 - 7, SHA256: stored}}},
		{"s3", objects.Record{Key: "s", Version: 5, Kind: objects.InS3, Size: 20 << 10, SHA256: sum, ContentType: "image/png", Codec: objects.Identity, WriteID: "w5", CreatedAt: at,
			Blob: &objects.BlobRef{Bucket: "objects", Key: objects.BlobKey("s", "w5"), VersionID: "v1", Size: 20 << 10, SHA256: sum, ContentType: "image/png", Codec: objects.Identity}}},
		{"s3 with its own content type and codec", objects.Record{Key: "s", Version: 6, Kind: objects.InS3, Size: 20 << 10, SHA256: sum, ContentType: "image/png", Codec: objects.Identity, WriteID: "w6", CreatedAt: at,
			Blob: &objects.BlobRef{Bucket: "objects", Key: objects.BlobKey("s", "w6"), Size: 9 << 10, SHA256: stored, ContentType: "application/gzip", Codec: objects.Gzip}}},
		{"tombstone", objects.Record{Key: "t", Version: 4, Deleted: true, CreatedAt: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, sk := range []string{objects.LatestSortKey, objects.SortKey(tt.rec.Version)} {
				got, err := decode(encode(tt.rec, sk))
				if err != nil {
					t.Fatalf("%s: %v", sk, err)
				}
				if !reflect.DeepEqual(got, tt.rec) {
					t.Errorf("%s: got %+v, want %+v", sk, got, tt.rec)
				}
				r, ok, err := HistoryRecord(encode(tt.rec, sk))
				if wantOK := sk != objects.LatestSortKey; ok != wantOK || err != nil || ok && !reflect.DeepEqual(r, tt.rec) {
					t.Errorf("HistoryRecord(%s) = %v, %v; want %v", sk, ok, err, wantOK)
				}
			}
		})
	}
}

func TestEncodeLeavesOutEmptyValues(t *testing.T) {
	item := encode(objects.Record{Key: "t", Version: 4, Deleted: true}, objects.LatestSortKey)
	var names []string
	for n := range item {
		names = append(names, n)
	}
	if len(item) != 4 || item[attrData] != nil || item[attrKind] != nil {
		t.Errorf("tombstone item has %v, want pk, sk, version, deleted", names)
	}
	ref := encode(objects.Record{Key: "s", Version: 1, Kind: objects.InS3, ContentType: "a/b", Codec: objects.Identity,
		Blob: &objects.BlobRef{Key: "k", ContentType: "a/b", Codec: objects.Identity}}, "v0")
	blob := ref[attrBlob].(*types.AttributeValueMemberM).Value
	if _, ok := blob[attrContentType]; ok {
		t.Error("the blob reference repeats the record's content type")
	}
	if _, ok := blob[attrCodec]; ok {
		t.Error("the blob reference repeats the record's codec")
	}
}

func TestDecodeRejects(t *testing.T) {
	good := func() map[string]types.AttributeValue {
		return encode(objects.Record{Key: "k", Version: 2, Kind: objects.Inline, ContentType: "a/b", Codec: objects.Identity, Data: []byte("x"),
			SHA256: objects.SumOf([]byte("x")), Size: 1, Manifest: &objects.Manifest{Count: 1}, Blob: &objects.BlobRef{Key: "b"}}, "v0000000002")
	}
	tests := []struct {
		name   string
		change func(map[string]types.AttributeValue)
		want   string // in the error
	}{
		{"version not a number", func(m map[string]types.AttributeValue) { m[attrVersion] = str("2") }, "version: want a number"},
		{"version not an integer", func(m map[string]types.AttributeValue) { m[attrVersion] = &types.AttributeValueMemberN{Value: "2.5"} }, "version: want an integer"},
		{"version not the sort key's", func(m map[string]types.AttributeValue) { m[attrVersion] = num(3) }, "3 under sort key v0000000002"},
		{"bad digest", func(m map[string]types.AttributeValue) { m[attrSHA256] = str("abc") }, "sha256"},
		{"data not binary", func(m map[string]types.AttributeValue) { m[attrData] = str("x") }, "data: want binary"},
		{"deleted not a boolean", func(m map[string]types.AttributeValue) { m[attrDeleted] = str("yes") }, "deleted: want a boolean"},
		{"manifest not a map", func(m map[string]types.AttributeValue) { m[attrManifest] = str("x") }, "manifest: want a map"},
		{"manifest count", func(m map[string]types.AttributeValue) {
			m[attrManifest].(*types.AttributeValueMemberM).Value[attrCount] = str("1")
		}, "manifest.count: want a number"},
		{"blob digest", func(m map[string]types.AttributeValue) {
			m[attrBlob].(*types.AttributeValueMemberM).Value[attrSHA256] = str("zz")
		}, "blob.sha256"},
		{"created at", func(m map[string]types.AttributeValue) { m[attrCreatedAt] = str("yesterday") }, "createdAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := good()
			tt.change(item)
			_, err := decode(item)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "objectsddb: ") {
				t.Errorf("got %v, want an objectsddb error about %q", err, tt.want)
			}
		})
	}
}

func TestHistoryRecordSkipsOtherItems(t *testing.T) {
	tests := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{"chunk", map[string]types.AttributeValue{attrPK: str("k#w1#00000"), attrSK: str(objects.ChunkSortKey), attrData: &types.AttributeValueMemberB{Value: []byte("x")}}},
		{"latest", encode(objects.Record{Key: "k", Version: 3, Deleted: true}, objects.LatestSortKey)},
		{"another item under v", map[string]types.AttributeValue{attrPK: str("k"), attrSK: str("vx")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok, err := HistoryRecord(tt.item); ok || err != nil {
				t.Errorf("got %v, %v; want not a history item", ok, err)
			}
		})
	}
}

func TestBatches(t *testing.T) {
	tests := []struct {
		n, limit, parallel int
		want               string
	}{
		{0, 25, 8, "[]"},
		{1, 25, 8, "[[0 1]]"},
		{3, 25, 8, "[[0 1] [1 2] [2 3]]"},
		{20, 25, 8, "[[0 3] [3 6] [6 9] [9 12] [12 14] [14 16] [16 18] [18 20]]"},
		{60, 25, 2, "[[0 20] [20 40] [40 60]]"},
		{51, 25, 1, "[[0 17] [17 34] [34 51]]"},
	}
	for _, tt := range tests {
		got := batches(tt.n, tt.limit, tt.parallel)
		if s := fmt.Sprint(got); s != tt.want {
			t.Errorf("batches(%d, %d, %d) = %s, want %s", tt.n, tt.limit, tt.parallel, s, tt.want)
		}
	}
}

// The reaper gets removed items as the stream's old images: through the
// Lambda event's attribute values and back, a history item reads the same.
func TestHistoryRecordFromAStreamImage(t *testing.T) {
	sum := objects.SumOf([]byte("x"))
	rec := objects.Record{Key: "k", Version: 7, Kind: objects.InS3, Size: 1, SHA256: sum, ContentType: "a/b", Codec: objects.Identity, WriteID: "w7",
		CreatedAt: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Blob: &objects.BlobRef{Bucket: "b", Key: "blobs/x/w7", VersionID: "v", Size: 1, SHA256: sum, ContentType: "a/b", Codec: objects.Identity}}
	back, err := ddbstream.LambdaToDynamo(ddbstreamtest.Image(t, encode(rec, objects.SortKey(7))))
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := HistoryRecord(back)
	if err != nil || !ok || !reflect.DeepEqual(got, rec) {
		t.Errorf("got %+v %v %v, want %+v", got, ok, err, rec)
	}
}
