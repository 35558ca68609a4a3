// Package stack runs the whole pipeline on one machine: the local AWS servers
// (localstack), a fault-injection proxy in front of each, the template's
// resources provisioned on them, and the runner hosting every function with
// its event sources, an HTTP API and a Lambda API endpoint.
package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/httpapi"
	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/provision"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/searchproxy"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// Options configures a local stack.
type Options struct {
	Root      string            // repository root: template.yaml and .local live here
	Template  string            // default Root/template.yaml
	StackName string            // default "ddbpipe"
	Params    map[string]string // template parameter overrides
	DataDir   string            // persistent data; "" for in-memory
	Setups    map[string]lambdafn.Setup
	// Progress receives human progress lines; FunctionLog receives the
	// functions' and runner's structured logs. nil discards.
	Progress    io.Writer
	FunctionLog io.Writer
	LogLevel    slog.Level
	// IdlePollInterval is how long a quiet stream shard waits between
	// reads (default 5 s): a write through the stack's DynamoDB proxy ends
	// the wait of its table's shards at once.
	IdlePollInterval time.Duration
	// KeyWriteLimit turns on the DynamoDB proxy's per-partition-key write
	// limit (write units per second, AWS: 1000); 0 leaves it off.
	KeyWriteLimit float64
	// StreamShards presents every DynamoDB stream as this many shards
	// that split as records arrive (faultproxy.WithStreamShards), as a
	// busy table's stream is on AWS; 0 or 1 leaves DynamoDB Local's one
	// shard. StreamSplitAfter is the records after which a shard splits
	// in two (0: never).
	StreamShards     int
	StreamSplitAfter int
	// Conflicts cancels overlapping transactions and writes as DynamoDB
	// does (faultproxy.WithTransactionConflicts); DynamoDB Local alone
	// runs one request at a time and never does.
	Conflicts bool
	// TableWriteScale turns on the table-level write limit
	// (faultproxy.WithTableWriteLimit): each table takes this share of
	// AWS's 4,000 write units a second of a new on-demand table, or of
	// its warm throughput; 0 leaves it off.
	TableWriteScale float64
	// JWKSClient fetches the JWT authorizers' discovery documents and keys
	// (nil: a client with a 10 s timeout); tests give their TLS issuer's.
	JWKSClient *http.Client
	// APIPort and LambdaPort pin the local HTTP API and Lambda API ports (0: free).
	APIPort, LambdaPort int
	// Processes runs these functions (by logical id) from their binaries in
	// separate processes behind a Runtime API (runner.Processes), as Lambda
	// runs them, instead of calling their Setup in this process; Env.Processes
	// then holds them, to kill one mid-invocation. Build a binary with `go
	// build ./functions/<name>` (cfn.FunctionName gives the name).
	Processes map[string]string
	// ClockOffset moves every function's clock (lambdafn.ClockFileVar).
	// With it, or with MovableClock, Env.MoveClock moves the clocks again:
	// the demo, the tests and the soak run a month's turn on it. Vars
	// (local.env) name the clock file, so the CLI reads the same clock.
	ClockOffset  time.Duration
	MovableClock bool
	// SchedulesOnClock has the schedules (the rotator's daily run, the
	// sweeper's hourly one) fire by that clock too, as `ddbpipe local
	// clock` moves it; the demo, the tests and the soak call the rotator
	// themselves.
	SchedulesOnClock bool
	// NoRotation skips the rotator's run at the end of Up, which creates
	// (and subscribes) the current and the next month's ledger tables: no
	// vote is written before its month's table exists.
	NoRotation bool
	// Servers are running servers to provision on (Close leaves them
	// running); DataDir is then theirs to decide. nil: inside a test binary
	// the servers the environment names (servers.FromEnv, as `ddbpipe local
	// servers -- go test` exports them), else servers Up starts and Close stops.
	Servers *servers.Stack
	// NoIAM turns off what the stack does by default: judge every AWS
	// call at the proxies (and the Lambda API) against the caller's
	// policies in the SAM-transformed template, as AWS would. Each
	// function calls with credentials of its own role, and a call its
	// role does not allow fails with the service's AccessDenied error; the
	// admin credentials (Vars) stay allowed everything. See local/iam.
	// DDBPIPE_ENFORCE_IAM in the environment (0/false/off, 1/true/on)
	// overrides it.
	NoIAM bool
	// StateDir holds the IAM judge's record of judged calls (default
	// Root/.ddbpipe); the transformed template it judges against is
	// cached for the machine (servers.CacheDir()/sam-transform).
	StateDir string
	// IAMRecords is where the record of judged calls goes (default:
	// $DDBPIPE_IAM_RECORDS, else StateDir/iam).
	IAMRecords string
	// SearchOff turns features of the search proxy off (see
	// local/searchproxy); zero keeps them all, as OpenSearch behaves.
	SearchOff searchproxy.Feature
	// SearchCores bounds the cores of the search engine Up starts (see
	// servers.Options.SearchCores); 0: every core. Unused with Servers.
	SearchCores int
	// KeepTables keeps the stack's tables on Servers after Close. By
	// default Close drops them from servers it was given (a test's shared
	// servers), as deleting the stack would.
	KeepTables bool
}

