package archive_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

var nov30 = time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)

func TestMonthlyTableAndPartitionOf(t *testing.T) {
	dec1 := time.Date(2026, 12, 1, 0, 0, 1, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		table     string
		created   time.Time
		monthly   bool
		wantTable string
		wantMonth string
	}{
		{table: "ddbpipe-votes-2026-11", created: dec1, monthly: true, wantTable: "ddbpipe-votes", wantMonth: "2026-11"},
		{table: "ledger-1999-01", created: nov30, monthly: true, wantTable: "ledger", wantMonth: "1999-01"},
		{table: "ddbpipe-objects", created: nov30, wantTable: "ddbpipe-objects", wantMonth: "2026-11"},
		{table: "ddbpipe-objects", created: dec1, wantTable: "ddbpipe-objects", wantMonth: "2026-11"}, // 23:00:01 UTC
		{table: "t-2026-13", created: nov30, wantTable: "t-2026-13", wantMonth: "2026-11"},
		{table: "t-2026-00", created: nov30, wantTable: "t-2026-00", wantMonth: "2026-11"},
		{table: "2026-11", created: nov30, wantTable: "2026-11", wantMonth: "2026-11"},
		{table: "t-26-11", created: nov30, wantTable: "t-26-11", wantMonth: "2026-11"},
		{table: "t_2026_11", created: nov30, wantTable: "t_2026_11", wantMonth: "2026-11"},
	}
	for _, tt := range tests {
		t.Run(tt.table+"@"+tt.created.Format(time.RFC3339), func(t *testing.T) {
			_, _, ok := ledger.SplitTable(tt.table)
			if ok != tt.monthly {
				t.Errorf("ledger.SplitTable(%q) ok = %v, want %v", tt.table, ok, tt.monthly)
			}
			got := archive.PartitionOf(tt.table, tt.created)
			want := archive.Partition{Table: tt.wantTable, Month: tt.wantMonth}
			if got != want {
				t.Errorf("PartitionOf = %+v, want %+v", got, want)
			}
		})
	}
	if got, want := (archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}).Prefix(), "table=ddbpipe-votes/month=2026-11/"; got != want {
		t.Errorf("Prefix = %q, want %q", got, want)
	}
}

func record(seq string, mods ...func(*archive.Record)) archive.Record {
	r := archive.Record{
		Table: "ddbpipe-votes-2026-11", Stream: "2026-11-01T00:00:00.000",
		EventID: "ev-" + seq, EventName: archive.EventInsert, SequenceNumber: seq, CreatedAt: nov30,
		Keys:     archive.Item{"pk": "color#3", "sk": "voter-" + seq},
		NewImage: archive.Item{"pk": "color#3", "sk": "voter-" + seq, "optionId": "red"},
	}
	for _, m := range mods {
		m(&r)
	}
	return r
}

