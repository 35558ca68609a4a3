package objectsddb

import (
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// The adapter passes the objects table's conformance suite on DynamoDB
// Local (the in-memory fake passes the same suite).
func TestPortsConform(t *testing.T) {
	objectstest.TestPorts(t, func(t *testing.T) objectstest.Ports {
		s, db := newStore(t)
		return objectstest.Ports{Items: s, Chunks: s, Refs: NewRefs(db, s.table)}
	})
}
