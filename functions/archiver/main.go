// Command archiver is the Archiver Lambda function; its wiring is functions.Archiver.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.Archiver) }
