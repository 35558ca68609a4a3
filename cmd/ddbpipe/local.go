package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

func localInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root (default: the folder holding template.yaml)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := findRoot(*root)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := servers.Install(ctx, servers.Options{Root: dir, Log: stdout}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "local servers installed (%s)\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

type upFlags struct {
	root, dataDir, stateDir, logFile string
	params                           paramFlags
	keyLimit, tableScale             float64
	apiPort, lambdaPort              int
	streamShards, splitAfter         int
	conflicts                        bool
	iam                              bool
	attach                           bool
	stackName                        string
}

// stackNamePattern is what -stack-name takes: the names of the stack's
// tables, queues and buckets start with it, and a bucket's name (lower
// case, at most 63 characters) adds up to 47 more.
var stackNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

func (u *upFlags) register(fs *flag.FlagSet) {
	u.params = paramFlags{}
	fs.StringVar(&u.root, "root", "", "repository root (default: the folder holding template.yaml)")
	fs.StringVar(&u.dataDir, "data-dir", "", "keep tables and objects in this folder between runs (default: in memory)")
	fs.StringVar(&u.stateDir, "state-dir", "", "where local.env, the pid file and the logs go (default: <root>/.ddbpipe)")
	fs.StringVar(&u.logFile, "log-file", "", "functions' JSON logs (default: <state-dir>/functions.log)")
	fs.StringVar(&u.stackName, "stack-name", "ddbpipe", "the stack's name, first in the names of its tables, queues and buckets: two stacks on the same servers (-attach) need two names")
	fs.Var(u.params, "param", "template parameter override Name=Value (repeatable)")
	fs.Float64Var(&u.keyLimit, "key-write-limit", 0, "per-partition-key write units/s enforced by the DynamoDB proxy (AWS: 1000; 0: off)")
	fs.IntVar(&u.streamShards, "stream-shards", 1, "present each DynamoDB stream as this many shards, routed by item key, as a busy table's stream is on AWS (1: DynamoDB Local's one shard)")
	fs.IntVar(&u.splitAfter, "stream-split-after", 0, "with -stream-shards: records after which a shard closes and two children open (0: never)")
	fs.BoolVar(&u.conflicts, "conflicts", false, "cancel overlapping transactions and writes with TransactionConflict as DynamoDB does (DynamoDB Local alone never does)")
	fs.Float64Var(&u.tableScale, "table-write-scale", 0, "limit each table's writes to this share of a new on-demand table's 4,000 units/s, or of its warm throughput (0: off)")
	fs.IntVar(&u.apiPort, "api-port", 0, "HTTP API port (default: a free port)")
	fs.IntVar(&u.lambdaPort, "lambda-port", 0, "Lambda API port (default: a free port)")
	fs.BoolVar(&u.iam, "iam", true, "judge every AWS call against its caller's role in the transformed template (local/iam; needs python3 with aws-sam-translator and node); -iam=false allows every call")
	fs.BoolVar(&u.attach, "attach", false, "run on the servers this environment names (AWS_ENDPOINT_URL_DYNAMODB, _SQS and _S3 and DDBPIPE_SEARCH_ENGINE_URL, as `ddbpipe local servers -- CMD` exports them) instead of starting its own; the stack's tables go when it stops, the servers stay")
}

func (u *upFlags) options(stdout io.Writer) (stack.Options, *os.File, error) {
	dir, err := findRoot(u.root)
	if err != nil {
		return stack.Options{}, nil, err
	}
	if !stackNamePattern.MatchString(u.stackName) {
		return stack.Options{}, nil, fmt.Errorf("-stack-name %q: want a lower-case letter, then up to 15 lower-case letters, digits and dashes", u.stackName)
	}
	if u.streamShards < 1 || u.streamShards > 1024 {
		return stack.Options{}, nil, fmt.Errorf("-stream-shards %d: want 1 to 1024", u.streamShards)
	}
	if u.tableScale < 0 || u.tableScale > 1 {
		return stack.Options{}, nil, fmt.Errorf("-table-write-scale %g: want 0 (off) to 1", u.tableScale)
	}
	if u.splitAfter < 0 {
		return stack.Options{}, nil, fmt.Errorf("-stream-split-after %d: want 0 (never) or more", u.splitAfter)
	}
	var attached *servers.Stack
	if u.attach {
		if u.dataDir != "" {
			return stack.Options{}, nil, errors.New("-attach runs on servers of others: their data folder is theirs to choose, not -data-dir")
		}
		var ok bool
		if attached, ok = servers.FromEnv(os.Getenv); !ok {
			return stack.Options{}, nil, fmt.Errorf("-attach: no servers in this environment (%s, %s and %s unset): run it under `ddbpipe local servers -- ddbpipe local up -attach`", servers.EnvDynamoDB, servers.EnvSQS, servers.EnvS3)
		}
		if attached.Search == "" {
			return stack.Options{}, nil, fmt.Errorf("-attach: no search engine in this environment (%s unset; `ddbpipe local servers --` exports it with the AWS endpoints)", servers.EnvSearch)
		}
	}
	if u.stateDir == "" {
		u.stateDir = filepath.Join(dir, ".ddbpipe")
	}
	if u.logFile == "" {
		u.logFile = filepath.Join(u.stateDir, "functions.log")
	}
	if err := os.MkdirAll(filepath.Dir(u.logFile), 0o755); err != nil {
		return stack.Options{}, nil, err
	}
	logf, err := os.Create(u.logFile)
	if err != nil {
		return stack.Options{}, nil, err
	}
	return stack.Options{
		Root: dir, DataDir: u.dataDir, Params: u.params, Setups: registry.All,
		Progress: stdout, FunctionLog: logf, KeyWriteLimit: u.keyLimit,
		StreamShards: u.streamShards, StreamSplitAfter: u.splitAfter, Conflicts: u.conflicts, TableWriteScale: u.tableScale,
		APIPort: u.apiPort, LambdaPort: u.lambdaPort, NoIAM: !u.iam, StateDir: u.stateDir, Servers: attached,
		StackName: u.stackName,
	}, logf, nil
}

func localUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var u upFlags
	u.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	o, logf, err := u.options(stdout)
	if err != nil {
		return err
	}
	defer logf.Close()
	// Every clock of the stack moves with `ddbpipe local clock`: the
	// functions', the schedules' and, through local.env, the commands'.
	o.MovableClock, o.SchedulesOnClock = true, true
	stateDir := u.stateDir
	pidFile := filepath.Join(stateDir, "local.pid")
	if pid, ok := runningPID(pidFile); ok {
		return fmt.Errorf("a local stack is already running (pid %d): `ddbpipe local down` stops it", pid)
	}
	env, err := stack.Up(ctx, o)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.Start(ctx); err != nil {
		return err
	}
	envFile := filepath.Join(stateDir, "local.env")
	if err := env.WriteEnvFile(envFile); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile)
	fmt.Fprintf(stdout, "\nlocal stack running. In another shell:\n  . %s\n", rel(o.Root, envFile))
	fmt.Fprintf(stdout, "  HTTP API     %s\n  Lambda API   %s\n", env.APIURL, env.LambdaURL)
	if env.SearchURL != "" {
		fmt.Fprintf(stdout, "  search       %s (OpenSearch's API, in front of ZincSearch)\n", env.SearchURL)
	}
	fmt.Fprintf(stdout, "  function logs %s\n", rel(o.Root, u.logFile))
	fmt.Fprintf(stdout, "  DynamoDB     %s\n", u.dynamoDB())
	for _, m := range env.Runner.Mappings() {
		fmt.Fprintf(stdout, "  %s\n", m)
	}
	fmt.Fprintln(stdout, "Ctrl-C or `ddbpipe local down` stops it.")
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping…")
	return nil
}

