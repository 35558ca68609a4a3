// Package faultproxy is an HTTP reverse proxy placed in front of a local AWS
// server (DynamoDB Local, the SQS emulator, the S3 server) to inject the faults
// real AWS produces: throttling, 5xx errors, dropped connections and latency,
// each answered in the exact wire shape of the service so that the
// aws-sdk-go-v2 retryer classifies it as it would classify AWS's own answer.
//
// Clients are pointed at the proxy's URL (AWS_ENDPOINT_URL_DYNAMODB and
// friends); the proxy forwards everything else untouched:
//
//   - the request line (escaped path, raw query) and every header, Host
//     included, are forwarded as received, so SigV4 signatures computed for
//     the proxy's address still verify upstream;
//   - bodies are streamed in both directions, never buffered, except that
//     DynamoDB and SQS request bodies (at most 16 MB and 1 MB in AWS) are read
//     into memory to learn the table or queue they address;
//   - connections to the upstream are kept alive and reused.
//
// An optional per-partition-key write limiter (WithKeyWriteLimit) models
// DynamoDB's 1,000 write units per second per partition, and an observer hook
// (Observe) reports every forwarded exchange, which the local runner uses to
// emit S3 ObjectCreated notifications.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// Service names the AWS API a proxy fronts; it decides how requests are
// classified and how injected errors are shaped.
type Service string

// The services a proxy can front.
const (
	DynamoDB Service = "dynamodb"
	SQS      Service = "sqs"
	S3       Service = "s3"
)

// Errors returned by the package.
var (
	ErrUnknownService = errors.New("faultproxy: unknown service")
	ErrBadUpstream    = errors.New("faultproxy: bad upstream URL")
	ErrBadOption      = errors.New("faultproxy: bad option")
	ErrStarted        = errors.New("faultproxy: already started")
)

// Operation is what a request asks of the service, as far as the proxy can
// tell from its headers, path and (DynamoDB, SQS) body.
type Operation struct {
	Service Service
	// Action is the API operation: "PutItem" (DynamoDB, from X-Amz-Target),
	// "ReceiveMessage" (SQS, from X-Amz-Target or the Action form field),
	// "PutObject", "CompleteMultipartUpload", ... (S3, from method, path,
	// query and headers). Empty when it cannot be told.
	Action string
	// Table is the DynamoDB table addressed: TableName, or the only table of a
	// batch or transaction. Empty when a batch spans several tables.
	Table string
	// Tables lists every DynamoDB table the request addresses, sorted.
	Tables []string
	// Bucket and Key address S3 objects. Path-style addressing is assumed,
	// except that a Host of the form <bucket>.localhost names the bucket.
	Bucket, Key string
	// QueueURL is the SQS queue addressed (QueueUrl member or field, or the
	// request's own URL for query-protocol requests posted to the queue).
	QueueURL string
}

// Faults configures what the proxy injects. Rates are shares of the matching
// requests, drawn from one uniform number per request so they never overlap:
// ThrottleRate first, then ServerErrorRate, then DropRate. Negative rates
// count as zero; rates summing past 1 are served in that order.
type Faults struct {
	// ThrottleRate is the share of requests answered with the service's
	// throttling error (see the package's error shapes).
	ThrottleRate float64
	// ServerErrorRate is the share answered with a 500 or 503 error.
	ServerErrorRate float64
	// ServerErrorStatus picks the status of server errors: 500, 503, or 0
	// for either with equal chance.
	ServerErrorStatus int
	// DropRate is the share whose connection is closed with no response.
	DropRate float64
	// Latency is added before a matching request is answered or forwarded,
	// plus a uniform random share of LatencyJitter.
	Latency       time.Duration
	LatencyJitter time.Duration
	// Match, when set, limits faults to the requests it returns true for.
	// It is called on the request's goroutine and must be safe for
	// concurrent use.
	Match func(op Operation) bool
	// FailNext makes the next FailNext matching requests fail with the
	// throttling error regardless of the rates.
	FailNext int
}

