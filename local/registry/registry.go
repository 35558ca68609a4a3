// Package registry maps each function of template.yaml to its Setup, for
// what runs every function in one process: the local stack (runner, demo,
// end-to-end tests), the CLI and the benchmarks. In AWS each function is
// its own binary (functions/<name>/main.go) that links only its flow.
package registry

import (
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/search/searchlambda"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

// All maps each function's logical id in template.yaml to its Setup.
var All = map[string]lambdafn.Setup{
	"CounterFunction":         voteslambda.SetupCounter,
	"TallyFunction":           voteslambda.SetupTally,
	"VotesApiFunction":        voteslambda.SetupVotesAPI,
	"ObjectsApiFunction":      objectslambda.SetupAPI,
	"ObjectsFinalizeFunction": objectslambda.SetupFinalize,
	"ObjectsReaperFunction":   objectslambda.SetupReaper,
	"ObjectsSweeperFunction":  objectslambda.SetupSweeper,
	"ArchiverFunction":        archivelambda.SetupArchiver,
	"RotatorFunction":         archivelambda.SetupRotator,
	"SearchIndexerFunction":   searchlambda.SetupIndexer,
}
