package votes

import (
	"hash/fnv"
	"strconv"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// LedgerSuffixes is M: ledger partition keys are <pollId>#<hash(voterId) mod M>,
// a calculated suffix, so one poll's ledger spreads over M partitions and a
// voter's entries are found in exactly one of them.
const LedgerSuffixes = 16

// Entry is an accepted vote on its way to the ledger.
type Entry struct {
	Vote
	OneVotePerVoter bool
	// MessageID is the queue message the vote came in.
	MessageID string
}

// LedgerSuffix is the vote's ledger partition suffix in [0, LedgerSuffixes).
func LedgerSuffix(voterID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(voterID))
	return int(h.Sum32() % LedgerSuffixes)
}

// LedgerKey returns the ledger item's keys: the partition key
// <pollId>#<suffix> and the sort key <voterId>#<voteId>, or <voterId> alone
// for one-vote-per-voter polls (so a second vote collides). Ids never hold '#'.
func (e Entry) LedgerKey() (pk, sk string) {
	pk = e.PollID + "#" + strconv.Itoa(LedgerSuffix(e.VoterID))
	if e.OneVotePerVoter {
		return pk, e.VoterID
	}
	return pk, e.VoterID + "#" + e.VoteID
}

// Month is the ledger table's month of the vote: YYYY-MM of castAt (UTC).
func (e Entry) Month() string { return ledger.MonthOf(e.CastAt) }

// LedgerItem is the ledger item that holds the vote, written at countedAt.
func (e Entry) LedgerItem(countedAt time.Time) ledger.Item {
	pk, sk := e.LedgerKey()
	return ledger.Item{
		PK: pk, SK: sk, VoteID: e.VoteID, PollID: e.PollID, OptionID: e.OptionID, VoterID: e.VoterID,
		CastAt: e.CastAt, CountedAt: countedAt,
	}
}
