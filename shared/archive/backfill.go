package archive

import (
	"fmt"
	"sort"
	"time"
)

// A backfill heals a partition whose stream lost records: a change the
// archiver never saw because its records were trimmed (the stream keeps
// them 24 hours and Lambda's event source mapping skips trimmed records
// without a word), a poison record, or an archived file that was deleted.
// The table itself still holds every item's final state, so a Scan of it,
// compared with the archive's replayed state, says exactly what the archive
// misses:
//
//	missing    in the table, not in the archive  → MODIFY with the scanned image
//	different  in both, another checksum         → MODIFY with the scanned image
//	extra      in the archive, not in the table  → REMOVE
//
// Items the archive holds identically get no row, so a backfill of a
// healthy month writes nothing, a second backfill right after the first
// writes nothing, and counting a live month's rows (one INSERT per vote)
// stays exact: only the votes the stream lost are added.
//
// The rows carry Stream BackfillStream and the scan's watermark as their
// ApproximateCreationTime: the instant, truncated to the second, before the
// Scan started. Replay (Supersedes) keeps a stream record recorded at or
// after the watermark over the backfill's row (the Scan may have read the
// item before that change) and the backfill's row over one recorded before
// it (the Scan saw that change, or a later one). The stream keeps flowing
// while the backfill runs: nothing has to stop.
//
// A monthly table's rows go to its month's partition. A table that is not
// monthly (the objects table) has no month in a scanned item: its backfill
// goes to the partition of the watermark's month (BackfillPartition), and
// the archived state it is compared with is the replay of every month of
// the table, so only what the archive as a whole misses is written; replay
// by key across the months makes the result correct.

// BackfillWatermark is the watermark of a Scan starting at t: t in UTC,
// truncated to the second (stream records' creation times are whole
// seconds, so a change made once the Scan started is recorded at or after
// it).
func BackfillWatermark(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// BackfillPartition is the partition a backfill of table writes to: the
// table's month for a monthly table (<base>-YYYY-MM), else the watermark's
// month.
func BackfillPartition(table string, watermark time.Time) Partition {
	return PartitionOf(table, watermark)
}

// BackfillKey is where the backfill whose Scan started at watermark is
// written: table=<base>/month=<YYYY-MM>/backfill-<sequence>.parquet, the
// sequence being SnapshotSequence of the watermark, so that a backfill run
// again with the same watermark writes the same object.
func BackfillKey(p Partition, watermark time.Time) string {
	return p.Prefix() + "backfill-" + SnapshotSequence(BackfillWatermark(watermark)) + ".parquet"
}

// Backfill counts a backfill's rows by kind.
type Backfill struct {
	Missing   int // MODIFY rows of items the archive did not hold
	Different int // MODIFY rows of items the archive held with another image
	Removed   int // REMOVE rows of items the table no longer holds
	// Unchanged: MODIFY rows of items the archive held identically (only
	// a whole-table snapshot writes them).
	Unchanged int
}

// Rows is the number of rows the backfill writes.
func (b Backfill) Rows() int { return b.Missing + b.Different + b.Removed + b.Unchanged }

func (b Backfill) String() string {
	s := fmt.Sprintf("%d rows: %d missing, %d different, %d removed", b.Rows(), b.Missing, b.Different, b.Removed)
	if b.Unchanged > 0 {
		s += fmt.Sprintf(", %d unchanged", b.Unchanged)
	}
	return s
}

// CountBackfill counts rows by kind against the archived state.
func CountBackfill(rows []Row, archived State) Backfill {
	var b Backfill
	for _, r := range rows {
		sum, held := archived[r.Keys]
		switch {
		case r.EventName == EventRemove:
			b.Removed++
		case !held:
			b.Missing++
		case sum == ChecksumJSON(r.NewImage):
			b.Unchanged++
		default:
			b.Different++
		}
	}
	return b
}

// BackfillRows turns a Scan with images into the rows that make the
// archive replay to the table (see above): one row per item the archive
// misses or holds with another image, and a REMOVE per key the archive
// holds that the table does not. The rows are sorted by key (the MODIFYs,
// then the REMOVEs), labelled BackfillStream, recorded at the watermark
// (BackfillWatermark) with SnapshotSequence of it.
//
// archived must be read before the watermark is taken, and the Scan start
// after it. Run it once the archiver has caught up with the stream: a
// record still on its way when the archive was read gets a backfill row
// too, and until the month is compacted (ReplayRows) a live month's rows
// then hold that item twice (replay and verification are right either way).
func BackfillRows(p Partition, scan Scan, archived State, watermark time.Time) ([]Row, error) {
	w := BackfillWatermark(watermark)
	return differenceRows(p, scan, archived, BackfillStream, SnapshotSequence(w), w)
}

// differenceRows is the rows of BackfillRows and SnapshotRows: the
// difference between the scanned table and the archived state.
func differenceRows(p Partition, scan Scan, archived State, stream, seq string, at time.Time) ([]Row, error) {
	if len(scan.Images) != len(scan.State) {
		return nil, fmt.Errorf("archive: %s needs the scan's images (%d images for %d items)", stream, len(scan.Images), len(scan.State))
	}
	var changed, gone []string
	for k, sum := range scan.State {
		if a, ok := archived[k]; !ok || a != sum {
			if _, ok := scan.Images[k]; !ok {
				return nil, fmt.Errorf("archive: %s: the scan has no image of %s", stream, k)
			}
			changed = append(changed, k)
		}
	}
	for k := range archived {
		if _, ok := scan.State[k]; !ok {
			gone = append(gone, k)
		}
	}
	sort.Strings(changed)
	sort.Strings(gone)
	rows := make([]Row, 0, len(changed)+len(gone))
	row := func(name, keys, image string) Row {
		return Row{
			Table: p.Table, Month: p.Month, Stream: stream,
			EventName: name, SequenceNumber: seq, ApproximateCreationTime: at,
			Keys: keys, NewImage: image,
		}
	}
	for _, k := range changed {
		rows = append(rows, row(EventModify, k, scan.Images[k]))
	}
	for _, k := range gone {
		rows = append(rows, row(EventRemove, k, ""))
	}
	return rows, nil
}
