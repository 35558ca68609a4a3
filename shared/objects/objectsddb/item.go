package objectsddb

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// Attribute names (see the package documentation).
const (
	attrPK          = "pk"
	attrSK          = "sk"
	attrVersion     = "version"
	attrKind        = "kind"
	attrSize        = "size"
	attrSHA256      = "sha256"
	attrContentType = "contentType"
	attrCodec       = "codec"
	attrData        = "data"
	attrManifest    = "manifest"
	attrBlob        = "blob"
	attrWriteID     = "writeId"
	attrCreatedAt   = "createdAt"
	attrDeleted     = "deleted"

	// in manifest
	attrCount     = "count"
	attrChunkSize = "chunkSize"
	attrSums      = "sums" // the chunks' SHA-256s, 32 bytes each, in order
	// in blob (with size, sha256, contentType, codec)
	attrBucket    = "bucket"
	attrKey       = "key"
	attrVersionID = "versionId"
)

// metaAttrs are the attributes a listing reads: all but data.
var metaAttrs = []string{
	attrPK, attrSK, attrVersion, attrKind, attrSize, attrSHA256, attrContentType, attrCodec,
	attrManifest, attrBlob, attrWriteID, attrCreatedAt, attrDeleted,
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk), attrSK: str(sk)}
}

func versionKey(objectKey string, version int64) map[string]types.AttributeValue {
	return key(objectKey, objects.SortKey(version))
}

// setStr sets a string attribute unless it is empty.
func setStr(m map[string]types.AttributeValue, name, v string) {
	if v != "" {
		m[name] = str(v)
	}
}

// encode is the item of a version record under sort key sk.
func encode(r objects.Record, sk string) map[string]types.AttributeValue {
	item := key(r.Key, sk)
	item[attrVersion] = num(r.Version)
	if r.Deleted {
		item[attrDeleted] = &types.AttributeValueMemberBOOL{Value: true}
	}
	setStr(item, attrKind, string(r.Kind))
	if r.Kind != "" {
		item[attrSize] = num(r.Size)
		item[attrSHA256] = str(r.SHA256.String())
	}
	setStr(item, attrContentType, r.ContentType)
	setStr(item, attrCodec, string(r.Codec))
	if len(r.Data) > 0 {
		item[attrData] = &types.AttributeValueMemberB{Value: r.Data}
	}
	if m := r.Manifest; m != nil {
		mm := map[string]types.AttributeValue{
			attrCount: num(int64(m.Count)), attrChunkSize: num(int64(m.ChunkSize)),
			attrSize: num(m.Size), attrSHA256: str(m.SHA256.String()),
		}
		if len(m.Sums) > 0 {
			sums := make([]byte, 0, len(m.Sums)*len(objects.Sum{}))
			for _, c := range m.Sums {
				sums = append(sums, c[:]...)
			}
			mm[attrSums] = &types.AttributeValueMemberB{Value: sums}
		}
		item[attrManifest] = &types.AttributeValueMemberM{Value: mm}
	}
	if b := r.Blob; b != nil {
		bm := map[string]types.AttributeValue{attrSize: num(b.Size), attrSHA256: str(b.SHA256.String())}
		setStr(bm, attrBucket, b.Bucket)
		setStr(bm, attrKey, b.Key)
		setStr(bm, attrVersionID, b.VersionID)
		if b.ContentType != r.ContentType {
			bm[attrContentType] = str(b.ContentType)
		}
		if b.Codec != r.Codec {
			bm[attrCodec] = str(string(b.Codec))
		}
		item[attrBlob] = &types.AttributeValueMemberM{Value: bm}
	}
	setStr(item, attrWriteID, r.WriteID)
	if !r.CreatedAt.IsZero() {
		item[attrCreatedAt] = str(r.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	return item
}

// attrs reads attributes of one map, remembering the first malformed one.
type attrs struct {
	m    map[string]types.AttributeValue
	path string
	err  error
}

func (a *attrs) fail(name, format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("%s%s: %s", a.path, name, fmt.Sprintf(format, args...))
	}
}

func (a *attrs) str(name string) string {
	switch v := a.m[name].(type) {
	case nil:
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		a.fail(name, "want a string, got %T", v)
	}
	return ""
}

func (a *attrs) num(name string) int64 {
	switch v := a.m[name].(type) {
	case nil:
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			a.fail(name, "want an integer, got %q", v.Value)
		}
		return n
	default:
		a.fail(name, "want a number, got %T", v)
	}
	return 0
}

// time reads an RFC 3339 time, in UTC (zero when absent).
func (a *attrs) time(name string) time.Time {
	s := a.str(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		a.fail(name, "%v", err)
	}
	return t.UTC()
}

// require fails for each of names the item does not hold.
func (a *attrs) require(names ...string) {
	for _, n := range names {
		if _, ok := a.m[n]; !ok {
			a.fail(n, "missing")
		}
	}
}

