package objectsddb

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// The listing index (objects.Lister): a sparse global secondary index
// holding only v0 items of live objects, those that carry listShard.
//
//	IndexName  "latest"
//	partition  listShard  N  objects.IndexShard(key, IndexShards): a calculated write shard
//	sort       pk         S  the object key
//	projected  lst        B  what a listing returns, packed (INCLUDE)
//
// A commit writes listShard and lst on v0; a tombstone's v0 has neither,
// so a deleted object leaves the index with its v0, and history items
// never enter it.
//
// lst packs the entry a listing returns: uvarint version, uvarint size,
// uvarint createdAt in Unix nanoseconds, the 32 bytes of the SHA-256, then
// the content type. The same fields as v0's own attributes (about 60 bytes
// and the content type instead of about 150 with their names): a listing
// reads index items, and a read unit covers 4 KB of them, so the index item's
// size is what a listing costs.
const (
	IndexName     = "latest"
	attrListShard = "listShard"
	attrListEntry = "lst"
)

// IndexProjection is what the index holds beyond its keys: what a
// listing returns (template.yaml's NonKeyAttributes are the same).
var IndexProjection = []string{attrListEntry}

// indexed adds v0's index attributes to a live version's item.
func (s *Store) indexed(item map[string]types.AttributeValue, r objects.Record) map[string]types.AttributeValue {
	if !r.Deleted {
		item[attrListShard] = num(int64(objects.IndexShard(r.Key, s.IndexShards)))
		item[attrListEntry] = &types.AttributeValueMemberB{Value: packEntry(r)}
	}
	return item
}

// packEntry is lst: the listing entry of a live version.
func packEntry(r objects.Record) []byte {
	b := make([]byte, 0, 3*binary.MaxVarintLen64+len(r.SHA256)+len(r.ContentType))
	b = binary.AppendUvarint(b, uint64(r.Version))
	b = binary.AppendUvarint(b, uint64(r.Size))
	var at uint64 // 0: no time (a record always has one once committed)
	if !r.CreatedAt.IsZero() && r.CreatedAt.UnixNano() > 0 {
		at = uint64(r.CreatedAt.UnixNano())
	}
	b = binary.AppendUvarint(b, at)
	b = append(b, r.SHA256[:]...)
	return append(b, r.ContentType...)
}

// unpackEntry reads lst into e (the key comes from the index's sort key).
func unpackEntry(b []byte, e *objects.Entry) error {
	var fields [3]uint64
	for i := range fields {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("%s: field %d is not a varint", attrListEntry, i)
		}
		fields[i], b = v, b[n:]
	}
	if len(b) < len(e.SHA256) || fields[0] > math.MaxInt64 || fields[1] > math.MaxInt64 || fields[2] > math.MaxInt64 {
		return fmt.Errorf("%s: truncated or out of range", attrListEntry)
	}
	e.Version, e.Size = int64(fields[0]), int64(fields[1])
	if fields[2] > 0 {
		e.Modified = time.Unix(0, int64(fields[2])).UTC()
	}
	copy(e.SHA256[:], b)
	e.ContentType = string(b[len(e.SHA256):])
	return nil
}

// Index reads the listing index; it implements objects.Index.
type Index struct {
	db    *dynamodb.Client
	table string
	// milliUnits adds up the read capacity the queries consumed, as
	// DynamoDB reports it (ReturnConsumedCapacity): what listings cost.
	milliUnits atomic.Int64
}

// ReadUnits is the read capacity the index's queries have consumed.
func (ix *Index) ReadUnits() float64 { return float64(ix.milliUnits.Load()) / 1000 }

var _ objects.Index = (*Index)(nil)

// NewIndex returns the listing index of the objects table.
func NewIndex(db *dynamodb.Client, table string) *Index { return &Index{db: db, table: table} }

// Range implements objects.Index with one Query on the shard: the key
// condition is the range (BETWEEN when it has an end, inclusive, so the
// bounds it must leave out are dropped here). Index reads are eventually
// consistent (a GSI has no other kind): a listing may miss a write of the
// last moments, as S3's listings once did.
func (ix *Index) Range(ctx context.Context, shard int, from objects.Bound, to string, limit int) ([]objects.Entry, bool, error) {
	names := map[string]string{"#s": attrListShard}
	vals := map[string]types.AttributeValue{":s": num(int64(shard))}
	cond := "#s = :s"
	if to != "" || from.Key != "" {
		names["#k"] = attrPK
	}
	switch {
	case to != "":
		cond += " AND #k BETWEEN :from AND :to"
		vals[":from"], vals[":to"] = str(from.Key), str(to)
	case from.Key != "" && from.Inclusive:
		cond += " AND #k >= :from"
		vals[":from"] = str(from.Key)
	case from.Key != "":
		cond += " AND #k > :from"
		vals[":from"] = str(from.Key)
	}
	out, err := ix.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(ix.table), IndexName: aws.String(IndexName),
		KeyConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
		Limit:                  aws.Int32(int32(limit + 2)), // room for the two bounds BETWEEN includes
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, false, fmt.Errorf("objectsddb: query %s shard %d: %w", IndexName, shard, classify(err))
	}
	if cc := out.ConsumedCapacity; cc != nil && cc.CapacityUnits != nil {
		ix.milliUnits.Add(int64(*cc.CapacityUnits * 1000))
	}
	entries := make([]objects.Entry, 0, len(out.Items))
	for _, item := range out.Items {
		e, err := decodeEntry(item)
		if err != nil {
			return nil, false, err
		}
		if e.Key == from.Key && !from.Inclusive || to != "" && e.Key >= to {
			continue
		}
		entries = append(entries, e)
	}
	more := out.LastEvaluatedKey != nil
	if len(entries) > limit {
		entries, more = entries[:limit], true
	}
	return entries, more, nil
}

// decodeEntry reads an index item: its key and its packed entry.
func decodeEntry(item map[string]types.AttributeValue) (objects.Entry, error) {
	a := &attrs{m: item}
	a.require(attrListEntry)
	e := objects.Entry{Key: a.str(attrPK)}
	packed := a.bytes(attrListEntry)
	if a.err == nil {
		a.err = unpackEntry(packed, &e)
	}
	if a.err != nil {
		return objects.Entry{}, fmt.Errorf("objectsddb: index item %q: %w", e.Key, a.err)
	}
	return e, nil
}
