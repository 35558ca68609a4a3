// Command objects-finalize is the ObjectsFinalize Lambda function; its wiring is functions.ObjectsFinalize.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.ObjectsFinalize) }
