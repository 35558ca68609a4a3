// Command objects-api is the objects-api Lambda function: documents, versions and presigned uploads under /objects/{key+}.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

func main() { lambdafn.Start(objectslambda.SetupAPI) }
