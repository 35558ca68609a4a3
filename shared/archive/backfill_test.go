package archive

import (
	"strings"
	"testing"
	"time"
)

// backfillCase: a table and an archive that differ in each way a lost
// record can make them differ.
type backfillCase struct {
	p        Partition
	archived []Row // the stream's rows the archive holds
	scan     Scan  // the table now
	images   map[string]string
	keys     map[string]string // item name → key JSON
}

func newBackfillCase(t *testing.T) backfillCase {
	t.Helper()
	c := backfillCase{p: Partition{Table: "app-votes", Month: "2026-11"}, images: map[string]string{}, keys: map[string]string{}}
	item := func(name string, n int) (key, img string) {
		it := Item{"pk": "poll#p", "sk": name, "n": Number(string(rune('0' + n)))}
		key, err := KeyJSON(it, "pk", "sk")
		if err != nil {
			t.Fatal(err)
		}
		if img, err = ImageJSON(it); err != nil {
			t.Fatal(err)
		}
		c.keys[name] = key
		return key, img
	}
	seq := 100
	stream := func(event, name string, n int, at time.Time) Row {
		key, img := item(name, n)
		seq++
		r := Row{Table: c.p.Table, Month: c.p.Month, Stream: "2026-11-01T00:00:00.000", EventName: event,
			SequenceNumber:          "4900000000000000000000" + string(rune('0'+seq/100)) + string(rune('0'+seq/10%10)) + string(rune('0'+seq%10)),
			ApproximateCreationTime: at, Keys: key}
		if event != EventRemove {
			r.NewImage = img
		}
		return r
	}
	at := date(2026, 11, 20, 10)
	c.archived = []Row{
		stream(EventInsert, "same", 1, at),    // archived as the table holds it
		stream(EventInsert, "stale", 1, at),   // its MODIFY to 2 was lost
		stream(EventInsert, "deleted", 1, at), // its REMOVE was lost
		stream(EventInsert, "gone", 1, at),    // removed, and the archive knows
		stream(EventRemove, "gone", 0, at.Add(time.Hour)),
	}
	c.scan = Scan{State: State{}, Images: map[string]string{}}
	for name, n := range map[string]int{"same": 1, "stale": 2, "missing": 1} { // "missing": its INSERT was lost
		key, img := item(name, n)
		c.scan.State[key] = ChecksumJSON(img)
		c.scan.Images[key] = img
		c.images[name] = img
	}
	return c
}

func (c backfillCase) archivedState(t *testing.T, extra ...Row) State {
	t.Helper()
	r := NewReplay()
	for _, row := range append(append([]Row{}, c.archived...), extra...) {
		if err := r.Add(row); err != nil {
			t.Fatal(err)
		}
	}
	return r.State()
}

func TestBackfillRowsAreTheDifference(t *testing.T) {
	c := newBackfillCase(t)
	archived := c.archivedState(t)
	scanStart := date(2026, 11, 22, 9).Add(1500 * time.Millisecond)
	rows, err := BackfillRows(c.p, c.scan, archived, scanStart)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{c.keys["stale"]: EventModify, c.keys["missing"]: EventModify, c.keys["deleted"]: EventRemove}
	if len(rows) != len(want) {
		t.Fatalf("%d rows %+v, want %d: the items archived identically (or removed, and archived so) get none", len(rows), rows, len(want))
	}
	watermark := date(2026, 11, 22, 9).Add(time.Second)
	for _, r := range rows {
		if want[r.Keys] != r.EventName {
			t.Errorf("row %s %s, want %s", r.EventName, r.Keys, want[r.Keys])
		}
		if r.Stream != BackfillStream || !r.ApproximateCreationTime.Equal(watermark) || r.SequenceNumber != SnapshotSequence(watermark) ||
			r.Table != c.p.Table || r.Month != c.p.Month || r.Replayed {
			t.Errorf("row %+v: want stream %q, recorded at the watermark %s with its sequence", r, BackfillStream, watermark)
		}
		if r.EventName == EventModify && r.NewImage != c.scan.Images[r.Keys] {
			t.Errorf("%s: image %s, want the scanned %s", r.Keys, r.NewImage, c.scan.Images[r.Keys])
		}
	}
	if got := CountBackfill(rows, archived); got != (Backfill{Missing: 1, Different: 1, Removed: 1}) || got.Rows() != 3 {
		t.Errorf("counts %+v (%s)", got, got)
	}
	if rep := Verify(c.archivedState(t, rows...), c.scan.State); !rep.OK() {
		t.Errorf("after the backfill: %s", rep)
	}
	if rep := Verify(stateOf(t, ReplayRows(append(append([]Row{}, c.archived...), rows...))), c.scan.State); !rep.OK() {
		t.Errorf("the replayed rows after the backfill: %s", rep)
	}
	if k := BackfillKey(c.p, scanStart); k != "table=app-votes/month=2026-11/backfill-"+SnapshotSequence(watermark)+".parquet" {
		t.Errorf("key %s", k)
	}
}

