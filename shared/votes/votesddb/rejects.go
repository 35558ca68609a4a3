package votesddb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

var (
	_ votes.RejectRecorder = (*Votes)(nil)
	_ votes.RejectReader   = (*Votes)(nil)
)

// RejectTTL is how long a poll's reject record is kept (its TTLAttribute,
// on the real clock); its counts are kept for good.
const RejectTTL = 14 * 24 * time.Hour

// Keys of a poll's rejects (see the package comment).
const (
	rejectCountsSK = "counts"
	rejectAtPrefix = "at#"
	// recordParallel bounds the record transactions of one batch in flight.
	recordParallel = 4
)

func rejectsPK(pollID string, shard int) string {
	return "rejects#" + pollID + "#" + strconv.Itoa(shard)
}

// rejectSK orders a poll shard's records by sent time, then message id.
// Milliseconds since 1970, 13 digits wide, sort as strings until 2286.
func rejectSK(r votes.RejectRecord) string {
	return fmt.Sprintf("%s%013d#%s", rejectAtPrefix, max(r.SentAt.UnixMilli(), 0), r.MessageID)
}

// rejectItem is a reject record beside its key.
type rejectItem struct {
	MessageID     string       `dynamodbav:"messageId"`
	SentAt        int64        `dynamodbav:"sentAt"` // Unix milliseconds
	Reason        votes.Reason `dynamodbav:"reason"`
	Detail        string       `dynamodbav:"detail"`
	VoteID        string       `dynamodbav:"voteId,omitempty"`
	OptionID      string       `dynamodbav:"optionId,omitempty"`
	Excerpt       string       `dynamodbav:"excerpt,omitempty"`
	ExcerptBinary []byte       `dynamodbav:"excerptBinary,omitempty"`
	BodySize      int          `dynamodbav:"bodySize"`
	TTL           int64        `dynamodbav:"ttl,omitempty"`
}

// RecordRejects records each reject in one transaction: its record, put
// only if its key (sent time and message id) is new, and 1 added to its
// reason's count in the same shard. A redelivery fails the condition and
// changes nothing. The rejects of one shard are recorded one after the
// other, since each transaction writes the shard's count item (DynamoDB
// cancels a transaction on an item another one is writing); up to
// recordParallel shards at once. A transaction cancelled by a conflict
// anyway (another invocation's) is tried again after a jittered pause.
func (s *Votes) RecordRejects(ctx context.Context, rs []votes.Rejected) error {
	byShard := map[string][]votes.Rejected{}
	var order []string
	for _, r := range rs {
		k := rejectsPK(r.PollID, votes.RejectShard(r.MessageID))
		if _, ok := byShard[k]; !ok {
			order = append(order, k)
		}
		byShard[k] = append(byShard[k], r)
	}
	sem := make(chan struct{}, recordParallel)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, k := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, r := range byShard[k] {
				if err := s.recordRejectTrying(ctx, r); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("votesddb: %d of %d rejects not recorded: %w", len(errs), len(rs), errors.Join(errs...))
	}
	return nil
}

// recordTries and recordBackoff bound the tries of a reject record whose
// transaction a conflict cancelled.
const recordTries = 5

var recordBackoff = retry.Backoff{Base: 20 * time.Millisecond, Max: time.Second}

func (s *Votes) recordRejectTrying(ctx context.Context, r votes.Rejected) error {
	for n := 1; ; n++ {
		err := s.recordReject(ctx, r)
		if !errors.Is(err, votes.ErrConflict) || n >= recordTries || recordBackoff.Wait(ctx, n) != nil {
			return err
		}
	}
}

