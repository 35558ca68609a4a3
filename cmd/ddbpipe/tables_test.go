package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// `tables rotate -json` says which tables a run left alone and why: kept
// (the counters still take their votes) and deferred (not created yet).
func TestRotateJSONSaysWhy(t *testing.T) {
	rep := archive.RotationReport{
		Kept:     []archive.Held{{Table: "app-votes-2026-11", Reason: "the counters' clock reads 2026-11-27T00:00:00Z"}},
		Deferred: nil,
	}
	b, err := json.Marshal(reportJSON(rep))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kept":[{"table":"app-votes-2026-11","reason":"the counters' clock reads 2026-11-27T00:00:00Z"}]`, `"deferred":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("-json report %s\nwant it to hold %s", b, want)
		}
	}
}

// `tables rotate -json` names the run that holds a month another run is
// retiring, and the stopped run whose lease a run took over.
func TestRotateJSONSaysWhoHoldsAMonth(t *testing.T) {
	since := time.Date(2026, 12, 3, 0, 15, 2, 0, time.UTC)
	held := archive.Lease{Table: "app-votes-2026-11", Holder: "app-RotatorFunction (request 42)", Run: "r1", Since: since, Step: archive.StepDrain, Expires: since.Add(15 * time.Minute)}
	rep := archive.RotationReport{Retirements: []archive.Retirement{
		{Table: "app-votes-2026-11", Outcome: archive.HeldByAnother, HeldBy: held},
		{Table: "app-votes-2026-10", Outcome: archive.Retired, TookOver: held},
	}}
	b, err := json.Marshal(reportJSON(rep))
	if err != nil {
		t.Fatal(err)
	}
	lease := `{"holder":"app-RotatorFunction (request 42)","since":"2026-12-03T00:15:02Z","step":"drain","expires":"2026-12-03T00:30:02Z"}`
	for _, want := range []string{
		`"outcome":"held-by-another-run","steps":null,"lagSeconds":0,"heldBy":` + lease,
		`"outcome":"retired","steps":null,"lagSeconds":0,"tookOver":` + lease,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("-json report %s\nwant it to hold %s", b, want)
		}
	}
}
