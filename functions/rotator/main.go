// Command rotator is the Rotator Lambda function; its wiring is functions.Rotator.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.Rotator) }
