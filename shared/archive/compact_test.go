package archive_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

var nov = archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}

func file(name string, bytes, rows int64) archive.File {
	return archive.File{Key: nov.Prefix() + name, Bytes: bytes, Rows: rows}
}

func TestPlanCompaction(t *testing.T) {
	pol := archive.CompactionPolicy{SmallBytes: 100, TargetBytes: 250}
	tests := []struct {
		name  string
		files []archive.File
		want  [][]string // each merge's input names
	}{
		{name: "nothing"},
		{name: "one small file is not a merge", files: []archive.File{file("stream-x-1.parquet", 10, 1)}},
		{name: "small files merge in key order",
			files: []archive.File{file("stream-x-3.parquet", 50, 5), file("stream-x-1.parquet", 50, 5), file("stream-x-2.parquet", 50, 5)},
			want:  [][]string{{"stream-x-1.parquet", "stream-x-2.parquet", "stream-x-3.parquet"}}},
		{name: "bins close at the target size",
			files: []archive.File{file("a.parquet", 90, 1), file("b.parquet", 90, 1), file("c.parquet", 90, 1), file("d.parquet", 90, 1), file("e.parquet", 90, 1)},
			want:  [][]string{{"a.parquet", "b.parquet"}, {"c.parquet", "d.parquet"}}},
		{name: "large files, the manifest and other partitions stay",
			files: []archive.File{
				file("big.parquet", 100, 1000), file("s1.parquet", 10, 1), file("_manifest.json", 1, 0), file("s2.parquet", 10, 1),
				{Key: "table=ddbpipe-votes/month=2026-12/s3.parquet", Bytes: 10}, file("notes.txt", 1, 0),
			},
			want: [][]string{{"s1.parquet", "s2.parquet"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := archive.PlanCompaction(nov, tt.files, pol)
			var got [][]string
			for _, m := range plan {
				var names []string
				var rows, size int64
				for _, f := range m.Inputs {
					names = append(names, strings.TrimPrefix(f.Key, nov.Prefix()))
					rows += f.Rows
					size += f.Bytes
				}
				got = append(got, names)
				if m.Rows != rows || m.Bytes != size {
					t.Errorf("merge totals %d rows %d bytes, inputs add up to %d, %d", m.Rows, m.Bytes, rows, size)
				}
				if m.Output != archive.CompactedKey(nov, m.Inputs) || !strings.HasPrefix(m.Output, nov.Prefix()+"compacted-") {
					t.Errorf("merge output %s", m.Output)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompactedKeyIsDeterministic(t *testing.T) {
	a := []archive.File{file("x.parquet", 1, 1), file("y.parquet", 1, 1)}
	b := []archive.File{a[1], a[0]}
	if archive.CompactedKey(nov, a) != archive.CompactedKey(nov, b) {
		t.Error("same inputs in another order name another output")
	}
	if archive.CompactedKey(nov, a) == archive.CompactedKey(nov, a[:1]) {
		t.Error("different inputs name the same output")
	}
}

// Compacting 100,000 records archived in batches of 100 leaves at most two
// objects (the goal), with the default policy and ~40 bytes a record.
func TestDefaultPolicyGoal(t *testing.T) {
	var files []archive.File
	for i := range 1000 {
		files = append(files, file(fmt.Sprintf("stream-x-%s.parquet", archive.PadSequence(fmt.Sprint(i*100))), 100*40, 100))
	}
	plan := archive.PlanCompaction(nov, files, archive.DefaultCompactionPolicy)
	if len(plan) > 2 {
		t.Errorf("%d merged files, want at most 2", len(plan))
	}
	var rows int64
	for _, m := range plan {
		rows += m.Rows
	}
	if rows != 100000 {
		t.Errorf("plan covers %d rows, want 100000", rows)
	}
}

func TestMergeRows(t *testing.T) {
	a := []archive.Row{row("3", "INSERT", "k3", "{}"), row("1", "INSERT", "k1", "{}")}
	b := []archive.Row{row("2", "INSERT", "k2", "{}"), row("3", "INSERT", "k3", "{}"), row("10", "INSERT", "k10", "{}")}
	got := archive.MergeRows(a, b)
	var seqs []string
	for _, r := range got {
		seqs = append(seqs, r.SequenceNumber)
	}
	if want := []string{"1", "2", "3", "10"}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("MergeRows sequences %v, want %v", seqs, want)
	}
}

func TestManifest(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	files := []archive.File{
		{Key: nov.Prefix() + "compacted-b.parquet", Rows: 7, Bytes: 700, SHA256: "bb"},
		{Key: nov.Prefix() + "compacted-a.parquet", Rows: 3, Bytes: 300, SHA256: "aa"},
	}
	m := archive.NewManifest(nov, files, []string{nov.Prefix() + "stream-2.parquet", nov.Prefix() + "stream-1.parquet"}, now)
	if m.Rows != 10 || m.Bytes != 1000 || m.Files[0].Key != nov.Prefix()+"compacted-a.parquet" {
		t.Fatalf("NewManifest = %+v", m)
	}
	b, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := archive.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip\n got %+v\nwant %+v", back, m)
	}

	broken := []struct {
		name   string
		change func(*archive.Manifest)
	}{
		{"wrong version", func(m *archive.Manifest) { m.Version = 9 }},
		{"bad month", func(m *archive.Manifest) { m.Month = "2026-13" }},
		{"no table", func(m *archive.Manifest) { m.Table = "" }},
		{"file outside the partition", func(m *archive.Manifest) { m.Files[0].Key = "table=x/month=2026-11/a.parquet" }},
		{"file twice", func(m *archive.Manifest) { m.Files[1].Key = m.Files[0].Key }},
		{"live and replaced", func(m *archive.Manifest) { m.Replaced = append(m.Replaced, m.Files[0].Key) }},
		{"totals off", func(m *archive.Manifest) { m.Rows++ }},
		{"negative", func(m *archive.Manifest) { m.Files[0].Rows, m.Files[1].Rows = -1, 11 }},
	}
	for _, tt := range broken {
		t.Run(tt.name, func(t *testing.T) {
			c := archive.NewManifest(nov, files, nil, now)
			tt.change(&c)
			if err := c.Validate(); !errors.Is(err, archive.ErrInvalidManifest) {
				t.Errorf("Validate = %v, want ErrInvalidManifest", err)
			}
			if _, err := c.JSON(); err == nil {
				t.Error("JSON of an invalid manifest succeeded")
			}
		})
	}
	if _, err := archive.ParseManifest([]byte(`{"version":1,"surprise":true}`)); !errors.Is(err, archive.ErrInvalidManifest) {
		t.Errorf("unknown field: %v, want ErrInvalidManifest", err)
	}
}

func TestManifestDrift(t *testing.T) {
	a := archive.File{Key: nov.Prefix() + "compacted-a.parquet", Rows: 3, Bytes: 300, SHA256: "aa"}
	b := archive.File{Key: nov.Prefix() + "compacted-b.parquet", Rows: 7, Bytes: 700, SHA256: "bb"}
	old := nov.Prefix() + "stream-1.parquet"
	m := archive.NewManifest(nov, []archive.File{a, b}, []string{old}, time.Now())
	manifest := archive.File{Key: nov.ManifestKey(), Bytes: 10}
	late := archive.File{Key: nov.Prefix() + "stream-9.parquet", Bytes: 5}
	changed := b
	changed.SHA256 = "cc"
	tests := []struct {
		name   string
		listed []archive.File
		want   archive.Drift
	}{
		{name: "exact", listed: []archive.File{a, b, manifest}},
		{name: "without checksums, sizes match", listed: []archive.File{{Key: a.Key, Bytes: 300}, {Key: b.Key, Bytes: 700}}},
		{name: "crashed before deleting the replaced", listed: []archive.File{a, b, {Key: old, Bytes: 1}}, want: archive.Drift{Leftover: []string{old}}},
		{name: "late file", listed: []archive.File{a, b, late}, want: archive.Drift{Unlisted: []string{late.Key}}},
		{name: "deleted file", listed: []archive.File{b}, want: archive.Drift{Missing: []string{a.Key}}},
		{name: "rewritten file", listed: []archive.File{a, changed}, want: archive.Drift{Changed: []string{b.Key}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.Drift(tt.listed)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Drift = %+v, want %+v", got, tt.want)
			}
			if got.OK() != reflect.DeepEqual(tt.want, archive.Drift{}) {
				t.Errorf("OK = %v", got.OK())
			}
		})
	}
}

func TestPlanReplay(t *testing.T) {
	tests := []struct {
		name   string
		files  []archive.File
		inputs []string
		named  []string // the inputs the output is named for
	}{
		{name: "nothing"},
		{name: "one compacted file is done", files: []archive.File{file("compacted-00.parquet", 10, 1), file("_manifest.json", 1, 0)}},
		{name: "one stream file is replayed", files: []archive.File{file("stream-x-1.parquet", 10, 1)},
			inputs: []string{"stream-x-1.parquet"}, named: []string{"stream-x-1.parquet"}},
		{name: "every data file, large ones too; the manifest and other partitions stay",
			files: []archive.File{
				file("stream-x-2.parquet", 1<<40, 5), file("stream-x-1.parquet", 50, 5), file("_manifest.json", 1, 0),
				{Key: "table=ddbpipe-votes/month=2026-12/s3.parquet", Bytes: 10}, file("notes.txt", 1, 0), file("backfill-9.parquet", 5, 1),
			},
			inputs: []string{"backfill-9.parquet", "stream-x-1.parquet", "stream-x-2.parquet"},
			named:  []string{"backfill-9.parquet", "stream-x-1.parquet", "stream-x-2.parquet"}},
		{name: "a crash left the output beside its inputs: the same output",
			files:  []archive.File{file("stream-x-1.parquet", 50, 5), file("compacted-aa.parquet", 50, 5)},
			inputs: []string{"compacted-aa.parquet", "stream-x-1.parquet"}, named: []string{"stream-x-1.parquet"}},
		{name: "two compacted files",
			files:  []archive.File{file("compacted-aa.parquet", 50, 5), file("compacted-bb.parquet", 50, 5)},
			inputs: []string{"compacted-aa.parquet", "compacted-bb.parquet"}, named: []string{"compacted-aa.parquet", "compacted-bb.parquet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := archive.PlanReplay(nov, tt.files)
			if ok != (tt.inputs != nil) {
				t.Fatalf("PlanReplay ok = %v, want %v", ok, tt.inputs != nil)
			}
			if !ok {
				return
			}
			var names []string
			var named []archive.File
			for _, f := range m.Inputs {
				names = append(names, strings.TrimPrefix(f.Key, nov.Prefix()))
			}
			for _, n := range tt.named {
				named = append(named, file(n, 0, 0))
			}
			if !reflect.DeepEqual(names, tt.inputs) {
				t.Errorf("inputs %v, want %v", names, tt.inputs)
			}
			if want := archive.CompactedKey(nov, named); m.Output != want {
				t.Errorf("output %s, want %s (named for %v)", m.Output, want, tt.named)
			}
		})
	}
}

// ReplayRows keeps each item's last change once, marked replayed, and a
// deleted item's REMOVE; replaying its output again gives the same rows.
func TestReplayRows(t *testing.T) {
	r := func(stream, seq, keys, event, img string) archive.Row {
		return archive.Row{Table: "t", Month: "2026-11", Stream: stream, SequenceNumber: seq, Keys: keys, EventName: event, NewImage: img}
	}
	rows := []archive.Row{
		r("s", "1", "a", archive.EventInsert, "a1"),
		r("s", "3", "a", archive.EventModify, "a2"),
		r("s", "2", "b", archive.EventInsert, "b1"),
		r("s", "4", "b", archive.EventRemove, ""),
		r("s", "3", "a", archive.EventModify, "a2"), // the same record twice
		r("s", "5", "c", archive.EventInsert, "c1"),
	}
	got := archive.ReplayRows(rows)
	want := []archive.Row{rows[1], rows[3], rows[5]}
	for i := range want {
		want[i].Replayed = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReplayRows\n got %+v\nwant %+v", got, want)
	}
	if again := archive.ReplayRows(append(got, rows...)); !reflect.DeepEqual(again, want) {
		t.Errorf("replayed again with the stream's rows\n got %+v\nwant %+v", again, want)
	}
}
