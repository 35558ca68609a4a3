package objectsddb

import (
	"context"
	"fmt"
	"sync/atomic"

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
//	projected  version, size, createdAt, contentType, sha256 (INCLUDE)
//
// A commit writes listShard on v0; a tombstone's v0 has none, so a deleted
// object leaves the index with its v0, and history items never enter it.
const (
	IndexName     = "latest"
	attrListShard = "listShard"
)

// IndexProjection is what the index holds beyond its keys: what a
// listing returns (template.yaml's NonKeyAttributes are the same).
var IndexProjection = []string{attrVersion, attrSize, attrCreatedAt, attrContentType, attrSHA256}

// indexed adds v0's index attribute to a live version's item.
func (s *Store) indexed(item map[string]types.AttributeValue, r objects.Record) map[string]types.AttributeValue {
	if !r.Deleted {
		item[attrListShard] = num(int64(objects.IndexShard(r.Key, s.IndexShards)))
	}
	return item
}

// QueryAPI is the part of the DynamoDB client a listing uses.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Index reads the listing index; it implements objects.Index.
type Index struct {
	db    QueryAPI
	table string
	// milliUnits adds up the read capacity the queries consumed, as
	// DynamoDB reports it (ReturnConsumedCapacity): what listings cost.
	milliUnits atomic.Int64
}

// ReadUnits is the read capacity the index's queries have consumed.
func (ix *Index) ReadUnits() float64 { return float64(ix.milliUnits.Load()) / 1000 }

var _ objects.Index = (*Index)(nil)

// NewIndex returns the listing index of the objects table.
func NewIndex(db QueryAPI, table string) *Index { return &Index{db: db, table: table} }

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

// decodeEntry reads an index item: every projected attribute is required.
func decodeEntry(item map[string]types.AttributeValue) (objects.Entry, error) {
	a := &attrs{m: item}
	a.require(IndexProjection...)
	e := objects.Entry{
		Key: a.str(attrPK), Version: a.num(attrVersion), Size: a.num(attrSize), Modified: a.time(attrCreatedAt),
		ContentType: a.str(attrContentType), SHA256: a.sum(attrSHA256),
	}
	if a.err != nil {
		return objects.Entry{}, fmt.Errorf("objectsddb: index item %q: %w", e.Key, a.err)
	}
	return e, nil
}