// Counts are the proxy's request counters. Throttled counts injected
// throttles (rates and FailNext); KeyThrottled counts requests refused by
// the per-key write limiter; UpstreamErrors counts forwarded requests that
// got no response from the upstream (answered 502).
type Counts struct {
	Requests       int64
	Forwarded      int64
	Throttled      int64
	ServerErrors   int64
	Dropped        int64
	KeyThrottled   int64
	UpstreamErrors int64
	// Denied counts requests the Authorizer refused.
	Denied int64
	// Conflicts counts requests refused by the transaction conflict rules
	// (WithTransactionConflicts).
	Conflicts int64
	// TableThrottled counts writes refused by the table write limit
	// (WithTableWriteLimit).
	TableThrottled int64
}

// Stats is a snapshot of the counters, in total and per Action ("" is
// reported as "Unknown").
type Stats struct {
	Counts
	ByAction map[string]Counts
}

// Exchange describes one forwarded request after its response was copied to
// the client.
type Exchange struct {
	Operation Operation
	Method    string
	Path      string
	RawQuery  string
	// RequestHeader is the request's header as received.
	RequestHeader http.Header
	// RequestContentLength is the request's Content-Length (-1 unknown).
	RequestContentLength int64
	// ObjectSize is, for S3 uploads, the object's size:
	// x-amz-decoded-content-length for aws-chunked uploads, else the
	// Content-Length. It is -1 when unknown (CompleteMultipartUpload,
	// CopyObject: read the object's size with HeadObject).
	ObjectSize int64
	// StatusCode and ResponseHeader are the upstream's (502 and nil when it
	// could not be reached).
	StatusCode     int
	ResponseHeader http.Header
	// ETag and VersionID are the response's ETag and x-amz-version-id.
	ETag      string
	VersionID string
	// ErrorCode is the code of an S3 <Error> document returned with status
	// 200, which S3 does for CompleteMultipartUpload, CopyObject and
	// UploadPartCopy.
	ErrorCode     string
	ResponseBytes int64
	Duration      time.Duration
	// Err is set when the upstream could not be reached or the response
	// could not be copied to the client in full.
	Err error
}

// TablesWritten is the DynamoDB tables a successful write (PutItem,
// UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems) wrote to,
// or nil for any other exchange.
func (e Exchange) TablesWritten() []string {
	if e.Operation.Service != DynamoDB || e.Err != nil {
		return nil
	}
	return tablesWritten(e.Operation.Action, e.StatusCode, e.Operation.Tables)
}

// tablesWritten is tables when action is a DynamoDB write its upstream
// answered with status 2xx, else nil.
func tablesWritten(action string, status int, tables []string) []string {
	if !isDynamoWrite(action) || status/100 != 2 {
		return nil
	}
	return tables
}

// ObjectCreated reports whether the exchange created an S3 object, the event
// S3 would notify as s3:ObjectCreated:*.
func (e Exchange) ObjectCreated() bool {
	if e.Operation.Service != S3 || e.StatusCode != http.StatusOK || e.ErrorCode != "" || e.Err != nil {
		return false
	}
	switch e.Operation.Action {
	case "PutObject", "CompleteMultipartUpload", "CopyObject":
		return true
	}
	return false
}

// Clock is the proxy's source of time: the key limiter's buckets refill by
// it and injected latency sleeps on it.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, returning ctx's error then.
	Sleep(ctx context.Context, d time.Duration) error
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, d) }

// Option configures a Proxy.
type Option func(*config) error

type config struct {
	rng            *rand.Rand
	clock          Clock
	logger         *slog.Logger
	addr           string
	keyLimit       float64
	dynamoThrottle string
	transport      http.RoundTripper
	authorize      Authorizer
	streamShards   *StreamShards
	conflicts      bool
	tableLimit     *TableWriteLimit
}

// Authorizer decides, before any fault or forwarding, whether a request
// may reach the upstream (the local stack's IAM judge). body is the
// request body the proxy read to classify it (DynamoDB, SQS, S3
// DeleteObjects), nil otherwise. It may rewrite r's credentials for the
// upstream. A non-nil Denial is answered as the service's access-denied
// error: DynamoDB's AccessDeniedException (400), SQS's AccessDenied (403,
// in the request's protocol), S3's AccessDenied (403).
type Authorizer func(r *http.Request, op Operation, body []byte) *Denial

