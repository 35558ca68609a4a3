package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// The goals of issue 10 for every function binary.
const (
	counterGoalBytes = 16 << 20
	binaryGoalBytes  = 20 << 20
	initGoal         = 50 * time.Millisecond
	initRuns         = 5
)

// flows are the product's flow folders; a function belongs to the one its
// Setup's package sits in and must link no other.
var flows = []string{"shared/votes", "shared/objects", "shared/archive"}

const module = "github.com/ddbpipe/ddbpipe/"

// benchFunctions builds every function as the template does (linux/arm64,
// provided.al2023, stripped) and reports its size, the product packages it
// links and its init time: a native build started as Lambda starts it, with
// its template environment and a Runtime API on 127.0.0.1, timed from exec
// to its first request for an invocation (runtime start, package inits,
// config, AWS clients, Setup).
func benchFunctions(ctx context.Context, env *stack.Env, _ float64) (*section, error) {
	fns, err := env.Stack.Functions()
	if err != nil {
		return nil, err
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].LogicalID < fns[j].LogicalID })
	dir, err := os.MkdirTemp("", "ddbpipe-functions-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	s := &section{title: "Function binaries and init"}
	s.printf("Each function built as `make build` and `sam build` build it (linux/arm64, `CGO_ENABLED=0`, `-tags lambda.norpc -trimpath -ldflags='-s -w'`).\n")
	s.printf("Init: a native build of the same function started with its template environment against a local Runtime API; the time from exec to its first `GET /runtime/invocation/next` (runtime start, package inits, config, AWS clients, Setup), median of %d starts.\n", initRuns)
	s.printf("Goals: no function links another flow's packages; counter ≤ 16 MiB; none above 20 MiB; init ≤ 50 ms.\n\n")
	s.printf("| function | flow | arm64 binary | goal | product packages linked | other flows linked | init (median) | goal |\n|---|---|---|---|---|---|---|---|\n")
	var failed []string
	for _, f := range fns {
		pkg := "./functions/" + cfn.FunctionName(f.LogicalID)
		arm := filepath.Join(dir, "arm64-"+filepath.Base(pkg))
		if err := goBuild(ctx, arm, pkg, "GOOS=linux", "GOARCH=arm64"); err != nil {
			return nil, err
		}
		st, err := os.Stat(arm)
		if err != nil {
			return nil, err
		}
		flow, linked, others, err := linkedFlows(ctx, pkg)
		if err != nil {
			return nil, err
		}
		native := filepath.Join(dir, "native-"+filepath.Base(pkg))
		if err := goBuild(ctx, native, pkg); err != nil {
			return nil, err
		}
		var inits []time.Duration
		for range initRuns {
			d, err := initTime(ctx, native, f.Env, env.Vars)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.LogicalID, err)
			}
			inits = append(inits, d)
		}
		slices.Sort(inits)
		init := inits[len(inits)/2]
		goal := int64(binaryGoalBytes)
		if f.LogicalID == "CounterFunction" {
			goal = counterGoalBytes
		}
		mark := func(ok bool) string {
			if ok {
				return "met"
			}
			return "**missed**"
		}
		if st.Size() > goal || len(others) > 0 || init > initGoal {
			failed = append(failed, f.LogicalID)
		}
		s.printf("| %s | %s | %.1f MiB | %s (≤ %d MiB) | %d | %s | %.1f ms | %s |\n", f.LogicalID, flow,
			float64(st.Size())/(1<<20), mark(st.Size() <= goal), goal>>20, linked,
			orNone(others), ms(init), mark(init <= initGoal))
	}
	if len(failed) > 0 {
		s.printf("\nGoals missed by: %s.\n", strings.Join(failed, ", "))
	} else {
		s.printf("\nEvery goal met.\n")
	}
	return s, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func goBuild(ctx context.Context, out, pkg string, env ...string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), append([]string{"CGO_ENABLED=0"}, env...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// linkedFlows lists the product packages pkg links, the flow its Setup
// belongs to (the flow of its lambda package), and any other flow it links.
func linkedFlows(ctx context.Context, pkg string) (flow string, linked int, others []string, err error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", pkg).Output()
	if err != nil {
		return "", 0, nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	uses := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, module)
		if !ok || strings.HasPrefix(rel, "functions/") {
			continue
		}
		if strings.HasPrefix(rel, "local/") || strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "tools/") {
			others = append(others, rel)
		}
		linked++
		for _, f := range flows {
			if rel == f || strings.HasPrefix(rel, f+"/") {
				uses[f] = true
				if strings.HasSuffix(rel, "lambda") {
					flow = f
				}
			}
		}
	}
	for _, f := range flows {
		if uses[f] && f != flow {
			others = append(others, f)
		}
	}
	return strings.TrimPrefix(flow, "shared/"), linked, others, nil
}

// initTime starts bin as Lambda would, with a Runtime API on 127.0.0.1,
// and returns the time until its first request for an invocation.
func initTime(ctx context.Context, bin string, fnEnv, stackVars map[string]string) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	ready := make(chan time.Time, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			select {
			case ready <- time.Now():
			default:
			}
			<-r.Context().Done() // no invocation: hold the poll until the process ends
			return
		}
		w.WriteHeader(http.StatusAccepted) // init/error reports
	})}
	go srv.Serve(ln)
	defer srv.Close()

	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=" + ln.Addr().String(), "HOME=" + os.TempDir(),
		"AWS_REGION=" + servers.Region, "AWS_ACCESS_KEY_ID=" + servers.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + servers.SecretAccessKey}
	for k, v := range stackVars {
		if strings.HasPrefix(k, "AWS_ENDPOINT_URL") || k == "AWS_S3_USE_PATH_STYLE" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range fnEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	select {
	case at := <-ready:
		return at.Sub(start), nil
	case err := <-exited:
		exited <- err
		return 0, fmt.Errorf("exited before its first invocation request (%v): %s", err, stderr.String())
	case <-time.After(30 * time.Second):
		return 0, errors.New("no invocation request within 30 s")
	}
}
