package votesddb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

func (s *Votes) ledgerItem(e votes.Entry, countedAt string) map[string]types.AttributeValue {
	pk, sk := e.LedgerKey()
	return map[string]types.AttributeValue{
		"pk": str(pk), "sk": str(sk),
		"voteId": str(e.VoteID), "pollId": str(e.PollID), "optionId": str(e.OptionID), "voterId": str(e.VoterID),
		"castAt": str(ledgerTime(e.CastAt)), "countedAt": str(countedAt),
	}
}

// ledgerTime writes a ledger time in UTC to the microsecond: the precision
// of the archive's timestamp columns (and of Athena's and DuckDB's), so the
// archive holds castAt and countedAt in its typed columns; a time with
// nanoseconds would have to stay in the archive's JSON to stay exact.
func ledgerTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

func (s *Votes) increment(inc votes.Increment) *types.Update {
	return &types.Update{
		TableName:                 aws.String(s.counters),
		Key:                       map[string]types.AttributeValue{"pk": str(shardPK(inc.PollID, inc.Shard)), "sk": str(inc.OptionID)},
		UpdateExpression:          aws.String("ADD votes :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(inc.N)},
	}
}

// CloseMarkers is how many close markers the rotator writes into a month's
// ledger table before it verifies the month's archive: items with the keys
// CloseMarkerKey(0..CloseMarkers-1), which no vote's keys can be (a ledger
// pk is <pollId>#<suffix>, and ids are never empty). Every transaction
// checks that one of them is absent, so once they are written no vote can
// be added to the month: the archive the rotator then verifies holds the
// month for good. They are spread over CloseMarkers partitions so the
// checks do not make one hot key. The rotator keeps its own copy
// (shared/archive: archive.CloseMarkerKey); tests/rotation_test.go proves
// the two agree by closing a table one way and committing the other.
const CloseMarkers = 16

// CloseMarkerKey is the keys of close marker n.
func CloseMarkerKey(n int) (pk, sk string) { return fmt.Sprintf("#closed#%d", n), "#closed" }

// openCheck is the transaction's check that month's ledger is open: close
// marker n is absent.
func (s *Votes) openCheck(month string, n int) *types.ConditionCheck {
	pk, sk := CloseMarkerKey(n % CloseMarkers)
	return &types.ConditionCheck{
		TableName:           aws.String(s.LedgerTable(month)),
		Key:                 map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}
}

// Commit writes a group in one transaction: each ledger entry put only if
// absent, the group's increments, and per month of its entries a check
// that the month is not closed (see CloseMarkers). A cancellation is
// reported as *votes.MonthClosedError when a month is closed, otherwise
// as *votes.CancelledError naming the entries that already exist.
func (s *Votes) Commit(ctx context.Context, g votes.Group) error {
	if err := s.ensureLedger(ctx, g.Entries); err != nil {
		return err
	}
	now := ledgerTime(s.now())
	items := make([]types.TransactWriteItem, 0, g.Actions())
	for _, e := range g.Entries {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                           aws.String(s.LedgerTable(e.Month())),
			Item:                                s.ledgerItem(e, now),
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	for _, inc := range g.Increments {
		items = append(items, types.TransactWriteItem{Update: s.increment(inc)})
	}
	// One check per month, on the marker of the month's first entry's
	// ledger suffix, so groups spread their checks over the markers.
	var months []string
	for _, e := range g.Entries {
		if m := e.Month(); !slices.Contains(months, m) {
			months = append(months, m)
			items = append(items, types.TransactWriteItem{ConditionCheck: s.openCheck(m, votes.LedgerSuffix(e.VoterID))})
		}
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	codes, ok := awserr.CancellationCodes(err)
	if !ok {
		s.forget(err, g.Entries)
		return fmt.Errorf("votesddb: commit %d votes: %w", len(g.Entries), classify(err))
	}
	checks := len(g.Entries) + len(g.Increments)
	for i, code := range codes {
		if i >= checks && i-checks < len(months) && code == "ConditionalCheckFailed" {
			return &votes.MonthClosedError{Month: months[i-checks]}
		}
	}
	ce := &votes.CancelledError{Existing: map[int]string{}, Cause: err}
	for i, code := range codes {
		switch code {
		case "ConditionalCheckFailed":
			if i < len(g.Entries) {
				ce.Existing[i] = storedVoteID(err, i)
			}
		case "TransactionConflict":
			ce.Retryable = true
		case "ThrottlingError", "ProvisionedThroughputExceeded":
			ce.Retryable, ce.Throttled = true, true
		}
	}
	return ce
}

// storedVoteID is the voteId of the ledger item that failed the condition
// of action i of a cancelled transaction: the transaction returns the item
// (ReturnValuesOnConditionCheckFailure ALL_OLD) in the action's
// cancellation reason, which awserr.CancellationCodes does not carry. ""
// when there is none.
func storedVoteID(err error, i int) string {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) || i >= len(tc.CancellationReasons) {
		return ""
	}
	if v, ok := tc.CancellationReasons[i].Item["voteId"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// PutEntries writes ledger entries with BatchWriteItem (at-least-once mode),
// retrying unprocessed items.
func (s *Votes) PutEntries(ctx context.Context, entries []votes.Entry) error {
	if err := s.ensureLedger(ctx, entries); err != nil {
		return err
	}
	now := ledgerTime(s.now())
	for start := 0; start < len(entries); start += 25 {
		req := map[string][]types.WriteRequest{}
		for _, e := range entries[start:min(start+25, len(entries))] {
			t := s.LedgerTable(e.Month())
			req[t] = append(req[t], types.WriteRequest{PutRequest: &types.PutRequest{Item: s.ledgerItem(e, now)}})
		}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt >= maxBatchAttempts {
				return fmt.Errorf("votesddb: ledger items still unprocessed after %d attempts: %w", attempt, votes.ErrThrottled)
			}
			if attempt > 0 {
				if err := batchBackoff.Wait(ctx, attempt); err != nil {
					return err
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				s.forget(err, entries)
				return fmt.Errorf("votesddb: write ledger: %w", classify(err))
			}
			req = out.UnprocessedItems
		}
	}
	return nil
}

// AddCounts applies increments with one UpdateItem each, in parallel
// (at-least-once mode).
func (s *Votes) AddCounts(ctx context.Context, incs []votes.Increment) error {
	var wg sync.WaitGroup
	errs := make([]error, len(incs))
	sem := make(chan struct{}, 8)
	for i, inc := range incs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			u := s.increment(inc)
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ExpressionAttributeValues: u.ExpressionAttributeValues,
			})
			if err != nil {
				errs[i] = fmt.Errorf("votesddb: add %d to %s/%s shard %d: %w", inc.N, inc.PollID, inc.OptionID, inc.Shard, classify(err))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Voted answers "did this voter vote in this poll" in the month's ledger:
// one GetItem for one-vote-per-voter polls, otherwise one Query on the
// voter's single ledger partition.
func (s *Votes) Voted(ctx context.Context, p votes.Poll, voterID, month string) (bool, error) {
	e := votes.Entry{Vote: votes.Vote{PollID: p.ID, VoterID: voterID}, OneVotePerVoter: p.OneVotePerVoter}
	pk, sk := e.LedgerKey()
	table := aws.String(s.LedgerTable(month))
	if p.OneVotePerVoter {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)}})
		if err != nil {
			return false, fmt.Errorf("votesddb: voted: %w", classify(err))
		}
		return out.Item != nil, nil
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: table, KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :v)"), Limit: aws.Int32(1),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":v": str(voterID + "#")},
	})
	if err != nil {
		return false, fmt.Errorf("votesddb: voted: %w", classify(err))
	}
	return len(out.Items) > 0, nil
}

