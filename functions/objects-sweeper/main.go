// Command objects-sweeper is the ObjectsSweeper Lambda function; its wiring is functions.ObjectsSweeper.
package main

import (
	"github.com/ddbpipe/ddbpipe/functions"
	"github.com/ddbpipe/ddbpipe/shared/lambdafn"
)

func main() { lambdafn.Start(functions.ObjectsSweeper) }
