// Command rotator is the rotator Lambda function: monthly ledger tables created, subscribed, verified, compacted and retired.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

func main() { lambdafn.Start(archivelambda.SetupRotator) }
