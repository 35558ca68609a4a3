package archive

import (
	"fmt"
	"time"
)

// SnapshotSequence is the sequence number a snapshot export taken at t
// gives its rows: 40 digits, a 9 and the time in nanoseconds, so that it is
// greater than every stream sequence number (DynamoDB Streams' are at most
// 40 digits and, in practice, far below 9×10^39) and than every earlier
// snapshot's. Replay then takes the snapshot's images as the final ones.
func SnapshotSequence(t time.Time) string {
	return fmt.Sprintf("9%039d", t.UnixNano())
}

// Stream labels of rows that did not come from a stream.
const (
	// SnapshotStream labels a rotator snapshot's rows (SnapshotRows).
	SnapshotStream = "snapshot"
	// BackfillStream labels a backfill's rows: items read by a Scan, whose
	// ApproximateCreationTime is the Scan's start (see Supersedes).
	BackfillStream = "backfill"
)

// SnapshotKey is where the snapshot export taken at t is written:
// table=<base>/month=<YYYY-MM>/snapshot-<sequence>.parquet.
func SnapshotKey(p Partition, t time.Time) string {
	return p.Prefix() + "snapshot-" + SnapshotSequence(t) + ".parquet"
}

// SnapshotRows turns a Scan (with images) into rows that make the
// archive replay to the table, for the rotator once a month's stream is off:
// the difference between the table and the archived state, as BackfillRows
// computes it (a MODIFY with the scanned image for each item the archive
// misses or holds with another image, a REMOVE for each key the archive
// holds that the table does not; items archived identically get no row).
// Rows are sorted by key and all carry SnapshotSequence(at), which
// supersedes every stream record. With an empty archived state it is the
// whole table.
func SnapshotRows(p Partition, scan Scan, archived State, at time.Time) ([]Row, error) {
	return differenceRows(p, scan, archived, SnapshotStream, SnapshotSequence(at), at.UTC().Truncate(time.Second))
}
