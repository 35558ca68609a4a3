package archive

import (
	"fmt"
	"sort"
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

// SnapshotRows turns a full Scan (with images) into rows that make the
// archive replay to the table: a MODIFY with the scanned image for each item
// of the table, and a REMOVE for each key the archive holds that the table
// does not. Rows are sorted by key, and all carry SnapshotSequence(at).
func SnapshotRows(p Partition, scan Scan, archived State, at time.Time) ([]Row, error) {
	if len(scan.Images) != len(scan.State) {
		return nil, fmt.Errorf("rotation: snapshot needs the scan's images (%d images for %d items)", len(scan.Images), len(scan.State))
	}
	seq := SnapshotSequence(at)
	keys := make([]string, 0, len(scan.Images))
	for k := range scan.Images {
		keys = append(keys, k)
	}
	var gone []string
	for k := range archived {
		if _, ok := scan.State[k]; !ok {
			gone = append(gone, k)
		}
	}
	sort.Strings(keys)
	sort.Strings(gone)
	rows := make([]Row, 0, len(keys)+len(gone))
	row := func(i int, name, keys, image string) Row {
		return Row{
			Table: p.Table, Month: p.Month, Stream: SnapshotStream,
			EventName: name, SequenceNumber: seq, ApproximateCreationTime: at.UTC().Truncate(time.Second),
			Keys: keys, NewImage: image,
		}
	}
	for _, k := range keys {
		rows = append(rows, row(len(rows), EventModify, k, scan.Images[k]))
	}
	for _, k := range gone {
		rows = append(rows, row(len(rows), EventRemove, k, ""))
	}
	return rows, nil
}
