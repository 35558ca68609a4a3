package votesddb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// ledgerItem is a vote's ledger item, written at countedAt.
func ledgerItem(e votes.Entry, countedAt time.Time) map[string]types.AttributeValue {
	attrs := e.LedgerItem(countedAt).Attributes()
	item := make(map[string]types.AttributeValue, len(attrs))
	for name, v := range attrs {
		item[name] = str(v)
	}
	return item
}

// PutVote writes a vote into its month's ledger with one conditional
// PutItem (1 write unit): a key that exists already fails the condition,
// and the item that holds it comes back (ReturnValuesOnConditionCheckFailure)
// as *votes.ExistsError. A month without a table is votes.ErrNoLedger: the
// counter never creates one.
func (s *Votes) PutVote(ctx context.Context, e votes.Entry) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.LedgerTable(e.Month())),
		Item:                                ledgerItem(e, s.now()),
		ConditionExpression:                 aws.String("attribute_not_exists(" + ledger.AttrPK + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return s.putErr(err, "write vote "+e.VoteID+" into "+s.LedgerTable(e.Month()))
}

// ClaimVoter records that a one-vote-per-voter poll's voter voted, in the
// counters table (pk voter#<pollId>#<voterId>), once for every month: a
// second vote by the voter, in any month, finds the claim. 1 write unit.
// The claim names its vote and castAt as the ledger item does, so putErr
// reads either.
func (s *Votes) ClaimVoter(ctx context.Context, e votes.Entry) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.counters),
		Item: map[string]types.AttributeValue{
			"pk": str("voter#" + e.PollID + "#" + e.VoterID), "sk": str("voter"),
			ledger.AttrVoteID: str(e.VoteID), ledger.AttrCastAt: str(ledger.FormatTime(e.CastAt)),
		},
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return s.putErr(err, "claim voter "+e.VoterID+" of poll "+e.PollID)
}

// putErr maps a conditional PutItem's error. The item that failed the
// condition names the vote that holds the key; one that comes back without
// its voteId is an error, not a vote of no id.
func (s *Votes) putErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case awserr.IsConditionFailed(err):
		ex := &votes.ExistsError{}
		var cf *types.ConditionalCheckFailedException
		if asCondition(err, &cf) {
			v, ok := cf.Item[ledger.AttrVoteID].(*types.AttributeValueMemberS)
			if !ok {
				return fmt.Errorf("votesddb: %s: the item holding the key has no %s: %w", what, ledger.AttrVoteID, ledger.ErrMissingAttribute)
			}
			ex.StoredVoteID = v.Value
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
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: map[string]types.AttributeValue{ledger.AttrPK: str(pk), ledger.AttrSK: str(sk)}})
		if err != nil {
			return false, fmt.Errorf("votesddb: voted: %w", classify(err))
		}
		return out.Item != nil, nil
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: table, KeyConditionExpression: aws.String(ledger.AttrPK + " = :pk AND begins_with(" + ledger.AttrSK + ", :v)"), Limit: aws.Int32(1),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":v": str(voterID + "#")},
	})
	if err != nil {
		return false, fmt.Errorf("votesddb: voted: %w", classify(err))
	}
	return len(out.Items) > 0, nil
}