func TestNewRow(t *testing.T) {
	tests := []struct {
		name    string
		rec     archive.Record
		want    archive.Row
		wantErr error
	}{
		{name: "insert", rec: record("100"), want: archive.Row{
			Table: "ddbpipe-votes", Month: "2026-11", Stream: "2026-11-01T00:00:00.000", EventName: "INSERT", SequenceNumber: "100",
			ApproximateCreationTime: nov30, Keys: `{"pk":{"S":"color#3"},"sk":{"S":"voter-100"}}`,
			NewImage: `{"optionId":{"S":"red"},"pk":{"S":"color#3"},"sk":{"S":"voter-100"}}`,
		}},
		{name: "ttl remove", rec: record("101", func(r *archive.Record) {
			r.EventName, r.TTLDelete, r.OldImage, r.NewImage = archive.EventRemove, true, r.NewImage, nil
			r.CreatedAt = nov30.In(time.FixedZone("X", -7200))
		}), want: archive.Row{
			Table: "ddbpipe-votes", Month: "2026-11", Stream: "2026-11-01T00:00:00.000", EventName: "REMOVE", SequenceNumber: "101",
			ApproximateCreationTime: nov30, Keys: `{"pk":{"S":"color#3"},"sk":{"S":"voter-101"}}`,
			OldImage: `{"optionId":{"S":"red"},"pk":{"S":"color#3"},"sk":{"S":"voter-101"}}`, TTLDelete: true,
		}},
		{name: "no table", rec: record("1", func(r *archive.Record) { r.Table = "" }), wantErr: archive.ErrInvalidRecord},
		{name: "no event id", rec: record("1", func(r *archive.Record) { r.EventID = "" }), wantErr: archive.ErrInvalidRecord},
		{name: "unknown event", rec: record("1", func(r *archive.Record) { r.EventName = "UPSERT" }), wantErr: archive.ErrInvalidRecord},
		{name: "empty sequence", rec: record(""), wantErr: archive.ErrInvalidRecord},
		{name: "non-decimal sequence", rec: record("12a"), wantErr: archive.ErrInvalidRecord},
		{name: "41-digit sequence", rec: record("12345678901234567890123456789012345678901"), wantErr: archive.ErrInvalidRecord},
		{name: "no creation time", rec: record("1", func(r *archive.Record) { r.CreatedAt = time.Time{} }), wantErr: archive.ErrInvalidRecord},
		{name: "no keys", rec: record("1", func(r *archive.Record) { r.Keys = nil }), wantErr: archive.ErrInvalidRecord},
		{name: "TTL insert", rec: record("1", func(r *archive.Record) { r.TTLDelete = true }), wantErr: archive.ErrInvalidRecord},
		{name: "bad value", rec: record("1", func(r *archive.Record) { r.NewImage["x"] = 3 }), wantErr: archive.ErrUnsupportedValue},
		{name: "bad old image", rec: record("1", func(r *archive.Record) { r.OldImage = archive.Item{"n": archive.Number("")} }), wantErr: archive.ErrUnsupportedValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := archive.NewRow(tt.rec)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("NewRow err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NewRow\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Padded sequence numbers sort as ledger.CompareSeq orders the numbers.
func TestPadSequence(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1", "2", -1}, {"10", "9", 1}, {"000000000000000000010", "9", 1}, {"42", "0042", 0},
		{"4421584500000000017450439091", "4421584500000000017450439092", -1},
		{"300000000000000499659", "4421584500000000017450439091", -1},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			if got := ledger.CompareSeq(tt.a, tt.b); got != tt.want {
				t.Errorf("CompareSeq = %d, want %d", got, tt.want)
			}
			pa, pb := archive.PadSequence(tt.a), archive.PadSequence(tt.b)
			if len(pa) != 40 {
				t.Errorf("PadSequence(%q) = %q, not 40 digits", tt.a, pa)
			}
			if c := compareStrings(pa, pb); tt.want != 0 && c != tt.want {
				t.Errorf("padded %q vs %q sort as %d, want %d", pa, pb, c, tt.want)
			}
		})
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestGroup(t *testing.T) {
	objectsTable := func(created time.Time) func(*archive.Record) {
		return func(r *archive.Record) {
			r.Table, r.Stream, r.CreatedAt = "ddbpipe-objects", "2026-01-01T00:00:00.000", created
		}
	}
	dec := nov30.Add(2 * time.Second)
	type obj struct {
		key         string
		first, last string
		rows        int
	}
	novKey := func(seq string) string {
		return "table=ddbpipe-votes/month=2026-11/stream-2026-11-01T000000.000-" + archive.PadSequence(seq) + ".parquet"
	}
	objKey := func(month, seq string) string {
		return "table=ddbpipe-objects/month=" + month + "/stream-2026-01-01T000000.000-" + archive.PadSequence(seq) + ".parquet"
	}
	tests := []struct {
		name      string
		recs      []archive.Record
		want      []obj
		failIndex int // -1: no failure
		failSeq   string
	}{
		{name: "empty", failIndex: -1},
		{name: "one monthly run", recs: []archive.Record{record("7"), record("8"), record("12")},
			want: []obj{{novKey("7"), "7", "12", 3}}, failIndex: -1},
		{name: "objects table splits at the month",
			recs: []archive.Record{record("1", objectsTable(nov30)), record("2", objectsTable(nov30)), record("3", objectsTable(dec)), record("4", objectsTable(dec))},
			want: []obj{{objKey("2026-11", "1"), "1", "2", 2}, {objKey("2026-12", "3"), "3", "4", 2}}, failIndex: -1},
		{name: "a new stream starts a new object",
			recs:      []archive.Record{record("1"), record("2", func(r *archive.Record) { r.Stream = "2026-11-02T00:00:00.000" })},
			want:      []obj{{novKey("1"), "1", "1", 1}, {"table=ddbpipe-votes/month=2026-11/stream-2026-11-02T000000.000-" + archive.PadSequence("2") + ".parquet", "2", "2", 1}},
			failIndex: -1},
		{name: "poison in the middle: the records before it are grouped",
			recs: []archive.Record{record("1"), record("2"), record("3", func(r *archive.Record) { r.EventName = "" }), record("4")},
			want: []obj{{novKey("1"), "1", "2", 2}}, failIndex: 2, failSeq: "3"},
		{name: "poison first", recs: []archive.Record{record("5", func(r *archive.Record) { r.Keys = nil }), record("6")},
			failIndex: 0, failSeq: "5"},
		{name: "no stream label", recs: []archive.Record{record("5", func(r *archive.Record) { r.Stream = ":/" })},
			failIndex: 0, failSeq: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := archive.Group(tt.recs)
			var re *archive.RecordError
			switch {
			case tt.failIndex < 0 && err != nil:
				t.Fatalf("Group err = %v", err)
			case tt.failIndex >= 0 && !errors.As(err, &re):
				t.Fatalf("Group err = %v, want *RecordError", err)
			case tt.failIndex >= 0 && (re.Index != tt.failIndex || re.SequenceNumber != tt.failSeq || !errors.Is(err, archive.ErrInvalidRecord)):
				t.Fatalf("Group failed at %d (%s): %v; want %d (%s), ErrInvalidRecord", re.Index, re.SequenceNumber, err, tt.failIndex, tt.failSeq)
			}
			var got []obj
			for _, o := range objs {
				got = append(got, obj{o.Key, o.FirstSequence, o.LastSequence, len(o.Rows)})
				if o.Key != archive.ObjectKey(o.Partition, o.Stream, o.FirstSequence) {
					t.Errorf("object key %s does not match ObjectKey", o.Key)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Group\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A retried batch, whether it is the same, shorter or longer, starts at the
// same record and so names the same object.
func TestGroupRetryNamesTheSameObject(t *testing.T) {
	var recs []archive.Record
	for i := 10; i < 20; i++ {
		recs = append(recs, record(fmt.Sprint(i)))
	}
	first, _ := archive.Group(recs[:7])
	for _, retry := range [][]archive.Record{recs, recs[:3], recs[:7]} {
		again, _ := archive.Group(retry)
		if again[0].Key != first[0].Key {
			t.Errorf("retry of %d records writes %s, first attempt wrote %s", len(retry), again[0].Key, first[0].Key)
		}
	}
}

func ExampleObjectKey() {
	p := archive.PartitionOf("ddbpipe-votes-2026-11", time.Now())
	fmt.Println(archive.ObjectKey(p, "2026-11-01T00:00:00.000", "4421584500000000017450439091"))
	// Output: table=ddbpipe-votes/month=2026-11/stream-2026-11-01T000000.000-0000000000004421584500000000017450439091.parquet
}