func (a *attrs) sum(name string) objects.Sum {
	h := a.str(name)
	if h == "" {
		return objects.Sum{}
	}
	s, err := objects.ParseSum(h)
	if err != nil {
		a.fail(name, "%v", err)
	}
	return s
}

func (a *attrs) bytes(name string) []byte {
	switch v := a.m[name].(type) {
	case nil:
	case *types.AttributeValueMemberB:
		return v.Value
	default:
		a.fail(name, "want binary, got %T", v)
	}
	return nil
}

func (a *attrs) bool(name string) bool {
	switch v := a.m[name].(type) {
	case nil:
	case *types.AttributeValueMemberBOOL:
		return v.Value
	default:
		a.fail(name, "want a boolean, got %T", v)
	}
	return false
}

// sub reads a map attribute; ok is false when it is absent.
func (a *attrs) sub(name string) (sub *attrs, ok bool) {
	switch v := a.m[name].(type) {
	case nil:
	case *types.AttributeValueMemberM:
		return &attrs{m: v.Value, path: a.path + name + "."}, true
	default:
		a.fail(name, "want a map, got %T", v)
	}
	return nil, false
}

// errNotVersion marks an item that is not a version item.
var errNotVersion = errors.New("objectsddb: not a version item")

// decode reads a version item. The record's version is the item's version
// attribute; a history item's sort key must name the same version.
func decode(item map[string]types.AttributeValue) (objects.Record, error) {
	a := &attrs{m: item}
	pk, sk := a.str(attrPK), a.str(attrSK)
	if a.err != nil {
		return objects.Record{}, fmt.Errorf("objectsddb: item %q %q: %w", pk, sk, a.err)
	}
	skVersion, err := objects.ParseSortKey(sk)
	if err != nil {
		return objects.Record{}, fmt.Errorf("%w: %q %q", errNotVersion, pk, sk)
	}
	r := objects.Record{
		Key:         pk,
		Version:     a.num(attrVersion),
		Kind:        objects.Kind(a.str(attrKind)),
		Size:        a.num(attrSize),
		SHA256:      a.sum(attrSHA256),
		ContentType: a.str(attrContentType),
		Codec:       objects.Codec(a.str(attrCodec)),
		Data:        a.bytes(attrData),
		WriteID:     a.str(attrWriteID),
		Deleted:     a.bool(attrDeleted),
	}
	if m, ok := a.sub(attrManifest); ok {
		r.Manifest = &objects.Manifest{
			WriteID: r.WriteID, Count: int(m.num(attrCount)), ChunkSize: int(m.num(attrChunkSize)),
			Size: m.num(attrSize), SHA256: m.sum(attrSHA256),
		}
		if raw := m.bytes(attrSums); len(raw) > 0 {
			const n = len(objects.Sum{})
			if len(raw) != n*r.Manifest.Count {
				m.fail(attrSums, "%d bytes for %d chunks, want %d each", len(raw), r.Manifest.Count, n)
			} else {
				r.Manifest.Sums = make([]objects.Sum, r.Manifest.Count)
				for i := range r.Manifest.Sums {
					copy(r.Manifest.Sums[i][:], raw[i*n:])
				}
			}
		}
		if a.err == nil {
			a.err = m.err
		}
	}
	if b, ok := a.sub(attrBlob); ok {
		ref := &objects.BlobRef{
			Bucket: b.str(attrBucket), Key: b.str(attrKey), VersionID: b.str(attrVersionID),
			Size: b.num(attrSize), SHA256: b.sum(attrSHA256),
			ContentType: r.ContentType, Codec: r.Codec,
		}
		if _, ok := b.m[attrContentType]; ok {
			ref.ContentType = b.str(attrContentType)
		}
		if _, ok := b.m[attrCodec]; ok {
			ref.Codec = objects.Codec(b.str(attrCodec))
		}
		if a.err == nil {
			a.err = b.err
		}
		r.Blob = ref
	}
	r.CreatedAt = a.time(attrCreatedAt)
	if a.err == nil && skVersion != 0 && r.Version != skVersion {
		a.fail(attrVersion, "%d under sort key %s", r.Version, sk)
	}
	if a.err != nil {
		return objects.Record{}, fmt.Errorf("objectsddb: item %q %q: %w", pk, sk, a.err)
	}
	return r, nil
}

// HistoryRecord reads the old image of a removed item, as the reaper gets
// it from the table's stream (converted with ddbstream.LambdaToDynamo): ok
// is true for a history item (v1…), whose payload the reaper deletes, and
// false for any other item (v0, a chunk).
func HistoryRecord(image map[string]types.AttributeValue) (r objects.Record, ok bool, err error) {
	r, err = decode(image)
	if errors.Is(err, errNotVersion) {
		return objects.Record{}, false, nil
	}
	if err != nil {
		return objects.Record{}, false, err
	}
	if sk, _ := image[attrSK].(*types.AttributeValueMemberS); sk.Value == objects.LatestSortKey {
		return objects.Record{}, false, nil
	}
	return r, true, nil
}
