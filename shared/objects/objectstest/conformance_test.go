package objectstest_test

import (
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// The in-memory table behaves as the conformance suite says (objectsddb
// runs the same suite on DynamoDB Local).
func TestTableConforms(t *testing.T) {
	objectstest.TestPorts(t, func(*testing.T) objectstest.Ports {
		table := objectstest.NewTable()
		return objectstest.Ports{Items: table, Chunks: table, Refs: table}
	})
}
