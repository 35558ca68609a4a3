// Package archive is the cold tier of ddbpipe's tables: DynamoDB stream
// records kept as rows in columnar files on object storage, one Hive-style
// partition per table and month (table=<base>/month=<YYYY-MM>/).
//
// It is the domain: plain Go values in, rows, object keys, verification
// reports, compaction plans and manifests out. It imports no AWS package;
// its adapters are named for their technology: archiveparquet encodes Rows
// as Parquet, archives3 keeps the files and partitions on S3, archiveddb
// reads and manages the DynamoDB tables, archiveesm subscribes streams to
// the archiver, archiveduckdb queries the archive, and archivelambda turns
// Lambda stream events into Records and serves both functions.
//
// # Rows
//
// One stream record becomes one Row: the record's identity (table, month,
// stream, sequence number), its event name and time, and its images as
// DynamoDB's type-tagged JSON (see Item), so the archive loses nothing the
// stream carried. Rows are written by archiveparquet in a table's Layout:
// typed columns for the attributes its items are known to have (the
// ledger's poll_id, option_id, voter_id, cast_at, ...; the objects table's
// object_key, version, placement, size, ...), the rest of the image in a
// type-tagged extra column, so that an analyst filters on poll_id = 'P'
// and reads two small columns instead of every image. A table without a
// declared layout keeps its keys and its whole image as type-tagged JSON.
// Every file records its layout and schema version in its metadata.
//
// table and month repeat the partition so a file describes itself (DuckDB can
// read it with no Hive partitioning, and the values agree when it does).
// A record is identified by its stream and sequence number. Sequence numbers
// are decimal strings of up to 40 digits; they order numerically, so compare
// them with ledger.CompareSeq (in SQL: lpad to 40).
//
// When a month is retired its rows are compacted to the month's replayed
// state (ReplayRows): one row per item, the item's last change (a REMOVE
// when the item is gone), marked replayed. Counting the month's rows then
// counts items exactly; a query that keeps the replayed rows whenever the
// month has any stays exact while a compaction is half done.
//
// # Rotation
//
// The Rotator keeps ddbpipe's monthly ledger tables (<prefix>-YYYY-MM):
// it creates the coming months' tables ahead of time, keeps every live
// table subscribed to the archiver, and retires a month once it is cold —
// drained into the archive, verified against the table, compacted with a
// manifest — before it deletes the table.
//
// Each month's table starts warm: it is given the warm throughput of the
// month before's table (what that one serves at once, raised by its
// peaks), at least RotationPolicy.WarmFloor and at most WarmCeiling
// (RotationPolicy.WarmFor). A table created is asked for it at creation;
// one that exists is raised to it, never lowered, every run (step warm).
//
// Month arithmetic, the retirement state machine and its decisions are
// plain values; the ports it needs (Tables, Streams, Subscriptions,
// Partitions, Leases) are declared here and implemented by archiveddb,
// archiveesm and archives3.
//
// A table is retired in steps, each idempotent, so a run that stops
// anywhere (timeout, crash, a refused call) is simply run again the next
// day:
//
//	lease        the month's lease taken (or taken over from a run that
//	             stopped), the table described anew under it
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
//	counters     once verified: the votes the stream's other reader counted
//	             (Counted.Tallied) against the table's items; a difference is
//	             logged and alarmed, and does not hold the retirement up
//	snapshot     only when verification failed: the difference between the
//	             Scan and the archive (the items it misses or holds with
//	             another image, REMOVEs of those the table lost: BackfillRows'
//	             rows) is written into the archive as rows that supersede the
//	             stream's, verified again, and an alarm is raised; the table
//	             is kept this run
//	compact      small files merged, _manifest.json written, merged inputs deleted
//	unsubscribe  the stream's event source mappings removed
//	unprotect    deletion protection turned off: only here, after a verification
//	             that passed without a snapshot and the compaction recording it
//	delete       the table deleted
//
// Runs may overlap (the daily schedule and an operator's `tables rotate`):
// a month's retirement is held by one run at a time, through the month's
// Lease. A run takes it before the first step (a conditional write that
// fails while another run's lease is live), renews it before each step
// and, while a step works, every third of RotationPolicy.LeaseFor, and
// releases it at the end. A run that finds the lease held leaves the month
// to its holder (HeldByAnother: not a failure) and says who holds it and
// since when. A run that stopped leaves its lease to lapse; the next run
// takes it over and resumes from the table as it is now (Tables.Describe,
// not the listing), each step done already saying so.
//
// A table is never deleted in a run that did not verify it. The rotator
// touches only the tables its policy owns (RotationPolicy.Owns: exactly
// <prefix>-YYYY-MM); another stack's <prefix>-staging-YYYY-MM or a copy's
// <prefix>-YYYY-MM-old is left alone, however cold its month.
package archive

