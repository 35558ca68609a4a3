package objectslambda_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// The tests below run the whole template locally (stack.Up: DynamoDB
// Local, versitygw behind the S3 proxy that raises ObjectCreated events,
// the runner hosting every function), once for the test binary.

var (
	stackOnce sync.Once
	stackEnv  *stack.Env
	stackErr  error
)

func TestMain(m *testing.M) {
	stacktest.Main(m, func() {
		if stackEnv != nil {
			_ = stackEnv.Close()
		}
	})
}

// upStack returns the running local stack, starting it on first use. It
// skips under -short or without the servers, unless DDBPIPE_REQUIRE_STACK=1.
func upStack(t *testing.T) *stack.Env {
	t.Helper()
	st := stacktest.Need(t)
	stackOnce.Do(func() {
		root, err := servers.FindRoot(".")
		if err != nil {
			stackErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		e, err := stack.Up(ctx, stack.Options{Root: root, Servers: st, Setups: setups(), StackName: "objapi", FunctionLog: io.Discard})
		if err != nil {
			stackErr = err
			return
		}
		if err := e.Start(context.Background()); err != nil {
			_ = e.Close()
			stackErr = err
			return
		}
		stackEnv = e
	})
	if setupErr != nil {
		t.Fatalf("a function's setup failed: %v", setupErr)
	}
	if stackEnv == nil {
		if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
			t.Fatalf("local stack did not start: %v", stackErr)
		}
		t.Skipf("local stack not available: %v", stackErr)
	}
	return stackEnv
}

// setupErr is the first function setup that failed while the stack came
// up: a bug in that setup, so it fails the tests (never a skip, and never
// hidden behind a stand-in handler).
var setupErr error

// setups are the registry's, each recording its failure in setupErr.
// Every function of the template is built, as it is in AWS.
func setups() map[string]lambdafn.Setup {
	out := map[string]lambdafn.Setup{}
	for name, setup := range registry.All {
		out[name] = func(ctx context.Context, env lambdafn.Env) (any, error) {
			h, err := setup(ctx, env)
			if err != nil && setupErr == nil {
				setupErr = fmt.Errorf("setup of %s: %w", name, err)
			}
			return h, err
		}
	}
	return out
}

// Every function of the registry sets up and is hosted in the local stack.
func TestEverySetupSucceeds(t *testing.T) {
	e := upStack(t)
	for name := range registry.All {
		if _, err := e.Runner.Function(name); err != nil {
			t.Errorf("%s is not hosted: %v", name, err)
		}
	}
}

func newClient(t *testing.T) (*stack.Env, *objectsclient.Client) {
	e := upStack(t)
	c, err := objectsclient.NewSigned(e.APIURL, e.AWS, &http.Client{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}
