package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
)

// The gate runs the demo as `make demo` does (`ddbpipe demo`: its default
// flags, 2,000 votes), on the gate's shared servers under a stack name of
// its own. The demo checks each of its steps and fails on one that does
// not hold; the test reads what it printed for each part.
func TestDemoRunsAsMakeDemoDoes(t *testing.T) {
	st := stacktest.Need(t)
	// The demo's commands read the stack's local.env, as they do after
	// make demo; the servers' endpoints this test process was started with
	// (`local servers --`) would come first and bypass the stack.
	for k := range st.Vars() {
		if strings.HasPrefix(k, "AWS_ENDPOINT_URL") {
			t.Setenv(k, "")
		}
	}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var u upFlags
	u.register(fs)
	nVotes := fs.Int("votes", 2000, "")
	if err := fs.Parse([]string{"-state-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o, logf, err := u.options(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	o.Servers, o.StackName = st, fmt.Sprintf("demo-%d", time.Now().UnixNano()%1e6)
	if err := runDemo(t.Context(), o, *nVotes, &out, &out); err != nil {
		t.Fatalf("the demo failed: %v\n%s", err, out.String())
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
