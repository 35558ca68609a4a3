package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCommandLineErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.json")
	_ = os.WriteFile(bad, []byte("{not json"), 0o644)
	tests := []struct {
		name string
		args []string
		want string // in the error or stderr
	}{
		{"no command", nil, "usage: ddbpipe"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"hostile command", []string{"local; rm -rf /"}, "unknown command"},
		{"invoke without a function", []string{"local", "invoke"}, "usage: ddbpipe local invoke FUNCTION"},
		{"invoke with nothing running", []string{"local", "invoke", "RotatorFunction", "-state-dir", tmp}, "is `ddbpipe local up` running?"},
		{"bad -param", []string{"local", "up", "-param", "novalue"}, "want Name=Value"},
		{"unknown flag", []string{"demo", "-nope"}, "flag provided but not defined"},
		{"root without the pins", []string{"local", "install", "-root", tmp}, "tools/localstack/package.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil {
				t.Fatalf("no error; stdout %s", stdout.String())
			}
			if got := err.Error() + stderr.String(); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestLoadEnvFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "local.env")
	in := "# comment\nexport A='plain'\nexport B='it'\\''s'\nexport C='x=y'\n"
	_ = os.WriteFile(path, []byte(in), 0o644)
	got, err := loadEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"A": "plain", "B": "it's", "C": "x=y"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}

// `local up` in a real process: it writes local.env, serves the API, answers
// `local invoke`, and `local down` stops it together with its servers.
func TestLocalUpInvokeDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the local stack")
	}
	if _, err := exec.LookPath("java"); err != nil && os.Getenv("DDBPIPE_REQUIRE_STACK") != "1" {
		t.Skip("java not found")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "ddbpipe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	state := filepath.Join(tmp, "state")
	up := exec.Command(bin, "local", "up", "-state-dir", state)
	up.Dir = "../.."
	stdout, _ := up.StdoutPipe()
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = up.Process.Kill(); _ = up.Wait() }()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "stops it") {
				ready <- all.String()
			}
		}
		close(ready)
	}()
	var banner string
	select {
	case banner = <-ready:
	case <-time.After(5 * time.Minute):
		t.Fatal("local up did not become ready")
	}
	if !strings.Contains(banner, "sqs: ") || !strings.Contains(banner, "stream: ") {
		t.Errorf("banner lacks the event source mappings:\n%s", banner)
	}
	vars, err := loadEnvFile(filepath.Join(state, "local.env"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(vars["API_URL"] + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /health = %d", resp.StatusCode)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"local", "invoke", "RotatorFunction", "-state-dir", state}, &out, &errb); err != nil {
		t.Errorf("local invoke: %v %s", err, errb.String())
	}
	err = run(context.Background(), []string{"local", "invoke", "NoSuchFunction", "-state-dir", state}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Errorf("invoking an unknown function: %v", err)
	}
	if err := run(context.Background(), []string{"local", "up", "-state-dir", state}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second local up: %v, want 'already running'", err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"local", "down", "-state-dir", state}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("local up exit: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "local.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}
	// The API port no longer answers: everything stopped.
	c := http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get(vars["API_URL"] + "/health"); err == nil {
		resp.Body.Close()
		t.Error("the HTTP API still answers after local down")
	}
}
