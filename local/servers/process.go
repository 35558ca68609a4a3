package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	logBufferSize = 64 << 10
	stopGrace     = 5 * time.Second
	// startAttempts covers the rare case of another process taking the free
	// port between FreePort and the server's bind: the server then exits
	// before it is ready and is started again on another port.
	startAttempts = 3
	probeInterval = 100 * time.Millisecond
	probeTimeout  = 2 * time.Second
	errorTail     = 30 // lines of server output quoted in errors
)

// serverSpec says how to run one server and how to tell it is ready.
type serverSpec struct {
	name, title string
	command     func(port int) *exec.Cmd
	ready       func(ctx context.Context, url string) error
}

// process is one running server.
type process struct {
	name, title, url string
	spec             serverSpec
	port             int
	cmd              *exec.Cmd
	logs             *tailBuffer
	done             chan struct{} // closed once the process has exited and been reaped
	waitErr          error         // set before done is closed
}

// errExited reports a server that stopped before it became ready.
var errExited = errors.New("exited before it was ready")

func startServer(ctx context.Context, o Options, spec serverSpec) (*process, error) {
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		began := time.Now()
		p, err := spawn(spec, port)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, o.ReadyTimeout, spec.ready)
		if err == nil {
			fmt.Fprintf(o.Log, "%s ready on %s in %.1fs\n", spec.title, p.url, time.Since(began).Seconds())
			return p, nil
		}
		err = fmt.Errorf("servers: %s on %s: %w\n--- last lines of its output ---\n%s",
			spec.title, p.url, err, lastLines(p.logs.String(), errorTail))
		if errors.Is(err, errExited) && attempt < startAttempts {
			fmt.Fprintf(o.Log, "%s exited while starting, trying another port\n", spec.title)
			continue
		}
		return nil, errors.Join(err, p.stop(stopGrace, o.Log))
	}
}

func spawn(spec serverSpec, port int) (*process, error) {
	cmd := spec.command(port)
	logs := &tailBuffer{max: logBufferSize}
	cmd.Stdout, cmd.Stderr = logs, logs
	// The servers live until Stop, not until a context ends. Their own
	// process group keeps a terminal's Ctrl-C for us; Stop signals the group.
	cmd.SysProcAttr = serverSysProcAttr()
	// Output is copied through pipes; don't let a stray grandchild holding
	// them block Wait forever.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("servers: start %s: %w", spec.title, err)
	}
	p := &process{
		spec:  spec,
		port:  port,
		name:  spec.name,
		title: spec.title,
		url:   "http://127.0.0.1:" + strconv.Itoa(port),
		cmd:   cmd,
		logs:  logs,
		done:  make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or
// timeout passes.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, ready func(context.Context, string) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		probeCtx, cancelProbe := context.WithTimeout(ctx, probeTimeout)
		err := ready(probeCtx, p.url)
		cancelProbe()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w (%v)", errExited, p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %w (last check: %v)", timeout, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM to the server's process group, SIGKILL after grace,
// and waits for the server to exit.
func (p *process) stop(grace time.Duration, log io.Writer) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	fmt.Fprintf(log, "%s still running %s after SIGTERM, killing it\n", p.title, grace)
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

func (p *process) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("servers: send %v to %s: %w", sig, p.title, err)
	}
	return nil
}

// tailBuffer is an io.Writer keeping the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.max {
		p = p[len(p)-b.max:]
	}
	if excess := len(b.buf) + len(p) - b.max; excess > 0 {
		b.buf = append(b.buf[:0], b.buf[excess:]...)
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// environ returns the current environment without the variables whose
// names start with any of prefixes (a server would read them as settings).
func environ(prefixes ...string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return slices.ContainsFunc(prefixes, func(prefix string) bool { return strings.HasPrefix(kv, prefix) })
	})
}

// The servers' command lines and readiness checks.

