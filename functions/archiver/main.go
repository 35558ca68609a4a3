// Command archiver is the archiver Lambda function: DynamoDB stream records written as Parquet to the archive.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

func main() { lambdafn.Start(archivelambda.SetupArchiver) }
