package archiveddb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

var _ archive.Leases = (*Leases)(nil)

// Leases keeps the months' retirement leases in the counters table, beside
// the tally's checkpoints the retirement reads: one item per ledger table,
// pk = LeasePK(table), sk = "lease", written only with conditions on its
// run id, so at most one run holds a month at a time. The item carries
// the holder in words, the run id, since, the step reached, the expiry
// (expires: Unix milliseconds, compared in the conditions; expiresAt:
// RFC 3339, for a reader) and ttl: a lease a crashed run left behind
// goes a week after it lapsed. It implements archive.Leases.
//
// A lease is taken with a PutItem unless another run's lease is live,
// renewed with an UpdateItem and released with a DeleteItem while the run
// still holds it; a refused condition returns the item that refused it
// (ReturnValuesOnConditionCheckFailure), which says who holds the month.
// The expiry is compared with the caller's clock: runs' clocks must agree
// far better than the lease's length (minutes), as NTP-synced ones do.
type Leases struct {
	DB    *dynamodb.Client
	Table string // the counters table
}

// LeasePK is the partition key of a ledger table's retirement lease.
func LeasePK(table string) string { return "rotation#" + table }

// leaseSK is the lease item's sort key.
const leaseSK = "lease"

// ttlAfterLapse is how long a lapsed lease is kept before TTL removes it.
const ttlAfterLapse = 7 * 24 * time.Hour

func leaseKey(table string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: LeasePK(table)},
		"sk": &types.AttributeValueMemberS{Value: leaseSK},
	}
}

func millis(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// leaseItem is the item of l.
func leaseItem(l archive.Lease) map[string]types.AttributeValue {
	item := leaseKey(l.Table)
	item["table"] = str(l.Table)
	item["holder"] = str(l.Holder)
	item["run"] = str(l.Run)
	item["since"] = str(l.Since.UTC().Format(time.RFC3339Nano))
	item["step"] = str(string(l.Step))
	item["expires"] = millis(l.Expires)
	item["expiresAt"] = str(l.Expires.UTC().Format(time.RFC3339))
	item["ttl"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(l.Expires.Add(ttlAfterLapse).Unix(), 10)}
	return item
}

// leaseOf reads a lease item (zero for none).
func leaseOf(item map[string]types.AttributeValue) archive.Lease {
	if len(item) == 0 {
		return archive.Lease{}
	}
	s := func(k string) string {
		v, _ := item[k].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	l := archive.Lease{Table: s("table"), Holder: s("holder"), Run: s("run"), Step: archive.Step(s("step"))}
	l.Since, _ = time.Parse(time.RFC3339Nano, s("since"))
	if n, ok := item["expires"].(*types.AttributeValueMemberN); ok {
		if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			l.Expires = time.UnixMilli(ms).UTC()
		}
	}
	return l
}

// refused returns the item a refused condition returned, and whether err
// is such a refusal.
func refused(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, false
	}
	return ccf.Item, true
}

// Take writes l unless another run's lease of the month is live at now.
func (s *Leases) Take(ctx context.Context, l archive.Lease, now time.Time) (archive.Lease, bool, error) {
	out, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.Table), Item: leaseItem(l),
		ConditionExpression:      aws.String("attribute_not_exists(pk) OR #run = :run OR #expires <= :now"),
		ExpressionAttributeNames: map[string]string{"#run": "run", "#expires": "expires"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":run": str(l.Run), ":now": millis(now),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, ok := refused(err); ok {
		return leaseOf(item), false, nil
	}
	if err != nil {
		return archive.Lease{}, false, fmt.Errorf("archiveddb: take the lease of %s: %w", l.Table, err)
	}
	if prev := leaseOf(out.Attributes); prev.Run != l.Run {
		return prev, true, nil
	}
	return archive.Lease{}, true, nil
}

// Renew writes l's step and expiry while l.Run holds the lease.
func (s *Leases) Renew(ctx context.Context, l archive.Lease) (archive.Lease, bool, error) {
	item := leaseItem(l)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table), Key: leaseKey(l.Table),
		UpdateExpression:         aws.String("SET #step = :step, #expires = :expires, expiresAt = :expiresAt, #ttl = :ttl"),
		ConditionExpression:      aws.String("#run = :run"),
		ExpressionAttributeNames: map[string]string{"#run": "run", "#step": "step", "#expires": "expires", "#ttl": "ttl"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":run": str(l.Run), ":step": item["step"], ":expires": item["expires"], ":expiresAt": item["expiresAt"], ":ttl": item["ttl"],
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if cur, ok := refused(err); ok {
		return leaseOf(cur), false, nil
	}
	if err != nil {
		return archive.Lease{}, false, fmt.Errorf("archiveddb: renew the lease of %s: %w", l.Table, err)
	}
	return archive.Lease{}, true, nil
}

// Release deletes l while l.Run holds the lease.
func (s *Leases) Release(ctx context.Context, l archive.Lease) error {
	_, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.Table), Key: leaseKey(l.Table),
		ConditionExpression:       aws.String("#run = :run"),
		ExpressionAttributeNames:  map[string]string{"#run": "run"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":run": str(l.Run)},
	})
	if _, ok := refused(err); ok {
		return nil // gone, or another run's: not this run's to remove
	}
	if err != nil {
		return fmt.Errorf("archiveddb: release the lease of %s: %w", l.Table, err)
	}
	return nil
}
