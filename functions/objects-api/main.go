// Command objects-api is the ObjectsAPI Lambda function; its wiring is functions.ObjectsAPI.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.ObjectsAPI) }