// Denial is an Authorizer's refusal; Message is the error's message.
type Denial struct{ Message string }

// WithAuthorizer makes every request pass a before it is served.
func WithAuthorizer(a Authorizer) Option {
	return func(c *config) error {
		if a == nil {
			return fmt.Errorf("%w: nil authorizer", ErrBadOption)
		}
		c.authorize = a
		return nil
	}
}

// WithSeed seeds the proxy's random source, making its fault decisions
// reproducible for a given request order.
func WithSeed(seed uint64) Option {
	return func(c *config) error {
		c.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		return nil
	}
}

// WithRand sets the proxy's random source. The proxy serialises its use.
func WithRand(r *rand.Rand) Option {
	return func(c *config) error {
		if r == nil {
			return fmt.Errorf("%w: nil rand", ErrBadOption)
		}
		c.rng = r
		return nil
	}
}

// WithClock sets the proxy's clock (default: the system clock).
func WithClock(clk Clock) Option {
	return func(c *config) error {
		if clk == nil {
			return fmt.Errorf("%w: nil clock", ErrBadOption)
		}
		c.clock = clk
		return nil
	}
}

// WithLogger sets the logger for upstream failures and injected faults.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrBadOption)
		}
		c.logger = l
		return nil
	}
}

// WithAddr sets the address Start listens on (default "127.0.0.1:0").
func WithAddr(addr string) Option {
	return func(c *config) error {
		c.addr = addr
		return nil
	}
}

// WithTransport sets the round tripper used to reach the upstream. The
// default keeps up to 256 idle connections, never uses an HTTP proxy and
// never asks for compression.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *config) error {
		if rt == nil {
			return fmt.Errorf("%w: nil transport", ErrBadOption)
		}
		c.transport = rt
		return nil
	}
}

// DefaultKeyWriteLimit is AWS's write throughput of one partition, in write
// units per second.
const DefaultKeyWriteLimit = 1000

// WithKeyWriteLimit enables the DynamoDB per-partition-key write limiter at
// unitsPerSecond write units (DefaultKeyWriteLimit when <= 0), with a burst
// of one second of capacity. See the limiter's documentation in keylimit.go
// for how units are approximated.
func WithKeyWriteLimit(unitsPerSecond float64) Option {
	return func(c *config) error {
		if unitsPerSecond <= 0 {
			unitsPerSecond = DefaultKeyWriteLimit
		}
		c.keyLimit = unitsPerSecond
		return nil
	}
}

// DynamoDB throttling error codes usable with WithDynamoDBThrottleCode.
const (
	ProvisionedThroughputExceeded = "ProvisionedThroughputExceededException"
	ThrottlingException           = "ThrottlingException"
	RequestLimitExceeded          = "RequestLimitExceeded"
)

// WithDynamoDBThrottleCode picks the error a DynamoDB proxy answers injected
// throttles (rates, FailNext) with: ProvisionedThroughputExceeded (default),
// ThrottlingException or RequestLimitExceeded. The key limiter always
// answers ProvisionedThroughputExceeded (TransactionCanceledException for
// transactions).
func WithDynamoDBThrottleCode(code string) Option {
	return func(c *config) error {
		if _, ok := dynamoThrottles[code]; !ok {
			return fmt.Errorf("%w: unknown DynamoDB throttle code %q", ErrBadOption, code)
		}
		c.dynamoThrottle = code
		return nil
	}
}

// Proxy is a fault-injecting reverse proxy for one service. Its methods are
// safe for concurrent use.
type Proxy struct {
	service        Service
	upstream       *url.URL
	transport      http.RoundTripper
	rp             *httputil.ReverseProxy
	clock          Clock
	logger         *slog.Logger
	addr           string
	dynamoThrottle string
	limiter        *keyLimiter
	authorize      Authorizer
	shards         *shardEmulator
	conflicts      *conflictTracker
	tableLimit     *tableLimiter
	requestSeq     atomic.Uint64

	mu       sync.Mutex // guards faults, failNext, rng, counts, byAction
	faults   Faults
	failNext int
	rng      *rand.Rand
	counts   Counts
	byAction map[string]*Counts

	obsMu     sync.RWMutex
	observers []func(Exchange)

	srvMu sync.Mutex
	srv   *http.Server
}