// dynamoDBOptions are the DynamoDB proxy's emulations of AWS.
func (o Options) dynamoDBOptions() []faultproxy.Option {
	var opts []faultproxy.Option
	if o.KeyWriteLimit > 0 {
		opts = append(opts, faultproxy.WithKeyWriteLimit(o.KeyWriteLimit))
	}
	if o.StreamShards > 1 {
		opts = append(opts, faultproxy.WithStreamShards(faultproxy.StreamShards{Shards: o.StreamShards, SplitAfter: o.StreamSplitAfter}))
	}
	if o.Conflicts {
		opts = append(opts, faultproxy.WithTransactionConflicts())
	}
	if o.TableWriteScale > 0 {
		opts = append(opts, faultproxy.WithTableWriteLimit(faultproxy.TableWriteLimit{Scale: o.TableWriteScale}))
	}
	return opts
}

func (o Options) stateDir() string {
	if o.StateDir != "" {
		return o.StateDir
	}
	return filepath.Join(o.Root, ".ddbpipe")
}

// Env is a running local stack.
type Env struct {
	Servers *servers.Stack
	// ownServers reports that Up started Servers, so Close stops them.
	ownServers bool
	// stackName prefixes the stack's tables: Close drops them from servers
	// it did not start, unless Options.KeepTables.
	stackName  string
	keepTables bool
	Proxies    map[faultproxy.Service]*faultproxy.Proxy
	// ProxyURLs are the proxies' base URLs: what clients use as endpoints.
	ProxyURLs map[faultproxy.Service]string
	// Search is the search proxy: OpenSearch's REST API in front of the
	// servers' ZincSearch, at SearchURL (Vars: AWS_ENDPOINT_URL_OPENSEARCH;
	// behind the IAM judge when IAM is enforced), through the fault proxy
	// Proxies[SearchFaults]. nil when the servers have no search engine.
	Search    *searchproxy.Server
	SearchURL string
	Stack     *provision.Stack
	Runner    *runner.Runner
	AWS       aws.Config
	// Vars are the variables a client needs (endpoints, region, dummy
	// credentials) plus every template output in UPPER_SNAKE_CASE.
	Vars      map[string]string
	APIURL    string
	LambdaURL string
	Clients   provision.Clients
	Streams   *dynamodbstreams.Client
	// Processes are the functions Options.Processes named, by logical id.
	Processes map[string]*runner.Processes
	// Judge judges the calls (nil with Options.NoIAM);
	// IAMLogPath is its record of distinct judged calls (JSON lines).
	Judge      *iam.Judge
	IAMLogPath string
	gate       iamGate
	iamLog     *os.File

	apiAuth map[string]httpAuth // by HttpApi logical id
	servers []*http.Server
	stop    func()
	log     *slog.Logger
	flog    io.Writer

	clockFile string // the functions' clock file; "" on the real clock
}

