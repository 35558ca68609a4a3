// Command votes-api is the votes-api Lambda function: polls and results over the HTTP API.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

func main() { lambdafn.Start(voteslambda.SetupVotesAPI) }