var _ http.Handler = (*Proxy)(nil)

// New returns a proxy for service forwarding to upstream, an http(s) URL
// with no path ("http://127.0.0.1:8000").
func New(service Service, upstream string, opts ...Option) (*Proxy, error) {
	switch service {
	case DynamoDB, SQS, S3:
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownService, service)
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadUpstream, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("%w: %q: want scheme://host:port", ErrBadUpstream, upstream)
	}
	u.Path = ""

	cfg := config{
		clock:          systemClock{},
		logger:         slog.Default(),
		addr:           "127.0.0.1:0",
		dynamoThrottle: ProvisionedThroughputExceeded,
	}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.keyLimit > 0 && service != DynamoDB {
		return nil, fmt.Errorf("%w: WithKeyWriteLimit applies to DynamoDB only, not %s", ErrBadOption, service)
	}
	if (cfg.streamShards != nil || cfg.conflicts || cfg.tableLimit != nil) && service != DynamoDB {
		return nil, fmt.Errorf("%w: WithStreamShards, WithTransactionConflicts and WithTableWriteLimit apply to DynamoDB only, not %s", ErrBadOption, service)
	}
	if cfg.rng == nil {
		cfg.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.transport == nil {
		cfg.transport = newTransport()
	}

	p := &Proxy{
		service:        service,
		upstream:       u,
		transport:      cfg.transport,
		clock:          cfg.clock,
		logger:         cfg.logger,
		addr:           cfg.addr,
		dynamoThrottle: cfg.dynamoThrottle,
		authorize:      cfg.authorize,
		rng:            cfg.rng,
		byAction:       make(map[string]*Counts),
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      p.transport,
		FlushInterval:  -1,
		ErrorLog:       slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn),
		ErrorHandler:   p.upstreamError,
		ModifyResponse: p.captureResponse,
	}
	if cfg.keyLimit > 0 {
		p.limiter = newKeyLimiter(cfg.keyLimit, p.clock, p.describeTable)
	}
	if cfg.streamShards != nil {
		p.shards = &shardEmulator{cfg: *cfg.streamShards, call: p.callUpstream, streams: map[string]*vstream{}}
	}
	if cfg.conflicts {
		p.conflicts = newConflictTracker(p.keySchema)
	}
	if cfg.tableLimit != nil {
		p.tableLimit = newTableLimiter(*cfg.tableLimit, p.clock)
	}
	return p, nil
}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// Handler returns the proxy as an http.Handler, for mounting in a server of
// the caller's own.
func (p *Proxy) Handler() http.Handler { return p }

// Start serves the proxy on its address (default 127.0.0.1, a free port)
// and returns its base URL.
func (p *Proxy) Start() (string, error) {
	p.srvMu.Lock()
	defer p.srvMu.Unlock()
	if p.srv != nil {
		return "", ErrStarted
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return "", fmt.Errorf("faultproxy: listen on %s: %w", p.addr, err)
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn),
	}
	go func(srv *http.Server) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.logger.Error("faultproxy: serve", "service", p.service, "err", err)
		}
	}(p.srv)
	return "http://" + ln.Addr().String(), nil
}

// Close stops the server started by Start, closing its connections, and
// closes idle upstream connections.
func (p *Proxy) Close() error {
	p.srvMu.Lock()
	defer p.srvMu.Unlock()
	var err error
	if p.srv != nil {
		err = p.srv.Close()
	}
	if t, ok := p.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	if err != nil {
		return fmt.Errorf("faultproxy: close: %w", err)
	}
	return nil
}

// SetFaults replaces the faults in force; FailNext restarts from f.FailNext.
func (p *Proxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	p.failNext = f.FailNext
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Counts: p.counts, ByAction: make(map[string]Counts, len(p.byAction))}
	for action, c := range p.byAction {
		s.ByAction[action] = *c
	}
	return s
}