func (s *Votes) recordReject(ctx context.Context, r votes.Rejected) error {
	rec := r.Record()
	item, err := attributevalue.MarshalMap(rejectItem{
		MessageID: rec.MessageID, SentAt: max(rec.SentAt.UnixMilli(), 0), Reason: rec.Reason, Detail: rec.Detail,
		VoteID: rec.VoteID, OptionID: rec.OptionID, Excerpt: rec.Excerpt, ExcerptBinary: rec.ExcerptBase64,
		BodySize: rec.BodySize, TTL: s.realNow().Add(RejectTTL).Unix(),
	})
	if err != nil {
		return fmt.Errorf("reject %s: %w", r.MessageID, err)
	}
	pk := str(rejectsPK(r.PollID, votes.RejectShard(r.MessageID)))
	maps.Copy(item, map[string]types.AttributeValue{"pk": pk, "sk": str(rejectSK(rec))})
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(s.counters), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Update: &types.Update{
			TableName: aws.String(s.counters), Key: map[string]types.AttributeValue{"pk": pk, "sk": str(rejectCountsSK)},
			UpdateExpression:          aws.String("ADD #r :one"),
			ExpressionAttributeNames:  map[string]string{"#r": string(rec.Reason)},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
		}},
	}})
	if codes, ok := awserr.CancellationCodes(err); ok && len(codes) == 2 {
		switch {
		case codes[0] == "ConditionalCheckFailed":
			return nil // recorded by an earlier delivery
		case slices.ContainsFunc(codes, func(c string) bool { return c == "ThrottlingError" || c == "ProvisionedThroughputExceeded" }):
			return fmt.Errorf("reject %s of poll %s: %w: %w", r.MessageID, r.PollID, votes.ErrThrottled, err)
		case slices.Contains(codes, "TransactionConflict"):
			return fmt.Errorf("reject %s of poll %s: %w: %w", r.MessageID, r.PollID, votes.ErrConflict, err)
		}
	}
	if err != nil {
		return fmt.Errorf("reject %s of poll %s: %w", r.MessageID, r.PollID, classify(err))
	}
	return nil
}

// RejectCounts reads the poll's RejectShards count items in parallel and
// sums them by reason (an empty map when there are none).
func (s *Votes) RejectCounts(ctx context.Context, pollID string) (map[votes.Reason]int64, error) {
	counts := map[votes.Reason]int64{}
	var mu sync.Mutex
	err := eachRejectShard(func(shard int) error {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.counters), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": str(rejectsPK(pollID, shard)), "sk": str(rejectCountsSK)},
		})
		if err != nil {
			return fmt.Errorf("votesddb: reject counts of %s, shard %d: %w", pollID, shard, classify(err))
		}
		delete(out.Item, "pk")
		delete(out.Item, "sk")
		var item map[string]int64
		if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
			return fmt.Errorf("votesddb: reject counts of %s, shard %d: %w", pollID, shard, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for reason, n := range item {
			counts[votes.Reason(reason)] += n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// RecentRejects reads the latest limit records of each reject shard, in
// parallel, and keeps the latest limit of them, newest first.
func (s *Votes) RecentRejects(ctx context.Context, pollID string, limit int) ([]votes.RejectRecord, error) {
	var items []rejectItem
	var mu sync.Mutex
	err := eachRejectShard(func(shard int) error {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.counters),
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :at)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": str(rejectsPK(pollID, shard)), ":at": str(rejectAtPrefix),
			},
			ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(limit)), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return fmt.Errorf("votesddb: recent rejects of %s, shard %d: %w", pollID, shard, classify(err))
		}
		var page []rejectItem
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &page); err != nil {
			return fmt.Errorf("votesddb: recent rejects of %s, shard %d: %w", pollID, shard, err)
		}
		mu.Lock()
		defer mu.Unlock()
		items = append(items, page...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(items, func(a, b rejectItem) int {
		return cmp.Or(cmp.Compare(b.SentAt, a.SentAt), cmp.Compare(b.MessageID, a.MessageID))
	})
	recs := make([]votes.RejectRecord, 0, min(limit, len(items)))
	for _, it := range items[:min(limit, len(items))] {
		recs = append(recs, votes.RejectRecord{
			MessageID: it.MessageID, SentAt: time.UnixMilli(it.SentAt).UTC(), Reason: it.Reason, Detail: it.Detail,
			VoteID: it.VoteID, OptionID: it.OptionID, Excerpt: it.Excerpt, ExcerptBase64: it.ExcerptBinary, BodySize: it.BodySize,
		})
	}
	return recs, nil
}

// eachRejectShard runs read for every reject shard at once (scatter);
// read merges its own results (gather).
func eachRejectShard(read func(shard int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, votes.RejectShards)
	for shard := range votes.RejectShards {
		wg.Go(func() { errs[shard] = read(shard) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
