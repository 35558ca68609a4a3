package objectsddb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

// Shared blobs' records (objects.SharedRecords) live in the objects table,
// one partition per shared blob:
//
//	pk = blob#<sha256>-<size>   sk = h                       the head
//	pk = blob#<sha256>-<size>   sk = r#<hash of key>#<writeID>  a reference record
//
// The partition key is the blob's key without "blobs/", behind "blob#".
// An object key may be that very string (keys hold any character), so the
// sort keys tell the items apart: an object's items are versions ("v…"),
// a chunk's "c", an upload's "u", and these "h" and "r#…", so no item is
// two things; neither sort key is a version's, so the reaper skips these
// items on the stream. Head attributes:
//
//	state      S  live | deleting | gone
//	gen        N  incremented by every change of state
//	token      S  deleting: the mark's holder
//	since      N  deleting: when it was marked, epoch milliseconds
//	expiresAt  N  gone: the table's TTL removes the head then (epoch seconds)
//
// A reference record holds key (S), writeId (S), version (N) and createdAt
// (S): the version item it stands for. It is written by the version's
// commit, in its transaction (Store.Commit with a claim).
const (
	SharedPartitionPrefix = "blob#"
	HeadSortKey           = "h"
	refSortPrefix         = "r#"

	attrState     = "state"
	attrGen       = "gen"
	attrToken     = "token"
	attrSince     = "since"
	attrExpiresAt = "expiresAt"
)

var _ objects.SharedRecords = (*Shared)(nil)

// Shared keeps the heads and reference records of shared blobs.
type Shared struct {
	db    *dynamodb.Client
	table string
}

// NewShared returns the shared blobs' records of the objects table.
func NewShared(db *dynamodb.Client, table string) *Shared { return &Shared{db: db, table: table} }

// sharedPK is a shared blob's partition key.
func sharedPK(blobKey string) string {
	return SharedPartitionPrefix + strings.TrimPrefix(blobKey, objects.BlobPrefix)
}

// blobKeyOf is the blob key of a shared blob's partition; ok is false for
// any other partition.
func blobKeyOf(pk string) (string, bool) {
	rest, ok := strings.CutPrefix(pk, SharedPartitionPrefix)
	if !ok || !objects.IsShared(objects.BlobPrefix+rest) {
		return "", false
	}
	return objects.BlobPrefix + rest, true
}

func headKey(blobKey string) map[string]types.AttributeValue {
	return key(sharedPK(blobKey), HeadSortKey)
}

func refItemKey(blobKey, objectKey, writeID string) map[string]types.AttributeValue {
	return key(sharedPK(blobKey), objects.RefSortKey(objectKey, writeID))
}

// refItem is the reference record a commit writes.
func refItem(r objects.Record) map[string]types.AttributeValue {
	item := refItemKey(r.Blob.Key, r.Key, r.WriteID)
	item[attrKey] = str(r.Key)
	item[attrWriteID] = str(r.WriteID)
	item[attrVersion] = num(r.Version)
	if !r.CreatedAt.IsZero() {
		item[attrCreatedAt] = str(r.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	return item
}

// claimActions are a commit's actions on a shared blob (after v0 and vN):
// the head held to the claim (a condition check when it was live; made
// live, a new generation, when it was absent or gone), then the reference
// record.
func (s *Store) claimActions(r objects.Record, c objects.BlobClaim) []types.TransactWriteItem {
	names := map[string]string{"#gen": attrGen, "#state": attrState}
	head := types.TransactWriteItem{}
	if c.Head.State == objects.BlobLive {
		head.ConditionCheck = &types.ConditionCheck{
			TableName: aws.String(s.table), Key: headKey(r.Blob.Key),
			ConditionExpression:      aws.String("#gen = :g AND #state = :live"),
			ExpressionAttributeNames: names,
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":g": num(c.Head.Gen), ":live": str(string(objects.BlobLive)),
			},
		}
	} else {
		cond := "#gen = :g AND #state = :gone"
		values := map[string]types.AttributeValue{
			":g": num(c.Head.Gen), ":g1": num(c.Head.Gen + 1),
			":live": str(string(objects.BlobLive)), ":gone": str(string(objects.BlobGone)),
		}
		if c.Head.Gen == 0 {
			cond = "attribute_not_exists(#pk)"
			names["#pk"] = attrPK
			delete(values, ":g")
			delete(values, ":gone")
		}
		names["#token"], names["#since"], names["#exp"] = attrToken, attrSince, attrExpiresAt
		head.Update = &types.Update{
			TableName: aws.String(s.table), Key: headKey(r.Blob.Key),
			UpdateExpression:          aws.String("SET #state = :live, #gen = :g1 REMOVE #token, #since, #exp"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		}
	}
	return []types.TransactWriteItem{head, {Put: &types.Put{TableName: aws.String(s.table), Item: refItem(r)}}}
}

// BlobHead implements objects.SharedRecords: one strongly consistent
// GetItem.
func (s *Shared) BlobHead(ctx context.Context, blobKey string) (objects.BlobHead, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: headKey(blobKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return objects.BlobHead{}, fmt.Errorf("objectsddb: head of %s: %w", blobKey, classify(err))
	}
	h := objects.BlobHead{Key: blobKey}
	if out.Item == nil {
		return h, nil
	}
	a := &attrs{m: out.Item}
	h.State, h.Gen, h.Token = objects.BlobState(a.str(attrState)), a.num(attrGen), a.str(attrToken)
	if ms := a.num(attrSince); ms > 0 {
		h.Since = time.UnixMilli(ms).UTC()
	}
	if a.err != nil {
		return objects.BlobHead{}, fmt.Errorf("objectsddb: head of %s: %w", blobKey, a.err)
	}
	return h, nil
}

// Referenced implements objects.SharedRecords: a strongly consistent
// Query of one reference record.
func (s *Shared) Referenced(ctx context.Context, blobKey string) (bool, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :r)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(sharedPK(blobKey)), ":r": str(refSortPrefix),
		},
		ProjectionExpression: aws.String("#pk"),
		ConsistentRead:       aws.Bool(true),
		Limit:                aws.Int32(1),
	})
	if err != nil {
		return false, fmt.Errorf("objectsddb: references of %s: %w", blobKey, classify(err))
	}
	return len(out.Items) > 0, nil
}