// SetKeyWriteLimit changes the key limiter's rate, and so its burst, on a
// running proxy: unitsPerSecond write units per second per partition key
// (DefaultKeyWriteLimit when <= 0). Every bucket is first refilled at the
// old rate up to now, then capped at the new burst; the keys' statistics
// are kept. It fails with ErrBadOption when the proxy was built without
// WithKeyWriteLimit.
func (p *Proxy) SetKeyWriteLimit(unitsPerSecond float64) error {
	if p.limiter == nil {
		return fmt.Errorf("%w: SetKeyWriteLimit needs a proxy built WithKeyWriteLimit", ErrBadOption)
	}
	if unitsPerSecond <= 0 {
		unitsPerSecond = DefaultKeyWriteLimit
	}
	p.limiter.setRate(unitsPerSecond)
	return nil
}

// KeyWriteLimit returns the key limiter's rate in write units per second
// per partition key, 0 when the limiter is off.
func (p *Proxy) KeyWriteLimit() float64 {
	if p.limiter == nil {
		return 0
	}
	p.limiter.mu.Lock()
	defer p.limiter.mu.Unlock()
	return p.limiter.rate
}

// HotKeys returns the write statistics of the partition keys the key limiter
// tracks, the most written first; nil when the limiter is off.
func (p *Proxy) HotKeys() []KeyStat {
	if p.limiter == nil {
		return nil
	}
	return p.limiter.hotKeys()
}

// Observe registers fn to be called after each forwarded request's response
// has been copied to the client (faults injected by the proxy are not
// reported). fn runs on the request's goroutine, before the connection
// serves its next request: keep it short.
func (p *Proxy) Observe(fn func(ev Exchange)) {
	if fn == nil {
		return
	}
	p.obsMu.Lock()
	defer p.obsMu.Unlock()
	p.observers = append(p.observers, fn)
}

