package archive

import (
	"fmt"
	"sort"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// State is a table's content as the verification compares it: each item's
// key JSON (as Row.Keys or KeyJSON give it) mapped to the checksum of its
// image (ChecksumJSON of Row.NewImage, or Checksum of a scanned item).
type State map[string]string

// Replay folds archived rows, in any order and with duplicates, into the
// final state of the table they came from: for each key, the change with the
// greatest sequence number wins; a REMOVE (by a user or by TTL) takes the key
// out. DynamoDB Streams publishes an item's changes in order, with growing
// sequence numbers, also across shard splits.
//
// Rows need the new image (stream view NEW_IMAGE or NEW_AND_OLD_IMAGES):
// an INSERT or MODIFY without one fails Add, as the archive could not be
// verified against the table.
type Replay struct {
	last map[string]replayed
}

type replayed struct {
	at       Row // the winning row, images dropped
	removed  bool
	checksum string
}

// NewReplay returns an empty replay.
func NewReplay() *Replay { return &Replay{last: map[string]replayed{}} }

// Supersedes reports whether row a, of the same item as b, is the later
// change of the two: the one replay keeps.
//
// Between two stream records (or two snapshots) the greater sequence number
// is later. A backfill's row (Stream BackfillStream) was read from the table
// by a Scan that started at its ApproximateCreationTime, its watermark: a
// stream record recorded at or after the watermark is later than it (the
// Scan may have read the item before that change), one recorded before is
// earlier (the Scan saw that change, or a later one). Between two
// backfills, or a backfill and a rotator's snapshot, the later Scan wins. A
// snapshot (sequence numbers 9…, taken once the stream is off) supersedes
// every stream record.
func Supersedes(a, b Row) bool {
	ab, bb := a.Stream == BackfillStream, b.Stream == BackfillStream
	switch {
	case (ab || isSnapshot(a)) && (bb || isSnapshot(b)) && (ab || bb):
		if c := a.ApproximateCreationTime.Compare(b.ApproximateCreationTime); c != 0 {
			return c > 0
		}
	case ab && !isSnapshot(b):
		return b.ApproximateCreationTime.Before(a.ApproximateCreationTime)
	case bb && !isSnapshot(a):
		return !a.ApproximateCreationTime.Before(b.ApproximateCreationTime)
	}
	return ledger.CompareSeq(a.SequenceNumber, b.SequenceNumber) > 0
}

func isSnapshot(r Row) bool { return r.Stream == SnapshotStream }

// Add applies one archived row.
func (r *Replay) Add(row Row) error {
	if row.EventName != EventRemove && row.NewImage == "" {
		return fmt.Errorf("%w: %s %s at sequence %s has no new image (the stream must carry new images)", ErrInvalidRecord, row.EventName, row.Keys, row.SequenceNumber)
	}
	if cur, seen := r.last[row.Keys]; seen && !Supersedes(row, cur.at) {
		return nil // older, or the same record again
	}
	next := replayed{at: Row{Stream: row.Stream, SequenceNumber: row.SequenceNumber, ApproximateCreationTime: row.ApproximateCreationTime},
		removed: row.EventName == EventRemove}
	if !next.removed {
		next.checksum = ChecksumJSON(row.NewImage)
	}
	r.last[row.Keys] = next
	return nil
}

// State is the table's final state after the rows added so far.
func (r *Replay) State() State {
	s := make(State, len(r.last))
	for k, v := range r.last {
		if !v.removed {
			s[k] = v.checksum
		}
	}
	return s
}

// Report is the outcome of comparing the archive with the table. The key
// lists hold key JSON, sorted.
type Report struct {
	TableItems    int      // items in the table
	ArchivedItems int      // items the archive says the table holds
	Missing       []string // in the table, not in the archive
	Extra         []string // in the archive, not in the table
	Different     []string // in both, with different images
}

// OK is true when the archive holds exactly the table's items.
func (r Report) OK() bool {
	return len(r.Missing) == 0 && len(r.Extra) == 0 && len(r.Different) == 0
}

func (r Report) String() string {
	if r.OK() {
		return fmt.Sprintf("archive verified: %d items match the table", r.TableItems)
	}
	return fmt.Sprintf("archive does not match the table: %d items in the table, %d in the archive; %d missing, %d extra, %d different",
		r.TableItems, r.ArchivedItems, len(r.Missing), len(r.Extra), len(r.Different))
}

// Verify compares the state replayed from the archive with the state read
// from the table (a Scan).
func Verify(archived, table State) Report {
	rep := Report{TableItems: len(table), ArchivedItems: len(archived)}
	for k, sum := range table {
		a, ok := archived[k]
		switch {
		case !ok:
			rep.Missing = append(rep.Missing, k)
		case a != sum:
			rep.Different = append(rep.Different, k)
		}
	}
	for k := range archived {
		if _, ok := table[k]; !ok {
			rep.Extra = append(rep.Extra, k)
		}
	}
	sort.Strings(rep.Missing)
	sort.Strings(rep.Extra)
	sort.Strings(rep.Different)
	return rep
}