// dynamoDB says how the local DynamoDB behaves, as the flags set it: what
// a run's figures depend on (streams' shards and splits, transaction
// conflicts, write limits).
func (u *upFlags) dynamoDB() string {
	var parts []string
	switch {
	case u.streamShards == 1:
		parts = append(parts, "streams of 1 shard (-stream-shards)")
	case u.splitAfter > 0:
		parts = append(parts, fmt.Sprintf("streams of %d shards, each split in two after %d records", u.streamShards, u.splitAfter))
	default:
		parts = append(parts, fmt.Sprintf("streams of %d shards, never split (-stream-split-after)", u.streamShards))
	}
	if u.conflicts {
		parts = append(parts, "overlapping transactions cancelled (TransactionConflict)")
	} else {
		parts = append(parts, "no transaction conflicts (-conflicts)")
	}
	if u.keyLimit > 0 {
		parts = append(parts, fmt.Sprintf("%g writes/s per partition key", u.keyLimit))
	}
	if u.tableScale > 0 {
		parts = append(parts, fmt.Sprintf("table writes at %g of on-demand's", u.tableScale))
	}
	return strings.Join(parts, "; ")
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// runningPID reads a pid file and reports whether that process is alive.
func runningPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, alive(pid)
}

// alive reports whether a process runs: it exists and is not a zombie
// waiting for its parent to collect it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust the signal check
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func localDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local down", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root")
	state := fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stateDir, err := stateFolder(*root, *state)
	if err != nil {
		return err
	}
	pidFile := filepath.Join(stateDir, "local.pid")
	pid, ok := runningPID(pidFile)
	if !ok {
		fmt.Fprintln(stdout, "no local stack is running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			fmt.Fprintf(stdout, "local stack (pid %d) stopped\n", pid)
			return nil
		}
		if err := retry.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("local stack (pid %d) did not stop within 30s", pid)
}