// count applies inc to the total and per-action counters.
func (p *Proxy) count(action string, inc func(*Counts)) {
	if action == "" {
		action = "Unknown"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	inc(&p.counts)
	c, ok := p.byAction[action]
	if !ok {
		c = &Counts{}
		p.byAction[action] = c
	}
	inc(c)
}

type faultKind int

const (
	faultNone faultKind = iota
	faultThrottle
	faultServerError
	faultDrop
)

type decision struct {
	kind    faultKind
	status  int // server errors: 500 or 503
	latency time.Duration
}

// decide counts the request and draws its fate from the faults in force.
func (p *Proxy) decide(op Operation) decision {
	p.count(op.Action, func(c *Counts) { c.Requests++ })

	p.mu.Lock()
	f := p.faults
	p.mu.Unlock()
	if f.Match != nil && !f.Match(op) {
		return decision{}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	var d decision
	d.latency = f.Latency
	if f.LatencyJitter > 0 {
		d.latency += time.Duration(p.rng.Int64N(int64(f.LatencyJitter)))
	}
	if p.failNext > 0 {
		p.failNext--
		d.kind = faultThrottle
		return d
	}
	throttle := max(f.ThrottleRate, 0)
	server := throttle + max(f.ServerErrorRate, 0)
	drop := server + max(f.DropRate, 0)
	if drop <= 0 {
		return d
	}
	switch x := p.rng.Float64(); {
	case x < throttle:
		d.kind = faultThrottle
	case x < server:
		d.kind = faultServerError
		d.status = f.ServerErrorStatus
		if d.status != http.StatusInternalServerError && d.status != http.StatusServiceUnavailable {
			d.status = http.StatusInternalServerError
			if p.rng.IntN(2) == 1 {
				d.status = http.StatusServiceUnavailable
			}
		}
	case x < drop:
		d.kind = faultDrop
	}
	return d
}

// ServeHTTP classifies the request, injects the fault drawn for it, applies
// the key limiter and forwards what is left.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := p.clock.Now()
	op, body, err := p.operation(r)
	if err != nil {
		// The client went away or sent a broken body; answer in case it
		// is still there.
		p.logger.Debug("faultproxy: read request", "service", p.service, "err", err)
		p.count(op.Action, func(c *Counts) { c.Requests++ })
		http.Error(w, "faultproxy: cannot read request body", http.StatusBadRequest)
		return
	}

	body, ok := p.authorized(w, r, op, body)
	if !ok {
		return
	}

	d := p.decide(op)
	if d.latency > 0 {
		if err := p.clock.Sleep(r.Context(), d.latency); err != nil {
			return
		}
	}
	switch d.kind {
	case faultThrottle:
		p.count(op.Action, func(c *Counts) { c.Throttled++ })
		p.logger.Debug("faultproxy: throttle", "service", p.service, "action", op.Action)
		p.writeError(w, r, p.throttleError(r, op))
		return
	case faultServerError:
		p.count(op.Action, func(c *Counts) { c.ServerErrors++ })
		p.logger.Debug("faultproxy: server error", "service", p.service, "action", op.Action, "status", d.status)
		p.writeError(w, r, p.serverError(d.status))
		return
	case faultDrop:
		p.count(op.Action, func(c *Counts) { c.Dropped++ })
		p.logger.Debug("faultproxy: drop", "service", p.service, "action", op.Action)
		drop(w)
		return
	}

	if p.serveStreams(w, r, op, body) || p.serveWarm(w, r, op, body) {
		return
	}
	if !p.withinLimits(w, r, op, body) {
		return
	}
	if _, readAhead := r.Body.(*replayBody); readAhead {
		// The body was read to classify the request, so the client has had
		// its 100 Continue already; the upstream need not send another.
		r.Header.Del("Expect")
	}
	release, refusal := p.admitConflicts(r, op, body)
	if refusal != nil {
		p.count(op.Action, func(c *Counts) { c.Conflicts++ })
		p.logger.Debug("faultproxy: transaction conflict", "action", op.Action, "table", op.Table)
		p.writeError(w, r, *refusal)
		return
	}
	defer release()
	p.forward(w, r, op, start)
}

// authorized asks the IAM judge, if any, about the request, and answers
// its denial. It returns the body read to judge it, and false when it
// answered the request.
func (p *Proxy) authorized(w http.ResponseWriter, r *http.Request, op Operation, body []byte) ([]byte, bool) {
	if p.authorize == nil {
		return body, true
	}
	if p.service == S3 && op.Action == "DeleteObjects" {
		b, _, err := bufferBody(r)
		if err != nil {
			p.count(op.Action, func(c *Counts) { c.Requests++ })
			http.Error(w, "faultproxy: cannot read request body", http.StatusBadRequest)
			return nil, false
		}
		body = b
	}
	if denial := p.authorize(r, op, body); denial != nil {
		p.count(op.Action, func(c *Counts) { c.Requests++; c.Denied++ })
		p.logger.Debug("faultproxy: denied", "service", p.service, "action", op.Action, "message", denial.Message)
		p.writeError(w, r, p.accessDenied(denial.Message))
		return nil, false
	}
	return body, true
}

// withinLimits applies the per-key and the table-level write limits,
// answering a write over either with its throttling error (false), and
// keeps the limits' view of the tables current.
func (p *Proxy) withinLimits(w http.ResponseWriter, r *http.Request, op Operation, body []byte) bool {
	if p.limiter != nil && body != nil && isDynamoWrite(op.Action) {
		if e, throttled := p.limitKeys(r, op, body); throttled {
			p.count(op.Action, func(c *Counts) { c.KeyThrottled++ })
			p.writeError(w, r, e)
			return false
		}
	}
	if p.tableLimit != nil && body != nil {
		if isDynamoWrite(op.Action) {
			if e, throttled := p.limitTables(r, op, body); throttled {
				p.count(op.Action, func(c *Counts) { c.TableThrottled++ })
				p.writeError(w, r, e)
				return false
			}
		}
		p.tableLimit.observe(op, body)
	}
	if p.limiter != nil && (op.Action == "CreateTable" || op.Action == "DeleteTable") {
		p.limiter.forget(op.Table)
	}
	return true
}

// drop closes the client's connection without a response. Where the
// connection cannot be hijacked (HTTP/2) the stream is aborted instead.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// rewrite points the outbound request at the upstream, keeping the Host
// header and the raw query exactly as received.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	pr.Out.Host = pr.In.Host
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
}

type flightKey struct{}

