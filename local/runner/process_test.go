package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// buildEcho builds testdata/echofn for this machine.
func buildEcho(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "echofn")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/echofn").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type echoReply struct {
	Value     string `json:"value"`
	RequestID string `json:"requestId"`
	Pid       int    `json:"pid"`
	Deadline  bool   `json:"deadline"`
}

func invokeEcho(ctx context.Context, p *Processes, do, value string) (echoReply, error) {
	out, err := p.Invoke(ctx, []byte(fmt.Sprintf(`{"do":%q,"value":%q}`, do, value)))
	var r echoReply
	if err == nil {
		err = json.Unmarshal(out, &r)
	}
	return r, err
}

// A function in its own process: answers come back through the Runtime
// API with the request id and deadline; a process killed mid-invocation
// fails that invocation with Runtime.ExitError and the next one gets a new
// process; errors, panics and exits are reported, never hang.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a function binary")
	}
	p := NewProcesses(ProcessConfig{Function: "Echo", Binary: buildEcho(t), Env: os.Environ(), MaxEnvironments: 2, Output: os.Stderr})
	t.Cleanup(p.Close)
	// A deadline the function sees (its answer says so); long enough that
	// only a hang meets it, on however busy a machine (one minute did not
	// cover this test on two cores shared with the whole suite).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1", InvokedFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:echo"})

	first, err := invokeEcho(ctx, p, "echo", "hello")
	if err != nil || first.Value != "hello" || first.RequestID != "req-1" || !first.Deadline {
		t.Fatalf("echo: %+v, %v", first, err)
	}
	again, err := invokeEcho(ctx, p, "echo", "again")
	if err != nil || again.Pid != first.Pid {
		t.Fatalf("second invocation: %+v, %v; want the warm process %d", again, err, first.Pid)
	}
	if _, err := invokeEcho(ctx, p, "fail", ""); err == nil || !strings.Contains(err.Error(), "failed as asked") {
		t.Errorf("fail: %v", err)
	}

	// Killed mid-invocation.
	errc := make(chan error, 1)
	go func() {
		_, err := invokeEcho(ctx, p, "sleep", "")
		errc <- err
	}()
	// Bounded only against a hang: a fresh make test once took over 10 s
	// to get here, and the kill then hit an idle process instead.
	if !waitUntil(2*time.Minute, func() bool { return len(p.busyPIDs()) > 0 }) {
		t.Fatal("the sleeping invocation never reached a process")
	}
	pid, ok := p.Kill()
	if !ok {
		t.Fatal("Kill found no process")
	}
	if err := <-errc; !errors.Is(err, ErrRuntimeExited) {
		t.Errorf("killed invocation: %v, want Runtime.ExitError", err)
	}
	after, err := invokeEcho(ctx, p, "echo", "after")
	if err != nil || after.Value != "after" || after.Pid == pid {
		t.Errorf("after the kill: %+v, %v (killed pid %d)", after, err, pid)
	}

	for _, do := range []string{"panic", "exit"} {
		if _, err := invokeEcho(ctx, p, do, ""); err == nil {
			t.Errorf("%s: no error", do)
		}
		if r, err := invokeEcho(ctx, p, "echo", do); err != nil || r.Value != do {
			t.Errorf("after %s: %+v, %v", do, r, err)
		}
	}

	// At the deadline the environment is stopped, as Lambda discards a
	// timed-out one.
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = invokeEcho(short, p, "sleep", "")
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timed out: %v", err)
	}

	// Concurrent invocations share at most MaxEnvironments processes.
	var wg sync.WaitGroup
	pids := sync.Map{}
	for i := range 6 {
		wg.Go(func() {
			r, err := invokeEcho(ctx, p, "echo", fmt.Sprint(i))
			if err != nil || r.Value != fmt.Sprint(i) {
				t.Errorf("concurrent %d: %+v, %v", i, r, err)
			}
			pids.Store(r.Pid, true)
		})
	}
	wg.Wait()
	n := 0
	pids.Range(func(any, any) bool { n++; return true })
	if n > 2 {
		t.Errorf("%d processes served 6 concurrent invocations, want ≤ 2", n)
	}
	st := p.Stats()
	if st.Killed != 1 || st.Exited < 3 || st.Started < 4 {
		t.Errorf("stats %+v: want 1 killed, ≥ 3 exited (kill, exit, timeout), ≥ 4 started", st)
	}
	t.Logf("stats %+v", st)
}

func (p *Processes) busyPIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for env := range p.busy {
		pids = append(pids, env.cmd.Process.Pid)
	}
	return pids
}
