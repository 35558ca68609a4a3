package objectsddb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// Item implements objects.Items: one strongly consistent GetItem.
func (s *Store) Item(ctx context.Context, key string, version int64) (objects.Record, bool, error) {
	if version < 0 || version > objects.MaxVersion {
		return objects.Record{}, false, fmt.Errorf("objectstore: get %s: version %d is out of range (0 to %d)", key, version, int64(objects.MaxVersion))
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: versionKey(key, version), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return objects.Record{}, false, fmt.Errorf("objectstore: get %s %s: %w", key, objects.SortKey(version), classify(err))
	}
	if out.Item == nil {
		return objects.Record{}, false, nil
	}
	r, err := decode(out.Item)
	if err != nil {
		return objects.Record{}, false, err
	}
	return r, true, nil
}

// listProjection is the projection of a listing (every attribute but the
// payload) and its names: all go through placeholders, since some of them
// (size, data, …) are reserved words.
func listProjection() (string, map[string]string) {
	names := make(map[string]string, len(metaAttrs))
	ph := make([]string, len(metaAttrs))
	for i, a := range metaAttrs {
		ph[i] = fmt.Sprintf("#a%d", i)
		names[ph[i]] = a
	}
	return strings.Join(ph, ", "), names
}

// List implements objects.Items: a strongly consistent Query on
// begins_with(sk, "v"), every page, without the payload attribute (which
// saves bytes on the wire, not read units: DynamoDB bills the whole item).
func (s *Store) List(ctx context.Context, key string) (objects.Listing, error) {
	proj, names := listProjection()
	names["#pk"], names["#sk"] = attrPK, attrSK
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :v)"),
		ProjectionExpression:      aws.String(proj),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(key), ":v": str(objects.VersionPrefix)},
		ConsistentRead:            aws.Bool(true),
	})
	var l objects.Listing
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return objects.Listing{}, fmt.Errorf("objectstore: list %s: %w", key, classify(err))
		}
		for _, item := range page.Items {
			r, err := decode(item)
			if errors.Is(err, errNotVersion) {
				continue // not ours to list
			}
			if err != nil {
				return objects.Listing{}, fmt.Errorf("objectstore: list %s: %w", key, err)
			}
			if sk, _ := item[attrSK].(*types.AttributeValueMemberS); sk != nil && sk.Value == objects.LatestSortKey {
				l.Latest, l.Exists = r, true
				continue
			}
			l.History = append(l.History, r)
		}
	}
	// Query returns sort key order, which is version order ("v0" first).
	return l, nil
}

// baseCondition is the condition on v0 that a write based on b needs, as
// the domain defines it: no item for version 0; otherwise that version, a
// tombstone or not as b says.
func baseCondition(b objects.Base) (string, map[string]string, map[string]types.AttributeValue) {
	if b.Version == 0 {
		return "attribute_not_exists(#pk)", map[string]string{"#pk": attrPK}, nil
	}
	names := map[string]string{"#ver": attrVersion, "#del": attrDeleted}
	values := map[string]types.AttributeValue{":base": num(b.Version), ":true": &types.AttributeValueMemberBOOL{Value: true}}
	if b.Deleted {
		return "#ver = :base AND #del = :true", names, values
	}
	return "#ver = :base AND (attribute_not_exists(#del) OR #del <> :true)", names, values
}

// conditionalPut is a transaction's Put of v0 conditioned on the base,
// returning the item as it was when the condition fails.
func (s *Store) conditionalPut(item map[string]types.AttributeValue, b objects.Base) types.TransactWriteItem {
	cond, names, values := baseCondition(b)
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// Commit implements objects.Items: v0 (conditioned on the base) and vN (on
// its absence) in one transaction.
func (s *Store) Commit(ctx context.Context, c objects.Commit) error {
	r := c.Record
	if r.Version != c.Base.Version+1 || r.Deleted || r.Version > objects.MaxVersion {
		return fmt.Errorf("objectstore: commit %s: version %d on base %d (deleted %t): %w", r.Key, r.Version, c.Base.Version, r.Deleted, objects.ErrNotApplied)
	}
	actions := []types.TransactWriteItem{
		s.conditionalPut(encode(r, objects.LatestSortKey), c.Base),
		{Put: &types.Put{
			TableName: aws.String(s.table), Item: encode(r, objects.SortKey(r.Version)),
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}},
	}
	if err := s.transact(ctx, r.Key, c.Base, actions); err != nil {
		return fmt.Errorf("objectstore: commit %s v%d: %w", r.Key, r.Version, err)
	}
	return nil
}

// Remove implements objects.Items: the tombstone (conditioned on the base)
// and the history deletes in one transaction, so at most
// objects.MaxRemoveHistory of them.
func (s *Store) Remove(ctx context.Context, rm objects.Removal) error {
	hist, err := historyKeys(rm.History)
	if err != nil {
		return fmt.Errorf("objectstore: remove %s: %w", rm.Key, err)
	}
	if len(hist) > objects.MaxRemoveHistory {
		return fmt.Errorf("objectstore: remove %s: %d history items with the tombstone are over the transaction limit of %d actions: %w",
			rm.Key, len(hist), objects.MaxRemoveHistory+1, objects.ErrNotApplied)
	}
	tomb := rm.Tombstone
	tomb.Key, tomb.Deleted = rm.Key, true
	actions := []types.TransactWriteItem{s.conditionalPut(encode(tomb, objects.LatestSortKey), rm.Base)}
	for _, v := range hist {
		actions = append(actions, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: versionKey(rm.Key, v)}})
	}
	if err := s.transact(ctx, rm.Key, rm.Base, actions); err != nil {
		return fmt.Errorf("objectstore: remove %s v%d: %w", rm.Key, rm.Base.Version, err)
	}
	return nil
}