// flight is the state of one forwarded request, shared with the reverse
// proxy's hooks through the request context.
type flight struct {
	action string
	tables []string // a DynamoDB request's (Operation.Tables)
	status int
	header http.Header
	body   *responseTap
	err    error
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, op Operation, start time.Time) {
	p.count(op.Action, func(c *Counts) { c.Forwarded++ })
	fl := &flight{action: op.Action, tables: op.Tables}
	r = r.WithContext(context.WithValue(r.Context(), flightKey{}, fl))

	p.obsMu.RLock()
	observers := p.observers
	p.obsMu.RUnlock()

	completed := false
	if len(observers) > 0 {
		// Deferred so observers also hear of responses the reverse proxy
		// aborts (with a panic) when the client goes away mid-body.
		defer func() {
			ex := p.exchange(r, op, fl, start)
			if !completed && ex.Err == nil {
				ex.Err = errors.New("faultproxy: response copy aborted")
			}
			for _, fn := range observers {
				fn(ex)
			}
		}()
	}
	p.rp.ServeHTTP(w, r)
	completed = true
}

func (p *Proxy) exchange(r *http.Request, op Operation, fl *flight, start time.Time) Exchange {
	ex := Exchange{
		Operation:            op,
		Method:               r.Method,
		Path:                 r.URL.Path,
		RawQuery:             r.URL.RawQuery,
		RequestHeader:        r.Header.Clone(),
		RequestContentLength: r.ContentLength,
		ObjectSize:           -1,
		StatusCode:           fl.status,
		ResponseHeader:       fl.header,
		Duration:             p.clock.Now().Sub(start),
		Err:                  fl.err,
	}
	if fl.header != nil {
		ex.ETag = fl.header.Get("ETag")
		ex.VersionID = fl.header.Get("X-Amz-Version-Id")
	}
	if fl.body != nil {
		ex.ResponseBytes = fl.body.n
		if fl.body.err != nil && ex.Err == nil {
			ex.Err = fl.body.err
		}
		if fl.status == http.StatusOK {
			ex.ErrorCode = s3ErrorCode(fl.body.captured)
		}
	}
	if op.Service == S3 && (op.Action == "PutObject" || op.Action == "UploadPart") {
		ex.ObjectSize = r.ContentLength
		if v := r.Header.Get("X-Amz-Decoded-Content-Length"); v != "" {
			var n int64
			if _, err := fmt.Sscan(v, &n); err == nil {
				ex.ObjectSize = n
			}
		}
	}
	return ex
}

// captureResponse records the upstream's status and headers and taps the
// body to count it (and, for the S3 operations that can return an error
// with status 200, to keep its head).
func (p *Proxy) captureResponse(resp *http.Response) error {
	fl, ok := resp.Request.Context().Value(flightKey{}).(*flight)
	if !ok {
		return nil
	}
	fl.status = resp.StatusCode
	fl.header = resp.Header.Clone()
	if written := tablesWritten(fl.action, resp.StatusCode, fl.tables); p.shards != nil && written != nil {
		// The write is committed upstream, and its client has not had
		// the answer yet: any read it makes next, or that a reader woken
		// by the observers makes, pumps the stream again.
		p.shards.written(written)
	}
	tap := &responseTap{rc: resp.Body}
	if p.service == S3 && resp.StatusCode == http.StatusOK {
		switch fl.action {
		case "CompleteMultipartUpload", "CopyObject", "UploadPartCopy":
			tap.keep = maxErrorCapture
		}
	}
	fl.body = tap
	resp.Body = tap
	return nil
}

// upstreamError answers 502 when the upstream could not be reached.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	action := ""
	if fl, ok := r.Context().Value(flightKey{}).(*flight); ok {
		fl.status = http.StatusBadGateway
		fl.err = err
		action = fl.action
	}
	if r.Context().Err() != nil {
		return // the client went away: nobody to answer, nothing wrong upstream
	}
	p.logger.Warn("faultproxy: upstream", "service", p.service, "upstream", p.upstream.String(), "err", err)
	p.count(action, func(c *Counts) { c.UpstreamErrors++ })
	w.WriteHeader(http.StatusBadGateway)
}
