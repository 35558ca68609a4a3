// Command objects-reaper is the ObjectsReaper Lambda function; its wiring is functions.ObjectsReaper.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.ObjectsReaper) }