// Up starts the servers and proxies, provisions the template and hosts the
// functions. Call Start to drive the event sources and Close to end it all.
func Up(ctx context.Context, o Options) (_ *Env, err error) {
	u := newUp(o)
	defer func() {
		if err != nil {
			u.closeListeners()
			_ = u.e.Close()
		}
	}()
	for _, step := range []func(context.Context) error{
		u.parseTemplate,
		u.startServers,
		u.startProxies,
		u.listen,
		u.connect,
		u.provision,
		u.judge,
		u.moveClock,
		u.prepareRunner,
		u.hostFunctions,
		u.rotate,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return u.e, nil
}

// up is one run of Up: its options, the Env it builds and what passes from
// one step to the next.
type up struct {
	o               Options
	e               *Env
	enforceIAM      bool
	progress        io.Writer
	tpl             *cfn.Template
	apiLn, lambdaLn net.Listener
}

func newUp(o Options) *up {
	if o.Template == "" {
		o.Template = filepath.Join(o.Root, "template.yaml")
	}
	u := &up{o: o, enforceIAM: EnforceIAM(!o.NoIAM), progress: o.Progress}
	if u.progress == nil {
		u.progress = io.Discard
	}
	flog := o.FunctionLog
	if flog == nil {
		flog = io.Discard
	}
	u.e = &Env{flog: flog, Proxies: map[faultproxy.Service]*faultproxy.Proxy{}, ProxyURLs: map[faultproxy.Service]string{},
		log:       slog.New(slog.NewJSONHandler(flog, &slog.HandlerOptions{Level: o.LogLevel})),
		stackName: cmp.Or(o.StackName, "ddbpipe"), keepTables: o.KeepTables}
	return u
}

func (u *up) parseTemplate(context.Context) (err error) {
	u.tpl, err = cfn.ParseFile(u.o.Template)
	return err
}

// startServers uses the servers given, else starts the stack's own.
func (u *up) startServers(ctx context.Context) (err error) {
	e := u.e
	if e.Servers = u.o.Servers; e.Servers != nil {
		return nil
	}
	start := time.Now()
	if e.Servers, err = servers.Start(ctx, servers.Options{Root: u.o.Root, DataDir: u.o.DataDir, Log: u.progress, SearchCores: u.o.SearchCores}); err != nil {
		return err
	}
	e.ownServers = true
	fmt.Fprintf(u.progress, "local servers up in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// startProxies puts a fault proxy (and, with IAM enforced, the judge's
// gate) in front of each server.
func (u *up) startProxies(context.Context) error {
	e := u.e
	e.gate.admin = e.Servers.Vars()["AWS_ACCESS_KEY_ID"]
	upstream := map[faultproxy.Service]string{faultproxy.DynamoDB: e.Servers.DynamoDB, faultproxy.SQS: e.Servers.SQS, faultproxy.S3: e.Servers.S3}
	for _, svc := range []faultproxy.Service{faultproxy.DynamoDB, faultproxy.SQS, faultproxy.S3} {
		opts := []faultproxy.Option{faultproxy.WithLogger(e.log)}
		if svc == faultproxy.DynamoDB {
			opts = append(opts, u.o.dynamoDBOptions()...)
		}
		if u.enforceIAM {
			opts = append(opts, faultproxy.WithAuthorizer(e.gate.authorizer(iam.Service(svc))))
		}
		p, err := faultproxy.New(svc, upstream[svc], opts...)
		if err != nil {
			return err
		}
		url, err := p.Start()
		if err != nil {
			return err
		}
		e.Proxies[svc] = p
		e.ProxyURLs[svc] = url
	}
	return u.startSearchProxy()
}

// SearchEndpointVar names the search endpoint in Vars: the SDKs' variable
// for the OpenSearch service, which the functions and the CLI read locally.
const SearchEndpointVar = "AWS_ENDPOINT_URL_OPENSEARCH"

// SearchFaults is the key in Env.Proxies of the fault proxy between the
// search proxy and the search engine. It injects latency, 5xx and dropped
// connections as for the other services; its throttles are S3's (503
// SlowDown), which the search proxy answers as OpenSearch-shaped 503s: the
// fault proxy has no OpenSearch flavour (429) yet.
const SearchFaults faultproxy.Service = "search"

// startSearchProxy puts the search proxy in front of the servers' search
// engine, with a fault proxy between the two. The search proxy's versions
// and aliases live in DataDir/searchproxy with a DataDir, in memory
// without one.
func (u *up) startSearchProxy() error {
	e := u.e
	if e.Servers.Search == "" {
		return nil
	}
	faults, err := faultproxy.New(faultproxy.S3, e.Servers.Search, faultproxy.WithLogger(e.log))
	if err != nil {
		return err
	}
	engine, err := faults.Start()
	if err != nil {
		return err
	}
	e.Proxies[SearchFaults], e.ProxyURLs[SearchFaults] = faults, engine
	o := searchproxy.Options{
		Engine: engine, User: servers.SearchUser, Password: servers.SearchPassword,
		Off: u.o.SearchOff, RefreshInterval: servers.ZincWALSyncInterval(), Log: e.log,
	}
	if u.o.DataDir != "" {
		o.StateFile = filepath.Join(u.o.DataDir, "searchproxy", "state.jsonl")
	}
	srv, err := searchproxy.Start(o, 0)
	if err != nil {
		return err
	}
	e.Search, e.SearchURL = srv, srv.URL
	if u.enforceIAM {
		e.SearchURL, err = e.gateSearch(srv.Proxy)
	}
	return err
}

// listen takes the HTTP API's and the Lambda API's ports.
func (u *up) listen(context.Context) (err error) {
	if u.apiLn, err = listen(u.o.APIPort); err != nil {
		return err
	}
	if u.lambdaLn, err = listen(u.o.LambdaPort); err != nil {
		return err
	}
	u.e.APIURL = "http://" + u.apiLn.Addr().String()
	u.e.LambdaURL = "http://" + u.lambdaLn.Addr().String()
	return nil
}

// closeListeners closes the ports not yet served (Env.Close shuts the
// served ones down).
func (u *up) closeListeners() {
	for _, ln := range []net.Listener{u.apiLn, u.lambdaLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// connect sets the stack's variables (the servers' region and
// credentials, the proxies' endpoints) and its clients.
func (u *up) connect(ctx context.Context) (err error) {
	e := u.e
	e.Vars = e.Servers.Vars()
	e.Vars["AWS_ENDPOINT_URL_DYNAMODB"] = e.ProxyURLs[faultproxy.DynamoDB]
	e.Vars["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"] = e.ProxyURLs[faultproxy.DynamoDB]
	e.Vars["AWS_ENDPOINT_URL_SQS"] = e.ProxyURLs[faultproxy.SQS]
	e.Vars["AWS_ENDPOINT_URL_S3"] = e.ProxyURLs[faultproxy.S3]
	e.Vars["AWS_ENDPOINT_URL_LAMBDA"] = e.LambdaURL
	// Clients search through the proxy, never the engine itself.
	delete(e.Vars, servers.EnvSearch)
	if e.SearchURL != "" {
		e.Vars[SearchEndpointVar] = e.SearchURL
	}
	if e.AWS, err = awsenv.FromVars(ctx, func(k string) string { return e.Vars[k] }); err != nil {
		return err
	}
	e.Clients = provision.Clients{DynamoDB: awsenv.DynamoDB(e.AWS), SQS: sqs.NewFromConfig(e.AWS), S3: awsenv.S3(e.AWS)}
	e.Streams = dynamodbstreams.NewFromConfig(e.AWS)
	return nil
}

// provision creates the template's resources and adds its outputs to the
// stack's variables.
func (u *up) provision(ctx context.Context) (err error) {
	e := u.e
	start := time.Now()
	e.Stack, err = provision.Up(ctx, u.tpl, e.Clients, provision.Options{
		StackName: u.o.StackName, Region: e.Vars["AWS_REGION"], Params: u.o.Params, APIURL: e.APIURL, Log: e.log,
		SearchEndpoint: strings.TrimPrefix(e.SearchURL, "http://"),
	})
	if err != nil {
		return err
	}
	for k, v := range e.Stack.OutputEnv() {
		e.Vars[k] = v
	}
	fmt.Fprintf(u.progress, "provisioned %d resources from %s in %s\n", len(e.Stack.Resources), filepath.Base(u.o.Template), time.Since(start).Round(10*time.Millisecond))
	for _, s := range e.Stack.Skipped {
		fmt.Fprintf(u.progress, "  note: %s\n", s)
	}
	if len(e.Stack.NoLocal) > 0 {
		var kinds []string
		for _, t := range slices.Sorted(maps.Keys(e.Stack.NoLocal)) {
			kinds = append(kinds, fmt.Sprintf("%d %s", e.Stack.NoLocal[t], t))
		}
		fmt.Fprintf(u.progress, "  note: AWS only, no local equivalent: %s\n", strings.Join(kinds, ", "))
	}
	return nil
}

// judge starts the IAM judge, unless IAM is off.
func (u *up) judge(ctx context.Context) error {
	e := u.e
	if !u.enforceIAM {
		e.Vars[IAMVar] = "off"
		fmt.Fprintf(u.progress, "IAM NOT enforced (%s): every AWS call is allowed, whatever the roles of the template say\n", iamOffBy())
		return nil
	}
	start := time.Now()
	if err := e.startJudge(ctx, u.o, u.progress); err != nil {
		return err
	}
	fmt.Fprintf(u.progress, "IAM enforced: every AWS call is judged against its caller's role in the transformed template (judge up in %s; calls recorded in %s)\n",
		time.Since(start).Round(10*time.Millisecond), e.IAMLogPath)
	return nil
}

// prepareRunner makes the runner that hosts the functions (its schedules
// on the functions' clock), and reads the HTTP API's authorizers.
func (u *up) prepareRunner(context.Context) (err error) {
	e := u.e
	opts := []runner.Option{runner.WithLogger(e.log), runner.WithRegion(e.Vars["AWS_REGION"]), runner.WithIdlePollInterval(cmp.Or(u.o.IdlePollInterval, idlePoll))}
	if e.clockFile != "" && u.o.SchedulesOnClock {
		// The schedules fire by the functions' clock: moved, the rotator's
		// daily run comes due as it would have on AWS.
		vars := lambdafn.NewVars(func(k string) string { return e.Vars[k] })
		opts = append(opts, runner.WithScheduleClock(runner.MovedClock{At: vars.Clock()}))
		if err := vars.Err(); err != nil {
			return err
		}
	}
	e.Runner = runner.New(opts...)
	e.Runner.SetWiring(runner.Wiring{Streams: e.Streams, SQS: e.Clients.SQS, QueueURL: e.queueURL, ClientsFor: e.pollers})
	e.apiAuth, err = readHTTPAuth(e.Stack.Template, e.Stack.Context)
	return err
}

// moveClock gives the functions a clock file when the stack's clock is
// moved, or may be (Options.ClockOffset, MovableClock).
func (u *up) moveClock(context.Context) error {
	if u.o.ClockOffset == 0 && !u.o.MovableClock {
		return nil
	}
	dir, err := os.MkdirTemp("", "ddbpipe-clock-")
	if err != nil {
		return err
	}
	u.e.clockFile = filepath.Join(dir, "offset")
	if err := lambdafn.WriteClockOffset(u.e.clockFile, u.o.ClockOffset); err != nil {
		return err
	}
	u.e.Vars[lambdafn.ClockFileVar] = u.e.clockFile
	return nil
}

// hostFunctions sets every function up, then serves the HTTP API and the
// Lambda API, and has S3's proxy raise the buckets' notifications.
func (u *up) hostFunctions(ctx context.Context) error {
	e := u.e
	routes, err := e.host(ctx, u.o.Setups, u.o.Processes)
	if err != nil {
		return err
	}
	api, err := httpapi.NewServer(routes, e.Runner.Invoke, e.apiOptions(u.o.JWKSClient)...)
	if err != nil {
		return err
	}
	e.serve(u.apiLn, api)
	lambdaAPI := e.Runner.LambdaAPI()
	if e.Judge != nil {
		lambdaAPI = e.Judge.LambdaGate(lambdaAPI, e.Runner.MappingFunction, e.log)
	}
	e.serve(u.lambdaLn, lambdaAPI)
	u.apiLn, u.lambdaLn = nil, nil // served: Env.Close shuts them down
	e.Proxies[faultproxy.S3].Observe(e.notifyS3)
	e.Proxies[faultproxy.DynamoDB].Observe(e.wakeReaders)
	return nil
}

// idlePoll is how long a quiet shard waits between reads by default:
// every write through the stack's DynamoDB proxy wakes its table's readers
// at once (wakeReaders), so only a write that bypasses the proxy waits.
const idlePoll = 5 * time.Second

// wakeReaders wakes the stream readers of the tables a write wrote.
func (e *Env) wakeReaders(ex faultproxy.Exchange) {
	for _, t := range ex.TablesWritten() {
		e.Runner.Wake(t)
	}
}

// rotate runs the rotator once, as `sam deploy` leaves it to its schedule,
// unless Options.NoRotation.
func (u *up) rotate(ctx context.Context) error {
	if u.o.NoRotation {
		return nil
	}
	start := time.Now()
	if err := u.e.Rotate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(u.progress, "rotator ran in %s: this month's and next month's ledger tables exist, subscribed to the archiver and the tally\n", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// MoveClock sets every function's clock to the real time plus offset, at
// once. Only a stack started with a ClockOffset has a clock to move.
func (e *Env) MoveClock(offset time.Duration) error {
	if e.clockFile == "" {
		return errors.New("stack: this stack runs on the real clock (Options.ClockOffset 0, MovableClock false)")
	}
	return lambdafn.WriteClockOffset(e.clockFile, offset)
}

// Rotate runs the rotator function once, as its daily schedule does.
func (e *Env) Rotate(ctx context.Context) error {
	ev := fmt.Sprintf(`{"version":"0","id":"local-%d","detail-type":"Scheduled Event","source":"aws.events","time":%q,"region":%q,"resources":[],"detail":{}}`,
		time.Now().UnixNano(), time.Now().UTC().Format(time.RFC3339), e.Vars["AWS_REGION"])
	if _, err := e.Runner.Invoke(ctx, "RotatorFunction", []byte(ev)); err != nil {
		return fmt.Errorf("stack: the rotator's run: %w", err)
	}
	return nil
}

func listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("stack: listen on 127.0.0.1:%d: %w", port, err)
	}
	return ln, nil
}

func (e *Env) serve(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	e.servers = append(e.servers, srv)
	go func() { _ = srv.Serve(ln) }()
}

// queueURL maps a queue ARN to its URL.
func (e *Env) queueURL(arn string) (string, bool) {
	id, ok := e.Stack.ResourceByRef(arn)
	if !ok || e.Stack.Resources[id].Type != cfn.TypeQueue {
		return "", false
	}
	return e.Stack.Resources[id].Ref, true
}

// host sets every function up and registers its event sources; it returns
// the HTTP API routes.
func (e *Env) host(ctx context.Context, setups map[string]lambdafn.Setup, binaries map[string]string) ([]httpapi.Route, error) {
	fns, err := e.Stack.Functions()
	if err != nil {
		return nil, err
	}
	var routes []httpapi.Route
	for _, f := range fns {
		env := map[string]string{
			"AWS_REGION": e.Vars["AWS_REGION"], "AWS_LAMBDA_FUNCTION_NAME": f.Name,
			"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(f.MemoryMB), "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
		}
		for k, v := range f.Env {
			env[k] = v
		}
		fnAWS := e.AWSAs(f.LogicalID)
		if e.Judge != nil {
			env["AWS_ACCESS_KEY_ID"] = iam.AccessKeyID(e.Vars["AWS_ACCESS_KEY_ID"], f.LogicalID)
		}
		if e.clockFile != "" {
			env[lambdafn.ClockFileVar] = e.clockFile
		}
		var handler lambda.Handler
		if bin, ok := binaries[f.LogicalID]; ok {
			handler = e.processes(f, bin, env)
		} else {
			setup, ok := setups[f.LogicalID]
			if !ok {
				return nil, fmt.Errorf("stack: function %s has no Setup (add it to registry.All)", f.LogicalID)
			}
			h, err := setup(ctx, lambdafn.Env{
				Getenv:  func(k string) string { return env[k] },
				AWS:     fnAWS,
				Log:     e.log.With("function", f.LogicalID),
				Metrics: e.flog,
			})
			if err != nil {
				return nil, fmt.Errorf("stack: set up %s: %w", f.LogicalID, err)
			}
			handler = lambda.NewHandler(h)
		}
		if err := e.Runner.AddFunction(runner.Function{
			LogicalID: f.LogicalID, Name: f.Name, ARN: f.ARN, Timeout: f.Timeout, Handler: handler,
		}); err != nil {
			return nil, err
		}
		for _, ev := range f.Events {
			r, err := e.mapEvent(f, ev)
			if err != nil {
				return nil, fmt.Errorf("stack: %s event %s: %w", f.LogicalID, ev.Name, err)
			}
			routes = append(routes, r...)
		}
	}
	return routes, nil
}

// processes runs f from bin in separate processes, with the function's
// environment, the stack's endpoints (the proxies) and credentials, and
// nothing of this process's environment but PATH, HOME and TMPDIR.
func (e *Env) processes(f provision.Function, bin string, fnEnv map[string]string) *runner.Processes {
	var vars []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			vars = append(vars, k+"="+v)
		}
	}
	for k, v := range e.Vars {
		if strings.HasPrefix(k, "AWS_") {
			vars = append(vars, k+"="+v)
		}
	}
	for k, v := range fnEnv {
		vars = append(vars, k+"="+v)
	}
	p := runner.NewProcesses(runner.ProcessConfig{
		Function: f.LogicalID, Binary: bin, Env: vars, Output: e.flog, Log: e.log,
	})
	if e.Processes == nil {
		e.Processes = map[string]*runner.Processes{}
	}
	e.Processes[f.LogicalID] = p
	return p
}

func (e *Env) mapEvent(f provision.Function, ev provision.Event) ([]httpapi.Route, error) {
	p := ev.Properties
	switch ev.Type {
	case "SQS":
		arn := cfn.Scalar(p["Queue"])
		url, ok := e.queueURL(arn)
		if !ok {
			return nil, fmt.Errorf("queue %s is not in the template", arn)
		}
		_, queue := e.pollers(f.LogicalID)
		_, err := e.Runner.AddSQS(queue, runner.SQSMapping{
			Function: f.LogicalID, QueueURL: url, QueueARN: arn,
			BatchSize: num(p["BatchSize"], 10), Window: seconds(p["MaximumBatchingWindowInSeconds"]),
			ReportBatchItemFailures: hasString(p["FunctionResponseTypes"], "ReportBatchItemFailures"),
			MaxConcurrency:          num(obj(p["ScalingConfig"])["MaximumConcurrency"], 2),
		})
		return nil, err
	case "DynamoDB":
		return nil, e.mapStream(f, p)
	case "Schedule", "ScheduleV2":
		expr := cfn.Scalar(p["Schedule"])
		if expr == "" {
			expr = cfn.Scalar(p["ScheduleExpression"])
		}
		_, err := e.Runner.AddSchedule(runner.ScheduleMapping{
			Function: f.LogicalID, Expression: expr, Disabled: cfn.Scalar(p["Enabled"]) == "false",
			RuleARN: fmt.Sprintf("arn:aws:events:%s:000000000000:rule/%s-%s", e.Vars["AWS_REGION"], f.Name, ev.Name),
		})
		return nil, err
	case "HttpApi":
		method := strings.ToUpper(cfn.Scalar(p["Method"]))
		if method == "" {
			method = "ANY"
		}
		path := cfn.Scalar(p["Path"])
		if path == "" {
			path = "/{proxy+}"
		}
		return []httpapi.Route{{Method: method, Path: path, Function: f.LogicalID, Authorizer: e.routeAuthorizer(method, path, p)}}, nil
	case "S3":
		return nil, e.Runner.AddS3(s3Mapping(f, p))
	}
	return nil, fmt.Errorf("event type %q is not supported locally", ev.Type)
}

// mapStream maps a DynamoDB stream event source to the runner's pollers.
func (e *Env) mapStream(f provision.Function, p map[string]any) error {
	m := runner.StreamMapping{
		Function: f.LogicalID, StreamARN: cfn.Scalar(p["Stream"]), StartingPosition: cfn.Scalar(p["StartingPosition"]),
		BatchSize: num(p["BatchSize"], 100), Window: seconds(p["MaximumBatchingWindowInSeconds"]),
		ReportBatchItemFailures: hasString(p["FunctionResponseTypes"], "ReportBatchItemFailures"),
		Bisect:                  cfn.Scalar(p["BisectBatchOnFunctionError"]) == "true",
		MaxRetryAttempts:        num(p["MaximumRetryAttempts"], -1),
		MaxRecordAge:            seconds(p["MaximumRecordAgeInSeconds"]),
		Parallelization:         num(p["ParallelizationFactor"], 1),
	}
	if dest := cfn.Scalar(obj(obj(p["DestinationConfig"])["OnFailure"])["Destination"]); dest != "" {
		url, ok := e.queueURL(dest)
		if !ok {
			return fmt.Errorf("on-failure destination %s is not a queue of the template", dest)
		}
		m.OnFailureQueueURL = url
	}
	var err error
	if m.Filter, err = runner.ParseFilter(cfn.FilterPatterns(p)); err != nil {
		return fmt.Errorf("%s: %w", f.LogicalID, err)
	}
	streams, queue := e.pollers(f.LogicalID)
	_, err = e.Runner.AddStream(streams, queue, m)
	return err
}

// s3Mapping is an S3 event's notification filter.
func s3Mapping(f provision.Function, p map[string]any) runner.S3Mapping {
	m := runner.S3Mapping{Function: f.LogicalID, Bucket: cfn.Scalar(p["Bucket"]), Events: stringList(p["Events"])}
	rules, _ := obj(obj(p["Filter"])["S3Key"])["Rules"].([]any)
	for _, r := range rules {
		rm := obj(r)
		switch strings.ToLower(cfn.Scalar(rm["Name"])) {
		case "prefix":
			m.Prefix = cfn.Scalar(rm["Value"])
		case "suffix":
			m.Suffix = cfn.Scalar(rm["Value"])
		}
	}
	return m
}

// notifyS3 turns an object creation seen by the S3 proxy into a notification.
func (e *Env) notifyS3(ex faultproxy.Exchange) {
	if !ex.ObjectCreated() {
		return
	}
	o := runner.S3Object{Bucket: ex.Operation.Bucket, Key: ex.Operation.Key, Size: ex.ObjectSize, ETag: ex.ETag, VersionID: ex.VersionID}
	switch ex.Operation.Action {
	case "PutObject":
		o.Event = "Put"
	case "CopyObject":
		o.Event = "Copy"
	default:
		o.Event = "CompleteMultipartUpload"
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if o.Size < 0 {
			in := &s3.HeadObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(o.Key)}
			if o.VersionID != "" {
				in.VersionId = aws.String(o.VersionID)
			}
			if h, err := e.Clients.S3.HeadObject(ctx, in); err == nil {
				o.Size = aws.ToInt64(h.ContentLength)
			}
		}
		e.Runner.ObjectCreated(ctx, o)
	}()
}

// Start drives the event sources until Close.
func (e *Env) Start(ctx context.Context) error {
	stop, err := e.Runner.Start(ctx)
	if err != nil {
		return err
	}
	e.stop = stop
	return nil
}

// Close stops the runner, the HTTP servers, the proxies and the servers it
// started (servers it was given keep running).
func (e *Env) Close() error {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
	for _, p := range e.Processes {
		p.Close()
	}
	if e.clockFile != "" {
		_ = os.RemoveAll(filepath.Dir(e.clockFile))
	}
	var errs []error
	for _, s := range e.servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.Shutdown(ctx))
		cancel()
	}
	e.servers = nil
	for _, p := range e.Proxies {
		errs = append(errs, p.Close())
	}
	e.Proxies = map[faultproxy.Service]*faultproxy.Proxy{}
	if e.Search != nil {
		errs = append(errs, e.Search.Close())
		e.Search = nil
	}
	if e.Judge != nil {
		errs = append(errs, e.Judge.Close())
		e.Judge = nil
	}
	if e.iamLog != nil {
		errs = append(errs, e.iamLog.Close())
		e.iamLog = nil
	}
	if e.Servers != nil && !e.ownServers && !e.keepTables {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, e.dropTables(ctx))
		cancel()
	}
	if e.Servers != nil && e.ownServers {
		errs = append(errs, e.Servers.Stop())
	}
	e.Servers = nil
	return errors.Join(errs...)
}

// WriteEnvFile writes Vars as a shell-sourceable file (export NAME='value').
func (e *Env) WriteEnvFile(path string) error {
	keys := make([]string, 0, len(e.Vars))
	for k := range e.Vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# ddbpipe local stack — source this file: . .ddbpipe/local.env\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(e.Vars[k], "'", `'\''`))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("stack: write env file: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("stack: write env file: %w", err)
	}
	return nil
}

func num(v any, def int) int {
	if n, err := strconv.Atoi(cfn.Scalar(v)); err == nil {
		return n
	}
	return def
}

func seconds(v any) time.Duration { return time.Duration(num(v, 0)) * time.Second }

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func hasString(v any, s string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if cfn.Scalar(x) == s {
			return true
		}
	}
	return false
}
