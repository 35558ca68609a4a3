// Package functions holds the composition of every Lambda function: one Setup
// per function that reads its configuration, builds its clients once and
// returns its handler. Each functions/<name>/main.go passes its Setup to
// lambdafn.Start; the local runner looks Setups up in All and calls them
// in-process, so AWS and the local stack run the same wiring.
//
// votes.go holds the votes functions, objects_api.go and objects_maint.go
// the large-object ones, archive.go and rotator.go the cold-month ones.
package functions

import (
	"github.com/ddbpipe/ddbpipe/shared/emf"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

// newMetrics is a function's EMF writer: namespace ddbpipe, dimensions Function
// and, when DDBPIPE_STACK is set (the template's Globals set it), Stack, so
// two stacks in one account and region keep their metrics apart. The
// template's alarms and dashboard use the same two dimensions.
func newMetrics(env lambdafn.Env, function string) *emf.Writer {
	dims := map[string]string{"Function": function}
	if stack := env.Getenv("DDBPIPE_STACK"); stack != "" {
		dims["Stack"] = stack
	}
	return emf.New(env.Metrics, "ddbpipe", dims)
}

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