// stateFolder is -state-dir, or <root>/.ddbpipe.
func stateFolder(root, state string) (string, error) {
	if state != "" {
		return filepath.Abs(state)
	}
	dir, err := findRoot(root)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ".ddbpipe"), nil
}

// stackFlags are the flags naming a running local stack's state folder.
type stackFlags struct{ root, state *string }

func newStackFlags(fs *flag.FlagSet) stackFlags {
	return stackFlags{
		root:  fs.String("root", "", "repository root"),
		state: fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)"),
	}
}

// vars reads the running stack's local.env.
func (f stackFlags) vars() (map[string]string, error) {
	stateDir, err := stateFolder(*f.root, *f.state)
	if err != nil {
		return nil, err
	}
	return loadEnvFile(filepath.Join(stateDir, "local.env"))
}

// loadEnvFile reads a local.env written by `local up` into a map.
func loadEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s (is `ddbpipe local up` running?): %w", path, err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		vars[k] = strings.ReplaceAll(strings.Trim(v, "'"), `'\''`, "'")
	}
	return vars, nil
}

func localInvoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stack := newStackFlags(fs)
	eventFile := fs.String("event", "", "JSON event file (default: a scheduled event for scheduled functions, else {})")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: ddbpipe local invoke FUNCTION [-event FILE]")
		return errUsage
	}
	name := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	vars, err := stack.vars()
	if err != nil {
		return err
	}
	payload := []byte(fmt.Sprintf(`{"version":"0","id":"manual","detail-type":"Scheduled Event","source":"aws.events","time":%q,"region":%q,"resources":[],"detail":{}}`,
		time.Now().UTC().Format(time.RFC3339), vars["AWS_REGION"]))
	if *eventFile != "" {
		if payload, err = os.ReadFile(*eventFile); err != nil {
			return err
		}
		if !json.Valid(payload) {
			return fmt.Errorf("%s is not valid JSON", *eventFile)
		}
	}
	cfg, err := cliAWS(ctx, func(k string) string { return vars[k] })
	if err != nil {
		return err
	}
	out, err := lambda.NewFromConfig(cfg).Invoke(ctx, &lambda.InvokeInput{
		FunctionName: aws.String(name), Payload: payload, InvocationType: lambdatypes.InvocationTypeRequestResponse,
	})
	if err != nil {
		return fmt.Errorf("invoke %s: %w", name, err)
	}
	fmt.Fprintln(stdout, string(out.Payload))
	if out.FunctionError != nil {
		return errors.New("function error: " + aws.ToString(out.FunctionError))
	}
	if ids := sqsMessageIDs(payload); len(ids) > 0 {
		explainSQSOutcome(ctx, stdout, sqs.NewFromConfig(cfg), vars["VOTES_REJECTS_QUEUE_URL"], ids, out.Payload)
	}
	return nil
}

// sqsMessageIDs are the message ids of an SQS event, in order; none for
// any other event.
func sqsMessageIDs(event []byte) []string {
	var e struct {
		Records []struct {
			MessageID   string `json:"messageId"`
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if json.Unmarshal(event, &e) != nil {
		return nil
	}
	var ids []string
	for _, r := range e.Records {
		if r.EventSource == "aws:sqs" && r.MessageID != "" {
			ids = append(ids, r.MessageID)
		}
	}
	return ids
}

// explainSQSOutcome says what became of each message of an SQS event: failed
// back (the batch response), rejected (found on the rejects queue, with its
// reason), or taken (written, or a duplicate of a vote written before).
func explainSQSOutcome(ctx context.Context, w io.Writer, c queueClient, rejectsURL string, ids []string, answer []byte) {
	var resp struct {
		Failures []struct {
			ID string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	_ = json.Unmarshal(answer, &resp)
	failed := map[string]bool{}
	for _, f := range resp.Failures {
		failed[f.ID] = true
	}
	rejected := map[string]string{}
	if rejectsURL != "" {
		msgs, err := votessqs.Peek(ctx, c, rejectsURL, 1000, 5*time.Second) // at most 1,000: a local rejects queue holds far fewer
		if err != nil {
			fmt.Fprintf(w, "(could not read the rejects queue: %v)\n", err)
		}
		for _, m := range msgs {
			var rm votessqs.RejectMessage
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &rm) == nil && rm.MessageID != "" {
				reason, detail := votessqs.RejectReason(m)
				rejected[rm.MessageID] = reason + ": " + detail
			}
		}
	}
	for _, id := range ids {
		switch {
		case failed[id]:
			fmt.Fprintf(w, "%s: failed back to the queue (tried again after its visibility timeout)\n", id)
		case rejected[id] != "":
			fmt.Fprintf(w, "%s: rejected, %s (on the rejects queue: `ddbpipe votes rejects inspect`)\n", id, rejected[id])
		default:
			fmt.Fprintf(w, "%s: taken (written to the ledger, or a vote written before)\n", id)
		}
	}
}

// localServers starts the local servers once, runs a command with the
// variables that point AWS SDKs (and stacktest, and stack.Up in tests) at
// them, and stops them when the command ends, fails or is interrupted.
// Signals received are passed on to the command; its exit status is ours.
func localServers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local servers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ddbpipe local servers [-root DIR] -- COMMAND [ARG...]")
		fs.PrintDefaults()
	}
	root := fs.String("root", "", "repository root (default: the folder holding template.yaml)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fs.Usage()
		return errUsage
	}
	dir, err := findRoot(*root)
	if err != nil {
		return err
	}
	// Signals arriving while the servers start end the start; later ones go
	// to the command.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	start := time.Now()
	st, err := servers.Start(ctx, servers.Options{Root: dir, Log: stderr})
	if err != nil {
		return err
	}
	defer func() {
		if serr := st.Stop(); serr != nil {
			fmt.Fprintln(stderr, "ddbpipe: stop local servers:", serr)
		}
	}()
	vars := st.Vars()
	// One IAM evaluator for every stack the command starts (each would
	// start its own); without one they still do.
	if stack.EnforceIAM(true) {
		ev, err := startSharedEvaluator(ctx, dir, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "ddbpipe: no shared IAM judge (each stack starts its own): %v\n", err)
		} else {
			defer ev.Close()
			vars[iam.EvaluatorURLVar] = ev.URL
		}
	}
	fmt.Fprintf(stderr, "local servers up in %s: DynamoDB %s, SQS %s, S3 %s, search engine %s\n",
		time.Since(start).Round(100*time.Millisecond), st.DynamoDB, st.SQS, st.S3, st.Search)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = os.Environ()
	for _, k := range sortedKeys(vars) {
		cmd.Env = append(cmd.Env, k+"="+vars[k])
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var kill <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
			if kill == nil {
				kill = time.After(30 * time.Second)
			}
		case <-kill:
			fmt.Fprintf(stderr, "ddbpipe: %s did not stop within 30s of the signal; killing it\n", argv[0])
			_ = cmd.Process.Kill()
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return exitStatus(128 + int(ws.Signal())) // as a shell reports it
				}
				return exitStatus(ee.ExitCode())
			}
			return err
		}
	}
}

// startSharedEvaluator installs the IAM judge's packages when they are
// missing and starts its evaluator.
func startSharedEvaluator(ctx context.Context, root string, stderr io.Writer) (*iam.Evaluator, error) {
	if err := servers.InstallIAMJudge(ctx, servers.Options{Root: root, Log: stderr}); err != nil {
		return nil, err
	}
	return iam.StartEvaluator(ctx, "", servers.IAMJudgeDir(root), stderr)
}

// exitStatus is a command's exit status that main passes on as its own.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
