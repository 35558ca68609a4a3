package archive

import (
	"errors"
	"testing"
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
