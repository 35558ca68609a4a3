package objectsddb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

// Item implements objects.Items: one strongly consistent GetItem.
func (s *Store) Item(ctx context.Context, key string, version int64) (objects.Record, bool, error) {
	if version < 0 || version > objects.MaxVersion {
		return objects.Record{}, false, fmt.Errorf("objectsddb: get %s: version %d is out of range (0 to %d)", key, version, int64(objects.MaxVersion))
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: versionKey(key, version), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return objects.Record{}, false, fmt.Errorf("objectsddb: get %s %s: %w", key, objects.SortKey(version), classify(err))
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

// List implements objects.Items: a strongly consistent Query on
// begins_with(sk, "v"), every page, without the payload attribute (which
// saves bytes on the wire, not read units: DynamoDB bills the whole item).
func (s *Store) List(ctx context.Context, key string) (objects.Listing, error) {
	names := make([]expression.NameBuilder, len(metaAttrs))
	for i, a := range metaAttrs {
		names[i] = expression.Name(a) // every name a placeholder: size, data, … are reserved words
	}
	expr, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(attrPK).Equal(expression.Value(key)).And(expression.Key(attrSK).BeginsWith(objects.VersionPrefix))).
		WithProjection(expression.NamesList(names[0], names[1:]...)).
		Build()
	if err != nil {
		return objects.Listing{}, fmt.Errorf("objectsddb: list %s: %w", key, err)
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    expr.KeyCondition(),
		ProjectionExpression:      expr.Projection(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	})
	var l objects.Listing
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return objects.Listing{}, fmt.Errorf("objectsddb: list %s: %w", key, classify(err))
		}
		for _, item := range page.Items {
			r, err := decode(item)
			if errors.Is(err, errNotVersion) {
				continue // not ours to list
			}
			if err != nil {
				return objects.Listing{}, fmt.Errorf("objectsddb: list %s: %w", key, err)
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
func baseCondition(b objects.Base) expression.ConditionBuilder {
	if b.Version == 0 {
		return expression.AttributeNotExists(expression.Name(attrPK))
	}
	version, deleted := expression.Name(attrVersion).Equal(expression.Value(b.Version)), expression.Name(attrDeleted)
	if b.Deleted {
		return version.And(deleted.Equal(expression.Value(true)))
	}
	return version.And(expression.Or(expression.AttributeNotExists(deleted), deleted.NotEqual(expression.Value(true))))
}

// conditionalPut is a transaction's Put of v0 conditioned on the base,
// returning the item as it was when the condition fails.
func (s *Store) conditionalPut(item map[string]types.AttributeValue, b objects.Base) (types.TransactWriteItem, error) {
	expr, err := expression.NewBuilder().WithCondition(baseCondition(b)).Build()
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}, nil
}

// Commit implements objects.Items: v0 (conditioned on the base) and vN (on
// its absence) in one transaction; with a claim on a shared blob, also the
// blob's head (held to the claim: objects.ErrBlobChanged otherwise) and
// the version's reference record.
func (s *Store) Commit(ctx context.Context, c objects.Commit) error {
	r := c.Record
	if r.Version != c.Base.Version+1 || r.Deleted || r.Version > objects.MaxVersion {
		return fmt.Errorf("objectsddb: commit %s: version %d on base %d (deleted %t): %w", r.Key, r.Version, c.Base.Version, r.Deleted, objects.ErrNotApplied)
	}
	latest, err := s.conditionalPut(s.indexed(encode(r, objects.LatestSortKey), r), c.Base)
	if err != nil {
		return fmt.Errorf("objectsddb: commit %s v%d: %w: %w", r.Key, r.Version, objects.ErrNotApplied, err)
	}
	actions := []types.TransactWriteItem{
		latest,
		{Put: &types.Put{
			TableName: aws.String(s.table), Item: encode(r, objects.SortKey(r.Version)),
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}},
	}
	claimAt := -1
	if c.Claim != nil {
		if r.Blob == nil || !objects.IsShared(r.Blob.Key) {
			return fmt.Errorf("objectsddb: commit %s v%d: a claim without a shared blob: %w", r.Key, r.Version, objects.ErrNotApplied)
		}
		claimAt = len(actions)
		actions = append(actions, s.claimActions(r, *c.Claim)...)
	}
	if err := s.transact(ctx, r.Key, c.Base, claimAt, actions); err != nil {
		return fmt.Errorf("objectsddb: commit %s v%d: %w", r.Key, r.Version, err)
	}
	return nil
}

// Remove implements objects.Items: the tombstone (conditioned on the base)
// and the history deletes in one transaction, so at most
// objects.MaxRemoveHistory of them.
func (s *Store) Remove(ctx context.Context, rm objects.Removal) error {
	hist, err := historyKeys(rm.History)
	if err != nil {
		return fmt.Errorf("objectsddb: remove %s: %w", rm.Key, err)
	}
	if len(hist) > objects.MaxRemoveHistory {
		return fmt.Errorf("objectsddb: remove %s: %d history items with the tombstone are over the transaction limit of %d actions: %w",
			rm.Key, len(hist), objects.MaxRemoveHistory+1, objects.ErrNotApplied)
	}
	tomb := rm.Tombstone
	tomb.Key, tomb.Deleted = rm.Key, true
	latest, err := s.conditionalPut(encode(tomb, objects.LatestSortKey), rm.Base)
	if err != nil {
		return fmt.Errorf("objectsddb: remove %s v%d: %w: %w", rm.Key, rm.Base.Version, objects.ErrNotApplied, err)
	}
	actions := []types.TransactWriteItem{latest}
	for _, v := range hist {
		actions = append(actions, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: versionKey(rm.Key, v)}})
	}
	if err := s.transact(ctx, rm.Key, rm.Base, -1, actions); err != nil {
		return fmt.Errorf("objectsddb: remove %s v%d: %w", rm.Key, rm.Base.Version, err)
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
// of v0. A failed condition is a *objects.ConflictError with v0's state,
// or, on action claimAt (a shared blob's head), objects.ErrBlobChanged; a
// cancellation for other transactions or throttling is retried up to
// MaxTxAttempts times, each with a fresh client request token (nothing was
// applied); any other failure wraps objects.ErrNotApplied only if it is
// certain that nothing was applied (see the package documentation).
func (s *Store) transact(ctx context.Context, key string, base objects.Base, claimAt int, actions []types.TransactWriteItem) error {
	for attempt := 1; ; attempt++ {
		in := &dynamodb.TransactWriteItemsInput{TransactItems: actions, ClientRequestToken: aws.String(s.token())}
		var at attempts
		_, err := s.db.TransactWriteItems(ctx, in, at.observe)
		if err == nil {
			return nil
		}
		codes, cancelled := awserr.CancellationCodes(err)
		if !cancelled {
			if at.refused(err) {
				return fmt.Errorf("%w: %w", objects.ErrNotApplied, classify(err))
			}
			return classify(err) // the outcome is unknown
		}
		if i := slices.Index(codes, "ConditionalCheckFailed"); i >= 0 && i == claimAt {
			return fmt.Errorf("%w: %w: %w", objects.ErrBlobChanged, objects.ErrNotApplied, err)
		} else if i >= 0 {
			return conflict(key, base, i, err)
		}
		throttled := slices.ContainsFunc(codes, func(c string) bool {
			return c == "ThrottlingError" || c == "ProvisionedThroughputExceeded" || c == "RequestLimitExceeded"
		})
		retry := throttled || slices.Contains(codes, "TransactionConflict")
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

// conflict is the failed condition of action i of a cancelled
// transaction. The first action is v0's conditional write: when its
// condition fails, its cancellation reason carries v0 as it is (no item:
// the object does not exist). When another action's condition fails (vN
// exists), v0 held the base.
func conflict(key string, base objects.Base, i int, err error) *objects.ConflictError {
	if i > 0 {
		return &objects.ConflictError{Key: key, Current: base.Version, Deleted: base.Deleted}
	}
	ce := &objects.ConflictError{Key: key}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) && len(tc.CancellationReasons) > 0 && tc.CancellationReasons[0].Item != nil {
		a := &attrs{m: tc.CancellationReasons[0].Item}
		ce.Current, ce.Deleted = a.num(attrVersion), a.bool(attrDeleted)
	}
	return ce
}

// DeleteHistory implements objects.Items with BatchWriteItem deletes, 25
// to a request, in parallel: the deletes need no atomicity (each is
// idempotent, a missing item is no error), and outside a transaction they
// bill half the write units.
func (s *Store) DeleteHistory(ctx context.Context, key string, versions []int64) error {
	hist, err := historyKeys(versions)
	if err != nil {
		return fmt.Errorf("objectsddb: delete history of %s: %w", key, err)
	}
	reqs := make([]types.WriteRequest, len(hist))
	for i, v := range hist {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: versionKey(key, v)}}
	}
	if err := s.batchWrite(ctx, reqs); err != nil {
		return fmt.Errorf("objectsddb: delete %d history items of %s: %w", len(hist), key, err)
	}
	return nil
}

// CommitItems are the two items a commit of r writes: v0, with its listing
// index key when r is live, and vN. They are for loaders of many new
// objects (a benchmark's fixture, a bulk import into an empty prefix) that
// write them with BatchWriteItem: without the commit's conditions, so only
// for keys that hold nothing yet.
func (s *Store) CommitItems(r objects.Record) (latest, version map[string]types.AttributeValue) {
	return s.indexed(encode(r, objects.LatestSortKey), r), encode(r, objects.SortKey(r.Version))
}
