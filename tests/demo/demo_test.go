// Package demo runs `ddbpipe demo` in the gate, as make demo runs it. It
// is a package of its own so that the demo, a minute and more of the
// pipeline's work, runs beside the CLI's tests rather than after them.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/tests/clibin"
)

// TestMain gives the package the servers (those make test exports, else
// its own).
func TestMain(m *testing.M) { stacktest.Main(m) }

// The gate runs the demo as `make demo` does: the CLI binary make test
// built, `ddbpipe demo` with its default flags (2,000 votes), on the
// gate's servers (-attach) instead of servers of its own, under a stack
// name of its own. The demo checks each of its steps and exits 1 on one
// that does not hold; the test reads what it printed for each part.
func TestDemoRunsAsMakeDemoDoes(t *testing.T) {
	st := stacktest.Need(t)
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := fmt.Sprintf("demo-%d", time.Now().UnixNano()%1e6) // the servers' other stacks have theirs
	cmd := exec.CommandContext(ctx, clibin.Path(t, root, tmp), "demo", "-attach", "-stack-name", name, "-state-dir", filepath.Join(tmp, "state"))
	cmd.Dir = root
	cmd.Env = os.Environ()
	for k, v := range st.Vars() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("ddbpipe demo -attach: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	t.Log(out.String())
	for _, want := range []string{
		"-- workload", "-- large objects", "-- cold months", "-- what the runner did", "-- requests through the proxies",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo printed no %q", want)
		}
	}
}
