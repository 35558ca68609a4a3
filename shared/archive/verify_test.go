package archive_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

func row(seq, event, keys, newImage string) archive.Row {
	return archive.Row{Table: "t", Month: "2026-11", Stream: "s", EventName: event, SequenceNumber: seq, Keys: keys, NewImage: newImage}
}

func TestReplayAndVerify(t *testing.T) {
	const (
		kA, kB, kC = `{"pk":"a"}`, `{"pk":"b"}`, `{"pk":"c"}`
		a1, a2     = `{"n":1,"pk":"a"}`, `{"n":2,"pk":"a"}`
		b1, c1     = `{"pk":"b"}`, `{"pk":"c"}`
	)
	sum := archive.ChecksumJSON
	tests := []struct {
		name      string
		rows      []archive.Row
		table     archive.State
		wantState archive.State
		want      archive.Report
	}{
		{
			name:      "inserts and a modify match",
			rows:      []archive.Row{row("1", "INSERT", kA, a1), row("2", "INSERT", kB, b1), row("3", "MODIFY", kA, a2)},
			table:     archive.State{kA: sum(a2), kB: sum(b1)},
			wantState: archive.State{kA: sum(a2), kB: sum(b1)},
			want:      archive.Report{TableItems: 2, ArchivedItems: 2},
		},
		{
			name:      "order and duplicates do not matter",
			rows:      []archive.Row{row("3", "MODIFY", kA, a2), row("1", "INSERT", kA, a1), row("3", "MODIFY", kA, a2), row("1", "INSERT", kA, a1)},
			table:     archive.State{kA: sum(a2)},
			wantState: archive.State{kA: sum(a2)},
			want:      archive.Report{TableItems: 1, ArchivedItems: 1},
		},
		{
			name:      "numeric sequence order, not text",
			rows:      []archive.Row{row("10", "MODIFY", kA, a2), row("9", "INSERT", kA, a1)},
			table:     archive.State{kA: sum(a2)},
			wantState: archive.State{kA: sum(a2)},
			want:      archive.Report{TableItems: 1, ArchivedItems: 1},
		},
		{
			name:      "remove takes the key out; reinsert brings it back",
			rows:      []archive.Row{row("1", "INSERT", kA, a1), row("2", "REMOVE", kA, ""), row("3", "INSERT", kB, b1), row("4", "REMOVE", kB, ""), row("5", "INSERT", kB, b1)},
			table:     archive.State{kB: sum(b1)},
			wantState: archive.State{kB: sum(b1)},
			want:      archive.Report{TableItems: 1, ArchivedItems: 1},
		},
		{
			name:      "a lost file: missing items",
			rows:      []archive.Row{row("1", "INSERT", kA, a1)},
			table:     archive.State{kA: sum(a1), kB: sum(b1), kC: sum(c1)},
			wantState: archive.State{kA: sum(a1)},
			want:      archive.Report{TableItems: 3, ArchivedItems: 1, Missing: []string{kB, kC}},
		},
		{
			name:      "a lost remove: extra item",
			rows:      []archive.Row{row("1", "INSERT", kA, a1), row("2", "INSERT", kB, b1)},
			table:     archive.State{kA: sum(a1)},
			wantState: archive.State{kA: sum(a1), kB: sum(b1)},
			want:      archive.Report{TableItems: 1, ArchivedItems: 2, Extra: []string{kB}},
		},
		{
			name:      "a lost modify: different image",
			rows:      []archive.Row{row("1", "INSERT", kA, a1), row("2", "INSERT", kC, c1)},
			table:     archive.State{kA: sum(a2), kC: sum(c1)},
			wantState: archive.State{kA: sum(a1), kC: sum(c1)},
			want:      archive.Report{TableItems: 2, ArchivedItems: 2, Different: []string{kA}},
		},
		{
			name:      "empty table and empty archive",
			table:     archive.State{},
			wantState: archive.State{},
			want:      archive.Report{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := archive.NewReplay()
			for _, row := range tt.rows {
				if err := r.Add(row); err != nil {
					t.Fatal(err)
				}
			}
			got := r.State()
			if !reflect.DeepEqual(got, tt.wantState) {
				t.Errorf("State = %v, want %v", got, tt.wantState)
			}
			rep := archive.Verify(got, tt.table)
			if !reflect.DeepEqual(rep, tt.want) {
				t.Errorf("Verify = %+v, want %+v", rep, tt.want)
			}
			wantOK := len(tt.want.Missing)+len(tt.want.Extra)+len(tt.want.Different) == 0
			if rep.OK() != wantOK {
				t.Errorf("OK = %v, want %v (%s)", rep.OK(), wantOK, rep)
			}
		})
	}
}

