// Command objects-reaper is the objects-reaper Lambda function: the payloads of removed versions deleted, from the objects table's stream.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

func main() { lambdafn.Start(objectslambda.SetupReaper) }