// historyKeys checks and deduplicates history versions (a request may name
// an item once).
func historyKeys(versions []int64) ([]int64, error) {
	out := slices.Clone(versions)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, v := range out {
		if v < 1 || v > objects.MaxVersion {
			return nil, fmt.Errorf("history version %d is out of range (1 to %d): %w", v, int64(objects.MaxVersion), objects.ErrNotApplied)
		}
	}
	return out, nil
}

// transact runs a transaction whose first action is the conditional write
// of v0. A failed condition is a *objects.ConflictError with v0's state; a
// cancellation for other transactions or throttling is retried up to
// MaxTxAttempts times, each with a fresh client request token (nothing was
// applied); any other failure wraps objects.ErrNotApplied only if it is
// certain that nothing was applied (see the package documentation).
func (s *Store) transact(ctx context.Context, key string, base objects.Base, actions []types.TransactWriteItem) error {
	for attempt := 1; ; attempt++ {
		in := &dynamodb.TransactWriteItemsInput{TransactItems: actions, ClientRequestToken: aws.String(s.token())}
		var at attempts
		_, err := s.db.TransactWriteItems(ctx, in, at.observe)
		if err == nil {
			return nil
		}
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) {
			if at.refused(err) {
				return fmt.Errorf("%w: %w", objects.ErrNotApplied, classify(err))
			}
			return classify(err) // the outcome is unknown
		}
		if ce := conflict(key, base, tc.CancellationReasons); ce != nil {
			return ce
		}
		throttled := false
		for _, r := range tc.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				throttled = true
			}
		}
		retry := throttled || hasReason(tc, "TransactionConflict")
		if !retry || attempt >= s.maxTxAttempts() {
			switch {
			case throttled:
				return fmt.Errorf("%w: %w: %w", objects.ErrThrottled, objects.ErrNotApplied, err)
			case retry:
				return fmt.Errorf("%w: %d attempts: %w: %w", ErrTransactionConflict, attempt, objects.ErrNotApplied, err)
			}
			return fmt.Errorf("%w: %w", objects.ErrNotApplied, err) // a validation error of one action, say
		}
		if err := s.pause(ctx, attempt); err != nil {
			return fmt.Errorf("%w: %w", objects.ErrNotApplied, err)
		}
	}
}

func (s *Store) token() string {
	if s.NewToken != nil {
		return s.NewToken()
	}
	return randomToken()
}

func hasReason(tc *types.TransactionCanceledException, code string) bool {
	for _, r := range tc.CancellationReasons {
		if aws.ToString(r.Code) == code {
			return true
		}
	}
	return false
}

// conflict reads a failed condition from the cancellation reasons. The
// first action is v0's conditional write: when its condition fails, its
// reason carries v0 as it is (no item: the object does not exist). When
// another action's condition fails (vN exists), v0 held the base.
func conflict(key string, base objects.Base, reasons []types.CancellationReason) *objects.ConflictError {
	for i, r := range reasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		if i > 0 {
			return &objects.ConflictError{Key: key, Current: base.Version, Deleted: base.Deleted}
		}
		ce := &objects.ConflictError{Key: key}
		if r.Item != nil {
			a := &attrs{m: r.Item}
			ce.Current, ce.Deleted = a.num(attrVersion), a.bool(attrDeleted)
		}
		return ce
	}
	return nil
}

// DeleteHistory implements objects.Items with BatchWriteItem deletes, 25
// to a request, in parallel: the deletes need no atomicity (each is
// idempotent, a missing item is no error), and outside a transaction they
// bill half the write units.
func (s *Store) DeleteHistory(ctx context.Context, key string, versions []int64) error {
	hist, err := historyKeys(versions)
	if err != nil {
		return fmt.Errorf("objectstore: delete history of %s: %w", key, err)
	}
	reqs := make([]types.WriteRequest, len(hist))
	for i, v := range hist {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: versionKey(key, v)}}
	}
	if err := s.batchWrite(ctx, reqs); err != nil {
		return fmt.Errorf("objectstore: delete %d history items of %s: %w", len(hist), key, err)
	}
	return nil
}
