// Command objects-finalize is the objects-finalize Lambda function: finished uploads turned into verified versions.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

func main() { lambdafn.Start(objectslambda.SetupFinalize) }
