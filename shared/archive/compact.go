package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// File is one data object in a partition, as listed or as written.
type File struct {
	Key         string `json:"key"`
	Rows        int64  `json:"rows"`
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256,omitempty"` // hex SHA-256 of the object's bytes
	MinSequence string `json:"minSequence,omitempty"`
	MaxSequence string `json:"maxSequence,omitempty"`
}

// CompactionPolicy says how a partition is compacted: replayed into one
// file of the month's state (Replay), or its small files merged.
type CompactionPolicy struct {
	// Replay: the partition's files are replaced by one file of its
	// replayed state (PlanReplay, ReplayRows): one row per item, so
	// counting rows counts items. SmallBytes and TargetBytes then do not
	// apply: the state is one file (a month is held in memory to replay
	// it, as the verification holds its keys), written in row groups of
	// up to 128 Ki rows that readers skip through.
	Replay bool
	// SmallBytes: files under this size are merged; larger ones stay.
	SmallBytes int64
	// TargetBytes: a merged file's inputs add up to at most this size
	// (a single input larger than it is never merged).
	TargetBytes int64
}

// DefaultCompactionPolicy replays a month into one file of its state; a
// policy without Replay merges files under 32 MiB into files of up to
// 128 MiB.
var DefaultCompactionPolicy = CompactionPolicy{Replay: true, SmallBytes: 32 << 20, TargetBytes: 128 << 20}

// Merge is one step of a compaction plan: read Inputs, write their rows
// (MergeRows) to Output.
type Merge struct {
	Output string
	Inputs []File
	Rows   int64
	Bytes  int64 // the inputs' total size
}

// CompactedKey names a merged file from its inputs, so that a compaction
// that is run again after a crash writes the same object:
// table=<base>/month=<YYYY-MM>/compacted-<16 hex digits>.parquet.
func CompactedKey(p Partition, inputs []File) string {
	keys := make([]string, len(inputs))
	for i, f := range inputs {
		keys[i] = f.Key
	}
	sort.Strings(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, "\n")))
	return p.Prefix() + "compacted-" + hex.EncodeToString(sum[:8]) + ".parquet"
}

// PlanCompaction groups a partition's small files, in key order (for one
// stream, the order of their records), into merges of at most TargetBytes
// each. Large files, files outside the partition and the manifest are left
// alone; a group of one file is not a merge. Files are merged only once the
// month is drained: a file written during compaction would not be in the
// plan.
func PlanCompaction(p Partition, files []File, pol CompactionPolicy) []Merge {
	if pol.TargetBytes <= 0 {
		pol = DefaultCompactionPolicy
	}
	var small []File
	for _, f := range files {
		if strings.HasPrefix(f.Key, p.Prefix()) && f.Key != p.ManifestKey() && strings.HasSuffix(f.Key, ".parquet") && f.Bytes < pol.SmallBytes {
			small = append(small, f)
		}
	}
	sort.Slice(small, func(i, j int) bool { return small[i].Key < small[j].Key })
	var plan []Merge
	var cur []File
	var size int64
	flush := func() {
		if len(cur) > 1 {
			m := Merge{Output: CompactedKey(p, cur), Inputs: cur}
			for _, f := range cur {
				m.Rows += f.Rows
				m.Bytes += f.Bytes
			}
			plan = append(plan, m)
		}
		cur, size = nil, 0
	}
	for _, f := range small {
		if len(cur) > 0 && size+f.Bytes > pol.TargetBytes {
			flush()
		}
		cur = append(cur, f)
		size += f.Bytes
	}
	flush()
	return plan
}

// PlanReplay is a replay compaction's one merge: every data file of the
// partition into CompactedKey of the files not written by a compaction (a
// run that crashed after writing its output, or a month compacted before
// late files arrived, names the same output as long as those files are
// the same). false when there is nothing to do: no file, or a single
// compacted file.
func PlanReplay(p Partition, files []File) (Merge, bool) {
	var inputs, fresh []File
	for _, f := range files {
		if strings.HasPrefix(f.Key, p.Prefix()) && f.Key != p.ManifestKey() && strings.HasSuffix(f.Key, ".parquet") {
			inputs = append(inputs, f)
			if !strings.HasPrefix(f.Key, p.Prefix()+"compacted-") {
				fresh = append(fresh, f)
			}
		}
	}
	if len(inputs) == 0 || (len(inputs) == 1 && len(fresh) == 0) {
		return Merge{}, false
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Key < inputs[j].Key })
	if len(fresh) == 0 {
		fresh = inputs // several compacted files: a name of their own
	}
	m := Merge{Output: CompactedKey(p, fresh), Inputs: inputs}
	for _, f := range inputs {
		m.Rows += f.Rows
		m.Bytes += f.Bytes
	}
	return m, true
}

// MergeRows joins the rows of several files into one file's rows: sorted by
// sequence number, with any record present twice (a batch archived twice
// under different keys) kept once. A record is its stream, sequence number
// and keys (a snapshot's rows share one sequence number).
func MergeRows(sets ...[]Row) []Row {
	type id struct{ stream, seq, keys string }
	seen := map[id]bool{}
	var out []Row
	for _, rows := range sets {
		for _, r := range rows {
			k := id{r.Stream, ledger.SeqKey(r.SequenceNumber), r.Keys}
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if c := ledger.CompareSeq(out[i].SequenceNumber, out[j].SequenceNumber); c != 0 {
			return c < 0
		}
		return out[i].Keys < out[j].Keys
	})
	return out
}

