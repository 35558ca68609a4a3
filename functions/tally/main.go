// Command tally is the tally Lambda function: the monthly ledgers' streams counted into sharded counters, exactly once.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

func main() { lambdafn.Start(voteslambda.SetupTally) }