// dynamoJIT is DynamoDB Local's JIT: the client compiler alone (C1),
// unless $DDBPIPE_DYNAMODB_JIT is "full" (C1 then C2, Java's default).
// Measured on this project's DynamoDB-bound tests, C1 alone took 30-42 %
// less CPU (objectslambda's: 59 s → 34 s) and no more time: runs here are
// minutes long, too short for C2's compilations to pay for themselves.
func dynamoJIT() []string {
	if os.Getenv("DDBPIPE_DYNAMODB_JIT") == "full" {
		return nil
	}
	return []string{"-XX:TieredStopAtLevel=1"}
}

// dynamoHeap is DynamoDB Local's maximum heap: $DDBPIPE_DYNAMODB_HEAP or 1g.
func dynamoHeap() string {
	if h := os.Getenv("DDBPIPE_DYNAMODB_HEAP"); h != "" {
		return h
	}
	return "1g"
}

func dynamoSpec(inst *installation, dbPath string) serverSpec {
	return serverSpec{
		name:  DynamoDBServer,
		title: "DynamoDB Local",
		command: func(port int) *exec.Cmd {
			jar := filepath.Join(inst.dynamoJarDir, "DynamoDBLocal.jar")
			args := []string{
				// A heap large enough that a 20,000-vote run does not turn
				// into garbage collection; the JVM takes only what it uses.
				"-Xmx" + dynamoHeap(), "-XX:+UseSerialGC",
				"-Djava.library.path=" + filepath.Join(inst.dynamoJarDir, "DynamoDBLocal_lib"),
			}
			args = append(args, dynamoJIT()...)
			if inst.dynamoLauncherDir != "" {
				classPath := inst.dynamoLauncherDir + string(os.PathListSeparator) + jar
				args = append(args, "-cp", classPath, dynamoLauncherClass, "127.0.0.1")
			} else {
				args = append(args, "-jar", jar)
			}
			// -sharedDb: one database whatever the client's region and credentials.
			args = append(args, "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(port))
			if dbPath == "" {
				args = append(args, "-inMemory")
			} else {
				args = append(args, "-dbPath", dbPath)
			}
			return exec.Command(inst.java, args...)
		},
		ready: func(ctx context.Context, url string) error {
			client := dynamodb.NewFromConfig(probeConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) })
			_, err := client.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
			return err
		},
	}
}

func sqsSpec(inst *installation) serverSpec {
	return serverSpec{
		name:  SQSServer,
		title: "SQS (fauxqs)",
		command: func(port int) *exec.Cmd {
			cmd := exec.Command(inst.node, inst.fauxqsLauncher, strconv.Itoa(port))
			cmd.Dir = inst.npmDir
			return cmd
		},
		ready: func(ctx context.Context, url string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
			if err != nil {
				return err
			}
			resp, err := probeHTTPClient().Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /health: %s", resp.Status)
			}
			return nil
		},
	}
}

func s3Spec(inst *installation, dataDir, versionsDir string) serverSpec {
	return serverSpec{
		name:  S3Server,
		title: "S3 (versitygw)",
		command: func(port int) *exec.Cmd {
			cmd := exec.Command(inst.versitygw,
				"--port", "127.0.0.1:"+strconv.Itoa(port),
				"--access", AccessKeyID, "--secret", SecretAccessKey,
				"--region", Region, "--quiet",
				"posix", "--versioning-dir", versionsDir, dataDir)
			// versitygw reads VGW_* and ROOT_* variables as flags.
			cmd.Env = environ("VGW_", "ROOT_ACCESS_KEY", "ROOT_SECRET")
			return cmd
		},
		ready: func(ctx context.Context, url string) error {
			client := s3.NewFromConfig(probeConfig(), func(o *s3.Options) {
				o.BaseEndpoint = aws.String(url)
				o.UsePathStyle = true
			})
			_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
			return err
		},
	}
}

// probeConfig is an SDK configuration for the readiness checks: the stack's
// credentials and no retries (waitReady polls). It reads no environment.
func probeConfig() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient:  probeHTTPClient(),
	}
}

// probeHTTPClient leaves no idle connections behind once a check is done,
// and uses no proxy.
func probeHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}