func TestReplayNeedsNewImages(t *testing.T) {
	err := archive.NewReplay().Add(row("1", "MODIFY", `{"pk":"a"}`, ""))
	if !errors.Is(err, archive.ErrInvalidRecord) {
		t.Fatalf("Add of a MODIFY without new image: %v, want ErrInvalidRecord", err)
	}
}

func TestVerifyFromScannedItems(t *testing.T) {
	// The table side comes from a Scan: full items, keyed by their key attributes.
	item := archive.Item{"pk": "color#3", "sk": "voter-1", "tags": []string{"b", "a"}, "n": archive.Number("1")}
	k, err := archive.KeyJSON(item, "pk", "sk")
	if err != nil {
		t.Fatal(err)
	}
	c, err := archive.Checksum(item)
	if err != nil {
		t.Fatal(err)
	}
	rec := record("1", func(r *archive.Record) {
		r.Keys = archive.Item{"sk": "voter-1", "pk": "color#3"}
		r.NewImage = archive.Item{"pk": "color#3", "sk": "voter-1", "tags": []string{"a", "b"}, "n": archive.Number("1")}
	})
	rw, err := archive.NewRow(rec)
	if err != nil {
		t.Fatal(err)
	}
	r := archive.NewReplay()
	if err := r.Add(rw); err != nil {
		t.Fatal(err)
	}
	if rep := archive.Verify(r.State(), archive.State{k: c}); !rep.OK() {
		t.Errorf("stream row and scanned item do not match: %s (%+v)", rep, rep)
	}
}

func TestSupersedes(t *testing.T) {
	at := func(stream, seq string, sec int) archive.Row {
		return archive.Row{Stream: stream, SequenceNumber: seq, ApproximateCreationTime: time.Date(2026, 11, 20, 0, 0, sec, 0, time.UTC)}
	}
	stream := func(seq string, sec int) archive.Row { return at("s", seq, sec) }
	backfill := func(sec int) archive.Row {
		return at(archive.BackfillStream, archive.SnapshotSequence(time.Unix(int64(sec), 0)), sec)
	}
	snapshot := at(archive.SnapshotStream, archive.SnapshotSequence(time.Unix(50, 0)), 50)
	tests := []struct {
		name string
		a, b archive.Row
		want bool
	}{
		{"greater sequence", stream("200", 1), stream("100", 9), true},
		{"smaller sequence", stream("99", 9), stream("100", 1), false},
		{"same record", stream("100", 1), stream("100", 1), false},
		{"stream record after the watermark beats the backfill", stream("1", 30), backfill(30), true},
		{"stream record before the watermark loses to it", stream("999", 29), backfill(30), false},
		{"backfill beats a stream record before its watermark", backfill(30), stream("999", 29), true},
		{"backfill loses to a record at its watermark", backfill(30), stream("1", 30), false},
		{"later backfill wins", backfill(40), backfill(30), true},
		{"earlier backfill loses", backfill(30), backfill(40), false},
		{"snapshot beats a backfill", snapshot, backfill(40), true},
		{"backfill loses to a snapshot", backfill(40), snapshot, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := archive.Supersedes(tt.a, tt.b); got != tt.want {
				t.Errorf("Supersedes = %v, want %v", got, tt.want)
			}
		})
	}
}