// stateOf replays rows (ReplayRows' output, say) into a state.
func stateOf(t *testing.T, rows []Row) State {
	t.Helper()
	r := NewReplay()
	for _, row := range rows {
		if err := r.Add(row); err != nil {
			t.Fatal(err)
		}
	}
	return r.State()
}

// The stream keeps flowing during a backfill: a change recorded at or after
// the watermark wins over the backfill's row, in Replay and in ReplayRows;
// a record from before the watermark that arrives late loses to it.
func TestBackfillStreamRecordAfterTheWatermarkWins(t *testing.T) {
	c := newBackfillCase(t)
	watermark := date(2026, 11, 22, 9)
	rows, err := BackfillRows(c.p, c.scan, c.archivedState(t), watermark)
	if err != nil {
		t.Fatal(err)
	}
	newer := Item{"pk": "poll#p", "sk": "stale", "n": Number("3")}
	img, _ := ImageJSON(newer)
	for _, tt := range []struct {
		name string
		at   time.Time
		wins bool
	}{
		{"recorded at the watermark", watermark, true},
		{"recorded after", watermark.Add(time.Minute), true},
		{"recorded a second before (the Scan saw it)", watermark.Add(-time.Second), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A small sequence number: Supersedes orders a backfill and a
			// stream record by time, not by the backfill's 9… sequence.
			rec := Row{Table: c.p.Table, Month: c.p.Month, Stream: "2026-11-01T00:00:00.000", EventName: EventModify,
				SequenceNumber: "49000000000000000000000999", ApproximateCreationTime: tt.at, Keys: c.keys["stale"], NewImage: img}
			want := c.images["stale"]
			if tt.wins {
				want = img
			}
			for _, order := range [][]Row{append(append([]Row{}, rows...), rec), append([]Row{rec}, rows...)} {
				all := append(append([]Row{}, c.archived...), order...)
				if got := c.archivedState(t, order...)[c.keys["stale"]]; got != ChecksumJSON(want) {
					t.Errorf("Replay keeps %s, want the image %s", got, want)
				}
				var kept *Row
				for _, r := range ReplayRows(all) {
					if r.Keys == c.keys["stale"] {
						kept = &r
					}
				}
				if kept == nil || kept.NewImage != want || !kept.Replayed {
					t.Errorf("ReplayRows keeps %+v, want the row with %s", kept, want)
				}
			}
		})
	}
}

func TestSecondBackfillWritesNothing(t *testing.T) {
	c := newBackfillCase(t)
	first, err := BackfillRows(c.p, c.scan, c.archivedState(t), date(2026, 11, 22, 9))
	if err != nil || len(first) == 0 {
		t.Fatalf("first backfill: %d rows, %v", len(first), err)
	}
	again, err := BackfillRows(c.p, c.scan, c.archivedState(t, first...), date(2026, 11, 22, 10))
	if err != nil || len(again) != 0 {
		t.Errorf("second backfill: %+v, %v; want no rows", again, err)
	}
	// A healthy archive: nothing either.
	healthy := Scan{State: State{}, Images: map[string]string{}}
	for k, sum := range c.archivedState(t) {
		healthy.State[k] = sum
	}
	for _, r := range c.archived {
		if _, ok := healthy.State[r.Keys]; ok {
			healthy.Images[r.Keys] = r.NewImage
		}
	}
	if rows, err := BackfillRows(c.p, healthy, c.archivedState(t), date(2026, 11, 22, 9)); err != nil || len(rows) != 0 {
		t.Errorf("backfill of an archive that matches: %+v, %v", rows, err)
	}
}

func TestBackfillNeedsImages(t *testing.T) {
	c := newBackfillCase(t)
	c.scan.Images = nil
	if _, err := BackfillRows(c.p, c.scan, c.archivedState(t), date(2026, 11, 22, 9)); err == nil || !strings.Contains(err.Error(), "images") {
		t.Errorf("err %v, want one about the scan's images", err)
	}
}

func TestBackfillPartition(t *testing.T) {
	w := date(2026, 12, 2, 3)
	if p := BackfillPartition("app-votes-2026-11", w); p != (Partition{Table: "app-votes", Month: "2026-11"}) {
		t.Errorf("a monthly table: %+v, want its month", p)
	}
	if p := BackfillPartition("app-objects", w); p != (Partition{Table: "app-objects", Month: "2026-12"}) {
		t.Errorf("the objects table: %+v, want the watermark's month", p)
	}
}
