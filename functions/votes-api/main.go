// Command votes-api is the VotesAPI Lambda function; its wiring is functions.VotesAPI.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.VotesAPI) }
