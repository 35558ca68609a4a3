package votesddb

import (
	"context"
	"fmt"
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

// PutVote writes a vote into its month's ledger with one conditional
// PutItem (1 write unit): a key that exists already fails the condition,
// and the item that holds it comes back (ReturnValuesOnConditionCheckFailure)
// as *votes.ExistsError. A month without a table is votes.ErrNoLedger: the
// counter never creates one.
func (s *Votes) PutVote(ctx context.Context, e votes.Entry) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.LedgerTable(e.Month())),
		Item:                                s.ledgerItem(e, ledgerTime(s.now())),
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return s.putErr(err, "write vote "+e.VoteID+" into "+s.LedgerTable(e.Month()))
}

// ClaimVoter records that a one-vote-per-voter poll's voter voted, in the
// counters table (pk voter#<pollId>#<voterId>), once for every month: a
// second vote by the voter, in any month, finds the claim. 1 write unit.
func (s *Votes) ClaimVoter(ctx context.Context, e votes.Entry) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.counters),
		Item: map[string]types.AttributeValue{
			"pk": str("voter#" + e.PollID + "#" + e.VoterID), "sk": str("voter"),
			"voteId": str(e.VoteID), "castAt": str(ledgerTime(e.CastAt)),
		},
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return s.putErr(err, "claim voter "+e.VoterID+" of poll "+e.PollID)
}

// putErr maps a conditional PutItem's error.
func (s *Votes) putErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case awserr.IsConditionFailed(err):
		ex := &votes.ExistsError{}
		var cf *types.ConditionalCheckFailedException
		if asCondition(err, &cf) {
			if v, ok := cf.Item["voteId"].(*types.AttributeValueMemberS); ok {
				ex.StoredVoteID = v.Value
			}
		}
		return ex
	case awserr.Is(err, "ResourceNotFoundException"):
		return fmt.Errorf("votesddb: %s: %w", what, votes.ErrNoLedger)
	}
	return fmt.Errorf("votesddb: %s: %w", what, classify(err))
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
