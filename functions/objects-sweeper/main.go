// Command objects-sweeper is the objects-sweeper Lambda function: orphan blobs and chunk items removed after their grace.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

func main() { lambdafn.Start(objectslambda.SetupSweeper) }
