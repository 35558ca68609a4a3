package archive

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// A rotation's summary counts its failed steps, whatever else it says:
// a creation refused, and a retirement stopped at a failed step.
func TestRotationReportFailedSteps(t *testing.T) {
	rep := RotationReport{
		Errors: []error{errors.New("archive: ddbpipe-votes-2026-11 was retired (…); not created again")},
		Retirements: []Retirement{
			{Table: "ddbpipe-votes-2026-10", Outcome: Failed, Err: errors.New("drain: no stream to disable")},
			{Table: "ddbpipe-votes-2026-09", Outcome: Retired},
		},
	}
	if got := rep.FailedSteps(); got != 2 {
		t.Errorf("FailedSteps() = %d, want 2", got)
	}
	if got := rep.Alarms(); got != 0 {
		t.Errorf("Alarms() = %d, want 0", got)
	}
}

// The counter reads a month's retirement from its manifest through
// ledger.Retired, the rotator through Contents.AlreadyRetired: both read
// the manifest this package writes the same way.
func TestManifestRecordsRetirementForTheLedger(t *testing.T) {
	at := time.Date(2026, 12, 3, 2, 0, 8, 0, time.UTC)
	p := Partition{Table: "ddbpipe-votes", Month: "2026-11"}
	for _, v := range []*Verification{nil, {At: at, TableItems: 3, ArchivedItems: 2, OK: false}, {At: at, TableItems: 3, ArchivedItems: 3, OK: true}} {
		m := NewManifest(p, nil, nil, at)
		m.Verification = v
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, retired, err := ledger.Retired(b)
		if want := (Contents{Manifest: &m}).AlreadyRetired(); err != nil || retired != want || retired && !got.Equal(at) {
			t.Errorf("verification %+v: ledger.Retired = %s, %v, %v; want %v at %s", v, got, retired, err, want, at)
		}
	}
	if p.ManifestKey() != ledger.ManifestKey(p.Table, p.Month) || p.ManifestKey() != "table=ddbpipe-votes/month=2026-11/_manifest.json" {
		t.Errorf("manifest key %s", p.ManifestKey())
	}
}
