// Package rotation keeps ddbpipe's monthly ledger tables (<prefix>-YYYY-MM):
// it creates the coming months' tables ahead of time, keeps every live
// table subscribed to the archiver, and retires a month once it is cold —
// drained into the archive, verified against the table, compacted with a
// manifest — before it deletes the table.
//
// It is the domain: month arithmetic, the retirement state machine and its
// decisions as plain values. It imports no AWS package; the interfaces it
// needs (Tables, Streams, Subscriptions, Archive) are declared here and
// implemented by shared/archive/archiveddb, shared/archive/archiveesm and
// shared/archive/archives3.
//
// # Retirement
//
// A table is retired in steps, each idempotent, so a run that stops
// anywhere (timeout, crash, a refused call) is simply run again the next
// day:
//
//	ensure       the table keeps its subscription (a table the counter created
//	             has none); a provisioned table's capacity is lowered
//	drain        the stream is turned off (no record can come after this) and
//	             the rotator waits, bounded, until the archive holds the last
//	             record of every shard the stream still holds (see
//	             Unarchived); not drained → retried next run. The stream keeps
//	             records 24 hours, so a shard whose last record never arrives
//	             (a poison record at its end) stops holding the drain up a day
//	             later, and the verification decides.
//	verify       the archive, replayed, holds exactly the table's items (keys
//	             and checksums of their final images) from a parallel Scan
//	snapshot     only when verification failed: the Scan is written into the
//	             archive as rows that supersede the stream's, verified again,
//	             and an alarm is raised; the table is kept this run
//	compact      small files merged, _manifest.json written, merged inputs deleted
//	unsubscribe  the stream's event source mappings removed
//	unprotect    deletion protection turned off
//	delete       the table deleted
//
// A table is never deleted in a run that did not verify it.
package rotation

import (
	"fmt"
	"time"
)

// monthLayout is how months are written: YYYY-MM.
const monthLayout = "2006-01"

// MonthOf is the month (UTC) a time falls in.
func MonthOf(t time.Time) string { return t.UTC().Format(monthLayout) }

// MonthStart is the first instant of a month, in UTC.
func MonthStart(month string) (time.Time, error) {
	t, err := time.Parse(monthLayout, month)
	if err != nil {
		return time.Time{}, fmt.Errorf("rotation: month %q is not YYYY-MM: %w", month, err)
	}
	return t.UTC(), nil
}

// AddMonths moves a month by n months (n may be negative).
func AddMonths(month string, n int) (string, error) {
	t, err := MonthStart(month)
	if err != nil {
		return "", err
	}
	return t.AddDate(0, n, 0).Format(monthLayout), nil
}

// ColdAt is when a month turns cold: the end of the month plus the grace
// days, which leave late writes (a vote cast on the 30th, counted on the
// 1st) and the stream's delivery time to settle.
func ColdAt(month string, graceDays int) (time.Time, error) {
	t, err := MonthStart(month)
	if err != nil {
		return time.Time{}, err
	}
	return t.AddDate(0, 1, graceDays), nil
}

// TableName is a month's ledger table: <prefix>-YYYY-MM.
func TableName(prefix, month string) string { return prefix + "-" + month }
