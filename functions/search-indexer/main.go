// Command search-indexer is the search-indexer Lambda function: the objects table's stream kept in the search index.
package main

import (
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/search/searchlambda"
)

func main() { lambdafn.Start(searchlambda.SetupIndexer) }
