package archive

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound: the table (or stream) does not exist.
var ErrNotFound = errors.New("archive: not found")

// Table is a ledger table as the control plane describes it.
type Table struct {
	Name   string
	Status string // CREATING, ACTIVE, UPDATING, DELETING...
	// StreamARN is the latest stream's ARN ("" when the table never had
	// one); StreamEnabled is false once the stream was turned off.
	StreamARN          string
	StreamEnabled      bool
	DeletionProtection bool
	// CreatedAt is when the table was created (zero when unknown).
	CreatedAt time.Time
	// Capacity is set for provisioned tables; nil for on-demand ones.
	Capacity *Capacity
	// Warm is the table's warm throughput; nil when the server reports
	// none (DynamoDB Local). WarmUpdating: a raise is under way.
	Warm         *Warm
	WarmUpdating bool
}

// Capacity is a provisioned table's throughput.
type Capacity struct {
	Read, Write int64
}

// Warm is a table's warm throughput: the read and write units per second
// it serves at once. DynamoDB raises it as the table's traffic peaks and
// never lowers it; a raise asked for is billed once. In a request, a zero
// field is left as it is.
type Warm struct {
	Read, Write int64
}

// DefaultWarm is what a new on-demand table serves at once, at no charge.
var DefaultWarm = Warm{Read: 12000, Write: 4000}

// Above returns the fields of w that exceed base (the others zero), and
// whether there is any: what a request must ask to bring base up to w.
func (w Warm) Above(base Warm) (Warm, bool) {
	var up Warm
	if w.Read > base.Read {
		up.Read = w.Read
	}
	if w.Write > base.Write {
		up.Write = w.Write
	}
	return up, up != Warm{}
}

// String says the figures, leaving out a zero one (a request's "as it is").
func (w Warm) String() string {
	switch {
	case w.Read == 0 && w.Write == 0:
		return "none"
	case w.Read == 0:
		return fmt.Sprintf("%d writes/s", w.Write)
	case w.Write == 0:
		return fmt.Sprintf("%d reads/s", w.Read)
	}
	return fmt.Sprintf("%d writes/s, %d reads/s", w.Write, w.Read)
}

// Spec is a table to create or bring up to date.
type Spec struct {
	Name  string
	Month string
	Tags  map[string]string
	// Capacity makes a provisioned table; nil is on-demand (PAY_PER_REQUEST).
	Capacity *Capacity
	// Warm is the warm throughput to create the table with (nil: a new
	// table's default; a zero field likewise).
	Warm *Warm
}

// Tables is the control plane of the ledger tables.
type Tables interface {
	// List returns the monthly tables of base: those named base-YYYY-MM
	// (ledger.SplitTable), and no other.
	List(ctx context.Context, base string) ([]Table, error)
	// Describe describes one table as it is now (ErrNotFound when it does
	// not exist): a retirement works from this, not from a listing another
	// run may have changed since.
	Describe(ctx context.Context, name string) (Table, error)
	// Ensure creates the table if it is absent (key schema of the ledger,
	// stream NEW_AND_OLD_IMAGES) and brings an existing one up to date:
	// PITR, deletion protection, tags. It waits until the table is active.
	Ensure(ctx context.Context, s Spec) (t Table, created bool, err error)
	// SetCapacity changes a provisioned table's throughput.
	SetCapacity(ctx context.Context, name string, c Capacity) error
	// RaiseWarm raises the table's warm throughput to w's non-zero fields
	// (DynamoDB refuses a value below the table's). raised is false when
	// the server has no warm throughput (DynamoDB Local): the adapter noted
	// the skip.
	RaiseWarm(ctx context.Context, name string, w Warm) (raised bool, err error)
	// DisableStream turns the table's stream off: its shards close, and
	// what they hold stays readable for 24 hours. A stream off already is
	// left so, without an error.
	DisableStream(ctx context.Context, name string) error
	// Protect turns deletion protection on or off (a table that has it so
	// already is left as it is).
	Protect(ctx context.Context, name string, on bool) error
	// Delete deletes the table (ErrNotFound when it is gone already).
	Delete(ctx context.Context, name string) error
	// Scan reads the whole table with a parallel Scan.
	Scan(ctx context.Context, name string, keepImages bool) (Scan, error)
}

// Scan is a table's content as the verification compares it.
type Scan struct {
	// State maps each item's key JSON to the checksum of its image, as
	// Replay computes them from the
	State State
	// Images maps key JSON to the item's image JSON (only when asked for:
	// the snapshot export writes them).
	Images   map[string]string
	Segments int
	Took     time.Duration
}

// StreamRecord is a record a stream still holds.
type StreamRecord struct {
	Shard          string
	SequenceNumber string
	CreatedAt      time.Time
}

// Streams reads what a table's stream still holds.
type Streams interface {
	// Records lists every record the stream still holds (24 hours' worth
	// at most), shard by shard, each shard's in order.
	Records(ctx context.Context, streamARN string) ([]StreamRecord, error)
}

// Counted is how far the stream's other readers (the tally, which adds
// the ledger's votes to the counters) have read: a retiring month's drain
// waits for them too, so its subscriptions go only once the counters hold
// every vote of the month.
type Counted interface {
	// Uncounted returns the records of the shards whose last record the
	// reader has not yet committed.
	Uncounted(ctx context.Context, table string, recs []StreamRecord) ([]StreamRecord, error)
	// Tallied returns how many of the table's items the reader counted,
	// over every shard whose progress it keeps: a drained month's total,
	// which the retirement compares with the items verified archived.
	Tallied(ctx context.Context, table string) (int64, error)
}

// Subscriptions are the stream readers' event source mappings: the
// archiver's and the tally's.
type Subscriptions interface {
	// Ensure subscribes every reader to the stream unless it has a
	// mapping of the stream already; created is true when one was made.
	Ensure(ctx context.Context, streamARN string) (created bool, err error)
	// Remove deletes every reader's mappings of the stream; none is not an error.
	Remove(ctx context.Context, streamARN string) (removed int, err error)
}

// Contents is a partition of the archive, read in full.
type Contents struct {
	// Files are the data files, with rows and checksums as read.
	Files []File
	Rows  int64
	// State is the rows replayed (Replay): the table they describe.
	State State
	// Sequences holds every archived sequence number (leading zeros
	// trimmed), for the drain check.
	Sequences map[string]bool
	Manifest  *Manifest // the partition's manifest, if any
}

// Has reports whether a sequence number is archived.
func (c Contents) Has(seq string) bool { return c.Sequences[trimZeros(seq)] }

// Compaction is what compacting a partition did.
type Compaction struct {
	FilesBefore int
	FilesAfter  int
	Merged      int // input files merged away
	Manifest    Manifest
}

// Partitions is the partition side of retirement.
type Partitions interface {
	// Read lists and reads every data file of the partition.
	Read(ctx context.Context, p Partition) (Contents, error)
	// Compact replays the partition into one file of its state
	// (pol.Replay: PlanReplay, ReplayRows) or merges its small files
	// (PlanCompaction), writes the manifest describing the files that
	// remain (with v as its verification), then deletes the merged inputs.
	Compact(ctx context.Context, p Partition, pol CompactionPolicy, sourceTable string, v Verification) (Compaction, error)
	// Write puts rows into the partition as one file at key.
	Write(ctx context.Context, key string, rows []Row) (File, error)
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
