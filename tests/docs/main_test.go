// Package docs runs the shell examples of README.md and docs/*.md against
// a local stack. It is a package of its own so that its one long test
// starts with make test's other packages, not after tests/'s quick ones
// and beside three of tests/'s parallel ones.
package docs

import (
	"testing"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
)

// TestMain gives the package the servers (those make test exports, else
// its own).
func TestMain(m *testing.M) { stacktest.Main(m) }

// repoRoot is the repository's root, where the pages are.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := servers.FindRoot(".")
	if err != nil {
		tb.Fatal(err)
	}
	return root
}
