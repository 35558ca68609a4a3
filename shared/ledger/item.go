package ledger

import (
	"cmp"
	"errors"
	"strings"
	"time"
)

// The ledger item: one vote in its month's table, written once by the
// counter (votesddb), read from the table's stream by the tally
// (voteslambda) and kept in typed columns by the archive
// (archive.LedgerLayout). Its keys are pk <pollId>#<suffix> and sk
// <voterId>#<voteId>, or <voterId> alone in a one-vote-per-voter poll
// (votes.Entry.LedgerKey); castAt and countedAt are written by FormatTime.
const (
	AttrPK        = "pk"
	AttrSK        = "sk"
	AttrVoteID    = "voteId"
	AttrPollID    = "pollId"
	AttrOptionID  = "optionId"
	AttrVoterID   = "voterId"
	AttrCastAt    = "castAt"    // when the voter voted
	AttrCountedAt = "countedAt" // when the counter wrote the item
)

// Item is a ledger item's content: a vote as its month's table holds it.
type Item struct {
	PK, SK                            string
	VoteID, PollID, OptionID, VoterID string
	CastAt, CountedAt                 time.Time
}

// Attributes are the item's attributes by name, each a string (S): the
// one shape the counter writes and the archive's fixtures copy.
func (it Item) Attributes() map[string]string {
	return map[string]string{
		AttrPK: it.PK, AttrSK: it.SK,
		AttrVoteID: it.VoteID, AttrPollID: it.PollID, AttrOptionID: it.OptionID, AttrVoterID: it.VoterID,
		AttrCastAt: FormatTime(it.CastAt), AttrCountedAt: FormatTime(it.CountedAt),
	}
}

// The tally's checkpoint item, in the counters table: one per stream shard
// of a ledger table, under pk CheckpointPK(table) (AttrPK) and sk the
// shard id (AttrSK). The tally (votesddb) writes it with every commit; the
// results read when it last did, and the rotator (archiveddb) how far it
// counted and how many votes.
const (
	CheckpointSeq           = "seq"           // S: the sequence number of the last record counted
	CheckpointVotes         = "votes"         // N: the votes counted under the checkpoint, in all
	CheckpointAt            = "at"            // S: when the tally last committed (RFC 3339, UTC)
	CheckpointLastWrittenAt = "lastWrittenAt" // S: the latest countedAt of that commit's votes, when known
)

// ErrMissingAttribute is a ledger or checkpoint item without an attribute
// its contract above says it has (or with a value of another type): a
// reader reports it, or skips the item and says how many it skipped,
// never passes over it in silence.
var ErrMissingAttribute = errors.New("ledger: an item lacks an attribute")

// FormatTime writes a ledger item's time (castAt, countedAt): RFC 3339 in
// UTC, to the microsecond. That is the precision of the archive's
// timestamp columns (and of Athena's and DuckDB's), so the archive holds
// the times in typed columns; a time with nanoseconds would have to stay in
// the archive's JSON to stay exact.
func FormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// CompareSeq compares two stream sequence numbers by value: -1, 0 or +1.
// Sequence numbers are decimal strings of up to 40 digits (DynamoDB
// Streams writes 21 to 40), too long for an integer: leading zeros do not
// count, and "" (no sequence number: a shard without a checkpoint) comes
// before every one.
func CompareSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// SeqLess reports whether sequence number a comes before b (CompareSeq).
func SeqLess(a, b string) bool { return CompareSeq(a, b) < 0 }

// SeqKey is a sequence number's canonical form, to key a set or map of
// them: without leading zeros, keeping one digit ("007" is "7", "000" is
// "0"). Two sequence numbers CompareSeq finds equal have one SeqKey.
func SeqKey(seq string) string {
	for len(seq) > 1 && seq[0] == '0' {
		seq = seq[1:]
	}
	return seq
}
