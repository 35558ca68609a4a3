// Package functions holds the composition of every Lambda function: one Setup
// per function that reads its configuration, builds its clients once and
// returns its handler. Each functions/<name>/main.go passes its Setup to
// lambdafn.Start; the local runner looks Setups up in All and calls them
// in-process, so AWS and the local stack run the same wiring.
//
// The votes functions (votes.go) are real. The large-object and archive
// functions (skeletons.go) are still the foundation's skeletons: they accept
// their event shape, log it and acknowledge it, until their issues land.
package functions

import (
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

// All maps each function's logical id in template.yaml to its Setup.
var All = map[string]lambdafn.Setup{
	"CounterFunction":         Counter,
	"VotesApiFunction":        VotesAPI,
	"ObjectsApiFunction":      ObjectsAPI,
	"ObjectsFinalizeFunction": ObjectsFinalize,
	"ObjectsReaperFunction":   ObjectsReaper,
	"ObjectsSweeperFunction":  ObjectsSweeper,
	"ArchiverFunction":        Archiver,
	"RotatorFunction":         Rotator,
}
