// Command counter is the counter Lambda function: SQS batches of votes counted into sharded counters and the monthly ledger.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

func main() { lambdafn.Start(voteslambda.SetupCounter) }
