package main

import (
	"encoding/json"
	"strings"
	"testing"

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
