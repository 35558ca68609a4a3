package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

func TestMonthOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"UTC", time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC), "2026-11"},
		{"another zone is read in UTC", time.Date(2026, 12, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)), "2026-11"},
		{"first instant", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "2027-01"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ledger.MonthOf(tt.at); got != tt.want {
				t.Errorf("MonthOf(%s) = %s, want %s", tt.at, got, tt.want)
			}
		})
	}
}

func TestAdd(t *testing.T) {
	for _, tt := range []struct {
		month   string
		n       int
		want    string
		wantErr bool
	}{
		{"2026-11", 1, "2026-12", false},
		{"2026-12", 1, "2027-01", false},
		{"2026-01", -1, "2025-12", false},
		{"2026-11", 0, "2026-11", false},
		{"2026-02", 12, "2027-02", false},
		{"2026-13", 1, "", true},
		{"26-11", 1, "", true},
	} {
		t.Run(tt.month, func(t *testing.T) {
			got, err := ledger.Add(tt.month, tt.n)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Add(%s, %d) = %s, %v; want %s (error %v)", tt.month, tt.n, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ledger.ErrBadMonth) {
				t.Errorf("Add(%s) error %v is not ErrBadMonth", tt.month, err)
			}
		})
	}
}

func TestMonthTimes(t *testing.T) {
	const grace, margin = 2 * ledger.Day, time.Hour
	for _, tt := range []struct {
		name string
		f    func(string) (time.Time, error)
		want time.Time
	}{
		{"opens", ledger.Opens, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{"closes", func(m string) (time.Time, error) { return ledger.ClosesAt(m, grace) }, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)},
		{"cold", func(m string) (time.Time, error) { return ledger.ColdAt(m, grace, margin) }, time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.f("2026-11")
			if err != nil || !got.Equal(tt.want) {
				t.Errorf("2026-11 %s at %s, %v; want %s", tt.name, got, err, tt.want)
			}
			if _, err := tt.f("2026-00"); !errors.Is(err, ledger.ErrBadMonth) {
				t.Errorf("2026-00: got %v, want ErrBadMonth", err)
			}
		})
	}
	if got, want := ledger.End(time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("End = %s, want %s", got, want)
	}
}

func TestTables(t *testing.T) {
	if got := ledger.TableName("app-votes", "2026-11"); got != "app-votes-2026-11" {
		t.Errorf("TableName = %s", got)
	}
	for _, tt := range []struct {
		name, prefix, month string
		ok                  bool
	}{
		{"app-votes-2026-11", "app-votes", "2026-11", true},
		{"app-votes-2026-13", "", "", false},
		{"app-votes-2026-11-old", "", "", false},
		{"2026-11", "", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix, month, ok := ledger.SplitTable(tt.name)
			if prefix != tt.prefix || month != tt.month || ok != tt.ok {
				t.Errorf("SplitTable = %q, %q, %v; want %q, %q, %v", prefix, month, ok, tt.prefix, tt.month, tt.ok)
			}
		})
	}
	if got := ledger.CheckpointPK("app-votes-2026-11"); got != "ckpt#app-votes-2026-11" {
		t.Errorf("CheckpointPK = %s", got)
	}
	if pk := ledger.CheckpointPK("app-votes-2026-11"); !ledger.IsCheckpointPK(pk) || ledger.IsCheckpointPK("app-votes-2026-11") {
		t.Errorf("IsCheckpointPK does not tell %s from its table", pk)
	}
}

func TestStreamTable(t *testing.T) {
	for _, tt := range []struct {
		arn, table, label string
	}{
		{"arn:aws:dynamodb:eu-west-1:1:table/app-votes-2026-11/stream/2026-11-01T00:00:00.000", "app-votes-2026-11", "2026-11-01T00:00:00.000"},
		{"arn:aws:dynamodb:eu-west-1:1:table/t/stream/x", "t", "x"},
		{"arn:aws:dynamodb:eu-west-1:1:table//stream/x", "", ""},
		{"arn:aws:dynamodb:eu-west-1:1:table/t", "", ""},
		{"arn:aws:dynamodb:eu-west-1:1:table/a/b/stream/x", "", ""},
		{"arn:aws:sqs:eu-west-1:1:queue", "", ""},
		{"", "", ""},
	} {
		t.Run(tt.arn, func(t *testing.T) {
			table, label, err := ledger.StreamTable(tt.arn)
			if table != tt.table || label != tt.label || (err != nil) != (tt.table == "") {
				t.Errorf("StreamTable = %q, %q, %v; want %q, %q", table, label, err, tt.table, tt.label)
			}
			if err != nil && !errors.Is(err, ledger.ErrBadStreamARN) {
				t.Errorf("error %v is not ErrBadStreamARN", err)
			}
		})
	}
}

func TestCompareSeq(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "1", -1}, {"", "", 0}, {"0", "", 0},
		{"1", "2", -1}, {"9", "10", -1}, {"10", "9", 1},
		{"000000000000000000010", "9", 1}, {"42", "0042", 0}, {"5", "5", 0},
		{"000000000000000000100", "101", -1},
		{"4421584500000000017450439091", "4421584500000000017450439092", -1},
		{"300000000000000499659", "4421584500000000017450439091", -1},
		{"49999999999999999999999999999999999999", "50000000000000000000000000000000000000", -1},
	} {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			if got := ledger.CompareSeq(tt.a, tt.b); got != tt.want {
				t.Errorf("CompareSeq(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := ledger.CompareSeq(tt.b, tt.a); got != -tt.want {
				t.Errorf("CompareSeq(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
			if got := ledger.SeqLess(tt.a, tt.b); got != (tt.want < 0) {
				t.Errorf("SeqLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want < 0)
			}
			if same := ledger.SeqKey(tt.a) == ledger.SeqKey(tt.b); same != (tt.want == 0) && tt.a != "" && tt.b != "" {
				t.Errorf("SeqKey(%q) = %q, SeqKey(%q) = %q: same %v, want %v", tt.a, ledger.SeqKey(tt.a), tt.b, ledger.SeqKey(tt.b), same, tt.want == 0)
			}
		})
	}
}

func TestFormatTime(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"to the microsecond", time.Date(2026, 11, 5, 10, 0, 0, 123456789, time.UTC), "2026-11-05T10:00:00.123456Z"},
		{"in UTC", time.Date(2026, 11, 5, 11, 0, 0, 0, time.FixedZone("CET", 3600)), "2026-11-05T10:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ledger.FormatTime(tt.at); got != tt.want {
				t.Errorf("FormatTime = %s, want %s", got, tt.want)
			}
		})
	}
}