// ReplayRows is a month's replayed state: for each item, its last change
// (the row that Supersedes the others, as Replay decides), marked
// Replayed; an item whose last change is a REMOVE keeps that REMOVE, so a
// deletion stays visible. Rows already replayed replay to themselves, so a
// compaction run again writes the same rows. The result is sorted by keys.
func ReplayRows(rows []Row) []Row {
	last := map[string]int{}
	for i, r := range rows {
		j, seen := last[r.Keys]
		if !seen || Supersedes(r, rows[j]) {
			last[r.Keys] = i
		}
	}
	out := make([]Row, 0, len(last))
	for _, i := range last {
		r := rows[i]
		r.Replayed = true
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Keys < out[j].Keys })
	return out
}

// ManifestVersion is the version of the manifest format written.
const ManifestVersion = 1

// Manifest is a partition's _manifest.json, written when a month is
// retired: the files that make the month, with their row counts and
// checksums. Replaced lists the small files a compaction merged; they are
// deleted after the manifest is written, and a run that finds any of them
// still present (it crashed in between) deletes them first.
type Manifest struct {
	Version      int           `json:"version"`
	Table        string        `json:"table"`
	Month        string        `json:"month"`
	SourceTable  string        `json:"sourceTable,omitempty"` // the DynamoDB table archived
	CreatedAt    time.Time     `json:"createdAt"`
	Rows         int64         `json:"rows"`
	Bytes        int64         `json:"bytes"`
	Files        []File        `json:"files"`
	Replaced     []string      `json:"replaced,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
}

// Verification records the check that allowed the table's deletion.
type Verification struct {
	At            time.Time `json:"at"`
	TableItems    int       `json:"tableItems"`
	ArchivedItems int       `json:"archivedItems"`
	OK            bool      `json:"ok"`
	// Snapshot is true when the archive was completed from a table snapshot
	// because the stream had lost records.
	Snapshot bool `json:"snapshot,omitempty"`
}

// NewManifest describes a partition made of files (sorted by key, totals
// summed).
func NewManifest(p Partition, files []File, replaced []string, now time.Time) Manifest {
	m := Manifest{Version: ManifestVersion, Table: p.Table, Month: p.Month, CreatedAt: now.UTC(),
		Files: append([]File{}, files...), Replaced: append([]string(nil), replaced...)}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Key < m.Files[j].Key })
	sort.Strings(m.Replaced)
	for _, f := range m.Files {
		m.Rows += f.Rows
		m.Bytes += f.Bytes
	}
	return m
}

// Partition is the manifest's partition.
func (m Manifest) Partition() Partition { return Partition{Table: m.Table, Month: m.Month} }

// Validate checks that the manifest adds up: its files are in its
// partition, listed once, not also replaced, and sum to its totals.
func (m Manifest) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidManifest, fmt.Sprintf(format, a...))
	}
	if m.Version != ManifestVersion {
		return bad("version %d, want %d", m.Version, ManifestVersion)
	}
	if _, err := ledger.Opens(m.Month); m.Table == "" || err != nil {
		return bad("table %q, month %q", m.Table, m.Month)
	}
	prefix := m.Partition().Prefix()
	live := map[string]bool{}
	var rows, size int64
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Key, prefix) {
			return bad("file %s is outside %s", f.Key, prefix)
		}
		if live[f.Key] {
			return bad("file %s listed twice", f.Key)
		}
		if f.Rows < 0 || f.Bytes < 0 {
			return bad("file %s has negative counts", f.Key)
		}
		live[f.Key] = true
		rows += f.Rows
		size += f.Bytes
	}
	for _, k := range m.Replaced {
		if live[k] {
			return bad("file %s is both live and replaced", k)
		}
	}
	if rows != m.Rows || size != m.Bytes {
		return bad("totals %d rows, %d bytes; files add up to %d rows, %d bytes", m.Rows, m.Bytes, rows, size)
	}
	return nil
}

// JSON encodes the manifest, indented for people.
func (m Manifest) JSON() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("archive: encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// ParseManifest decodes and validates a manifest.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	return m, m.Validate()
}

// Drift compares a manifest with the partition's objects as listed now.
type Drift struct {
	Leftover []string // replaced by a compaction but still present: delete them
	Unlisted []string // present but not in the manifest: written since (late records)
	Missing  []string // in the manifest but gone: the archive is incomplete
	Changed  []string // present with another size or checksum than the manifest's
}

// OK is true when the listing is exactly the manifest's files.
func (d Drift) OK() bool {
	return len(d.Leftover)+len(d.Unlisted)+len(d.Missing)+len(d.Changed) == 0
}

// Drift compares the manifest with listed objects (data files of the
// manifest's partition; the manifest itself is ignored). A listed file
// without a checksum is compared by size only.
func (m Manifest) Drift(listed []File) Drift {
	var d Drift
	live := map[string]File{}
	for _, f := range m.Files {
		live[f.Key] = f
	}
	replaced := map[string]bool{}
	for _, k := range m.Replaced {
		replaced[k] = true
	}
	present := map[string]bool{}
	for _, f := range listed {
		if f.Key == m.Partition().ManifestKey() {
			continue
		}
		present[f.Key] = true
		want, ok := live[f.Key]
		switch {
		case replaced[f.Key]:
			d.Leftover = append(d.Leftover, f.Key)
		case !ok:
			d.Unlisted = append(d.Unlisted, f.Key)
		case want.Bytes != f.Bytes || (f.SHA256 != "" && want.SHA256 != "" && want.SHA256 != f.SHA256):
			d.Changed = append(d.Changed, f.Key)
		}
	}
	for _, f := range m.Files {
		if !present[f.Key] {
			d.Missing = append(d.Missing, f.Key)
		}
	}
	sort.Strings(d.Leftover)
	sort.Strings(d.Unlisted)
	sort.Strings(d.Missing)
	sort.Strings(d.Changed)
	return d
}