// DropRef implements objects.SharedRecords: one DeleteItem.
func (s *Shared) DropRef(ctx context.Context, blobKey, objectKey, writeID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: refItemKey(blobKey, objectKey, writeID)})
	if err != nil {
		return fmt.Errorf("objectsddb: drop reference %s of %s to %s: %w", writeID, objectKey, blobKey, classify(err))
	}
	return nil
}

// DropStaleRef implements objects.SharedRecords: a strongly consistent
// GetItem of the version item, then, if it does not hold the write, a
// DeleteItem of the record.
func (s *Shared) DropStaleRef(ctx context.Context, ref objects.SharedRef) (bool, error) {
	if ref.Version < 1 || ref.Version > objects.MaxVersion {
		return false, fmt.Errorf("objectsddb: reference %s of %s: version %d is out of range", ref.WriteID, ref.Key, ref.Version)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: versionKey(ref.Key, ref.Version), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#w"), ExpressionAttributeNames: map[string]string{"#w": attrWriteID},
	})
	if err != nil {
		return false, fmt.Errorf("objectsddb: version %d of %s: %w", ref.Version, ref.Key, classify(err))
	}
	if out.Item != nil {
		a := &attrs{m: out.Item}
		if a.str(attrWriteID) == ref.WriteID {
			return false, nil
		}
	}
	if err := s.DropRef(ctx, ref.BlobKey, ref.Key, ref.WriteID); err != nil {
		return false, err
	}
	return true, nil
}

// MarkBlob implements objects.SharedRecords: one conditional UpdateItem.
func (s *Shared) MarkBlob(ctx context.Context, blobKey, token string, now, staleBefore time.Time) (bool, error) {
	return s.update(ctx, "mark", blobKey,
		"SET #state = :deleting, #token = :token, #since = :now, #gen = if_not_exists(#gen, :zero) + :one REMOVE #exp",
		"attribute_not_exists(#pk) OR #state <> :deleting OR #since < :stale",
		map[string]string{"#pk": attrPK, "#state": attrState, "#token": attrToken, "#since": attrSince, "#gen": attrGen, "#exp": attrExpiresAt},
		map[string]types.AttributeValue{
			":deleting": str(string(objects.BlobDeleting)), ":token": str(token), ":now": num(now.UnixMilli()),
			":zero": num(0), ":one": num(1), ":stale": num(staleBefore.UnixMilli()),
		})
}

// UnmarkBlob implements objects.SharedRecords.
func (s *Shared) UnmarkBlob(ctx context.Context, blobKey, token string) (bool, error) {
	return s.update(ctx, "unmark", blobKey,
		"SET #state = :live, #gen = #gen + :one REMOVE #token, #since",
		"#state = :deleting AND #token = :token",
		map[string]string{"#state": attrState, "#token": attrToken, "#since": attrSince, "#gen": attrGen},
		map[string]types.AttributeValue{
			":live": str(string(objects.BlobLive)), ":deleting": str(string(objects.BlobDeleting)), ":token": str(token), ":one": num(1),
		})
}

// ForgetBlob implements objects.SharedRecords.
func (s *Shared) ForgetBlob(ctx context.Context, blobKey, token string, expires time.Time) (bool, error) {
	return s.update(ctx, "forget", blobKey,
		"SET #state = :gone, #gen = #gen + :one, #exp = :exp REMOVE #token, #since",
		"#state = :deleting AND #token = :token",
		map[string]string{"#state": attrState, "#token": attrToken, "#since": attrSince, "#gen": attrGen, "#exp": attrExpiresAt},
		map[string]types.AttributeValue{
			":gone": str(string(objects.BlobGone)), ":deleting": str(string(objects.BlobDeleting)), ":token": str(token),
			":one": num(1), ":exp": num(expires.Unix()),
		})
}

// update applies one conditional change of a head; ok is false when the
// condition failed.
func (s *Shared) update(ctx context.Context, what, blobKey, update, cond string, names map[string]string, values map[string]types.AttributeValue) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: headKey(blobKey),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if awserr.IsConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("objectsddb: %s head of %s: %w", what, blobKey, classify(err))
	}
	return true, nil
}

// sharedEntry reads a shared blob's projected item for the sweeper; ok is
// false when the item is not one.
func sharedEntry(a *attrs, pk, sk string) (objects.ItemRef, bool) {
	blobKey, ok := blobKeyOf(pk)
	if !ok {
		return objects.ItemRef{}, false
	}
	e := objects.ItemRef{PK: pk, SK: sk}
	switch {
	case sk == HeadSortKey:
		h := objects.BlobHead{Key: blobKey, State: objects.BlobState(a.str(attrState)), Gen: a.num(attrGen), Token: a.str(attrToken)}
		if ms := a.num(attrSince); ms > 0 {
			h.Since = time.UnixMilli(ms).UTC()
		}
		e.SharedHead = &h
	case strings.HasPrefix(sk, refSortPrefix):
		e.SharedRef = &objects.SharedRef{BlobKey: blobKey, Key: a.str(attrKey), WriteID: a.str(attrWriteID), Version: a.num(attrVersion)}
	default:
		return objects.ItemRef{}, false
	}
	return e, a.err == nil
}