import (
	"errors"
	"fmt"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// Sentinel errors, for errors.Is.
var (
	// ErrInvalidRecord: a stream record the archive cannot hold (missing
	// fields, an unknown event name). Such a record is a poison record.
	ErrInvalidRecord = errors.New("archive: invalid record")
	// ErrUnsupportedValue: an image holds a value no DynamoDB type maps to.
	ErrUnsupportedValue = errors.New("archive: unsupported attribute value")
	// ErrInvalidManifest: a manifest that does not add up.
	ErrInvalidManifest = errors.New("archive: invalid manifest")
)

// Event names, as DynamoDB Streams sends them.
const (
	EventInsert = "INSERT"
	EventModify = "MODIFY"
	EventRemove = "REMOVE"
)

// Record is one stream record as plain values: what the archive needs from
// it, whatever delivered it.
type Record struct {
	// Table is the source table's name, e.g. "ddbpipe-votes-2026-11".
	Table string
	// Stream identifies the table's stream (its label, the last part of the
	// stream ARN). Sequence numbers are unique within a stream, so (Stream,
	// first sequence number) names an object for good.
	Stream         string
	EventID        string
	EventName      string
	SequenceNumber string
	CreatedAt      time.Time // ApproximateCreationDateTime
	Keys           Item
	NewImage       Item // nil when absent
	OldImage       Item // nil when absent
	// TTLDelete: the record is a REMOVE made by DynamoDB's TTL process
	// (userIdentity type "Service", principal "dynamodb.amazonaws.com").
	TTLDelete bool
}

// Row is one archived stream record, as stored in the columnar files (see the
// package documentation).
type Row struct {
	Table                   string
	Month                   string
	Stream                  string // the stream label; "snapshot" for a snapshot's rows
	EventName               string
	SequenceNumber          string
	ApproximateCreationTime time.Time
	Keys                    string // ImageJSON of the key attributes
	NewImage                string // ImageJSON; "" when absent
	OldImage                string // ImageJSON; "" when absent
	TTLDelete               bool
	// Replayed: the row is its item's final state in a compacted month
	// (ReplayRows), not one of the stream's records.
	Replayed bool
}

// mainImage is the image of the record whose row's typed columns describe
// it in a file (archiveparquet): the new image, else the old image (a
// REMOVE), else the keys. A row's image is "" exactly when its record's is
// nil, so the row picks the same one.
func (r Record) mainImage() Item {
	switch {
	case r.NewImage != nil:
		return r.NewImage
	case r.OldImage != nil:
		return r.OldImage
	}
	return r.Keys
}

// NewRow converts a record into its row. It fails with ErrInvalidRecord or
// ErrUnsupportedValue (wrapped with the record's event id): the record is
// then a poison record.
func NewRow(r Record) (Row, error) {
	fail := func(err error) (Row, error) {
		return Row{}, fmt.Errorf("archive: record %q (sequence %s): %w", r.EventID, r.SequenceNumber, err)
	}
	switch {
	case r.Table == "":
		return fail(fmt.Errorf("%w: no table name", ErrInvalidRecord))
	case r.EventID == "":
		return fail(fmt.Errorf("%w: no event id", ErrInvalidRecord))
	case !isDigits(r.SequenceNumber) || len(r.SequenceNumber) > maxSequenceDigits:
		return fail(fmt.Errorf("%w: sequence number %q is not a decimal of 1 to %d digits", ErrInvalidRecord, r.SequenceNumber, maxSequenceDigits))
	case r.CreatedAt.IsZero():
		return fail(fmt.Errorf("%w: no creation time", ErrInvalidRecord))
	case len(r.Keys) == 0:
		return fail(fmt.Errorf("%w: no keys", ErrInvalidRecord))
	case r.TTLDelete && r.EventName != EventRemove:
		return fail(fmt.Errorf("%w: TTL delete on a %s", ErrInvalidRecord, r.EventName))
	}
	switch r.EventName {
	case EventInsert, EventModify, EventRemove:
	default:
		return fail(fmt.Errorf("%w: event name %q", ErrInvalidRecord, r.EventName))
	}
	p := PartitionOf(r.Table, r.CreatedAt)
	row := Row{
		Table: p.Table, Month: p.Month, Stream: r.Stream,
		EventName: r.EventName, SequenceNumber: r.SequenceNumber,
		// The archive keeps microseconds (its recorded_at column), more
		// than DynamoDB Streams gives (seconds); a finer time would not
		// read back equal.
		ApproximateCreationTime: r.CreatedAt.UTC().Truncate(time.Microsecond), TTLDelete: r.TTLDelete,
	}
	var err error
	if row.Keys, err = ImageJSON(r.Keys); err != nil {
		return fail(fmt.Errorf("keys: %w", err))
	}
	if row.NewImage, err = ImageJSON(r.NewImage); err != nil {
		return fail(fmt.Errorf("new image: %w", err))
	}
	if row.OldImage, err = ImageJSON(r.OldImage); err != nil {
		return fail(fmt.Errorf("old image: %w", err))
	}
	return row, nil
}

// Partition is one table's month in the archive.
type Partition struct {
	Table string // the base name: the table name without a -YYYY-MM suffix
	Month string // YYYY-MM
}

// Prefix is the partition's folder: "table=<base>/month=<YYYY-MM>/".
func (p Partition) Prefix() string { return ledger.ArchivePrefix(p.Table, p.Month) }

// ManifestKey is where the partition's manifest lives. The leading
// underscore keeps Athena from reading it as data.
func (p Partition) ManifestKey() string { return ledger.ManifestKey(p.Table, p.Month) }

// PartitionOf gives a record's partition. A monthly table's records all
// belong to the table's month, whenever they were written (a vote cast on
// 30 November and recorded on 1 December stays in November). Other tables
// (the objects table) are split by the record's creation time, in UTC.
func PartitionOf(table string, created time.Time) Partition {
	if base, month, ok := ledger.SplitTable(table); ok {
		return Partition{Table: base, Month: month}
	}
	return Partition{Table: table, Month: ledger.MonthOf(created)}
}