// ensureLedger creates the month tables the entries need, if the rotator
// has not yet.
func (s *Votes) ensureLedger(ctx context.Context, entries []votes.Entry) error {
	months := map[string]bool{}
	for _, e := range entries {
		months[e.Month()] = true
	}
	list := make([]string, 0, len(months))
	for m := range months {
		list = append(list, m)
	}
	sort.Strings(list)
	for _, m := range list {
		if err := s.EnsureLedgerTable(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// EnsureLedgerTable creates a month's ledger table (on-demand, with a
// NEW_AND_OLD_IMAGES stream for the archiver) unless it exists, and waits
// until it is active.
func (s *Votes) EnsureLedgerTable(ctx context.Context, month string) error {
	name := s.LedgerTable(month)
	s.mu.Lock()
	known := s.tables[name]
	s.mu.Unlock()
	if known {
		return nil
	}
	if _, err := time.Parse("2006-01", month); err != nil {
		return fmt.Errorf("votesddb: ledger month %q: %w", month, err)
	}
	d, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil && !awserr.Is(err, "ResourceNotFoundException") {
		return fmt.Errorf("votesddb: describe %s: %w", name, classify(err))
	}
	if err != nil {
		if closed, err := s.monthClosed(ctx, month); err != nil || closed {
			return err
		}
		defs, keys := LedgerKeySchema()
		_, err = s.db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: defs,
			KeySchema:            keys,
			StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
			Tags:                 []types.Tag{{Key: aws.String("app"), Value: aws.String("ddbpipe")}, {Key: aws.String("ledger-month"), Value: aws.String(month)}},
		})
		if err != nil && !awserr.Is(err, "ResourceInUseException") {
			return fmt.Errorf("votesddb: create %s: %w", name, classify(err))
		}
	}
	if d == nil || d.Table.TableStatus != types.TableStatusActive {
		if err := dynamodb.NewTableExistsWaiter(s.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
			return fmt.Errorf("votesddb: wait for %s: %w", name, err)
		}
	}
	s.mu.Lock()
	s.tables[name] = true
	s.mu.Unlock()
	return nil
}

// monthClosed reports, as a *votes.MonthClosedError, that a month whose
// table does not exist is closed: the next month's table exists, so the
// ledger has moved on and this month was retired (the rotator creates the
// current and the next month's tables ahead, and deletes a month only once
// it is archived). It needs no clock: the counter must never create a
// retired month's table again, empty, whatever its clock says.
func (s *Votes) monthClosed(ctx context.Context, month string) (bool, error) {
	m, err := time.Parse("2006-01", month)
	if err != nil {
		return false, fmt.Errorf("votesddb: ledger month %q: %w", month, err)
	}
	next := s.LedgerTable(m.AddDate(0, 1, 0).Format("2006-01"))
	_, err = s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(next)})
	switch {
	case err == nil:
		return true, &votes.MonthClosedError{Month: month}
	case awserr.Is(err, "ResourceNotFoundException"):
		return false, nil
	}
	return false, fmt.Errorf("votesddb: describe %s: %w", next, classify(err))
}

// forget drops the tables of entries from the known ones when a write
// found one missing (retired since), so the next write checks again.
func (s *Votes) forget(err error, entries []votes.Entry) {
	if !awserr.Is(err, "ResourceNotFoundException") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		delete(s.tables, s.LedgerTable(e.Month()))
	}
}

// LedgerKeySchema is a ledger table's key: pk (hash) and sk (range), both
// strings (see votes.Entry.LedgerKey). The counter creates a month's table
// with it on first use; the rotator creates tables ahead of time with its
// own copy (shared/archive/archiveddb), held equal to this one by
// tests/rotation_test.go, so that neither flow links the other.
func LedgerKeySchema() ([]types.AttributeDefinition, []types.KeySchemaElement) {
	return []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		}, []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		}
}
