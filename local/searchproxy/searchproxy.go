// Package searchproxy presents OpenSearch's REST API at the root paths, as
// an OpenSearch Service domain does, in front of a local ZincSearch (whose
// Elasticsearch-compatible API lives under /es), and provides what the
// project relies on that ZincSearch lacks:
//
//   - ExternalVersions: versions per index and id for index, create, delete
//     and update (bulk items and single documents): version_type=external
//     (and external_gte), internal versions, if_seq_no/if_primary_term and
//     _create, each refused with 409 version_conflict_engine_exception as
//     OpenSearch refuses it; a delete leaves a tombstone at its version,
//     kept for good (OpenSearch keeps them index.gc_deletes long).
//   - OrderedBulk: a bulk's items on one id apply in order, and a delete
//     deletes (ZincSearch leaves a document deleted right after its index in
//     one bulk); the engine gets at most one item per id per request.
//   - ItemErrors: each bulk item gets its own result (ZincSearch stops at
//     the first document it refuses and reports it "created"; the proxy
//     fails that item with mapper_parsing_exception and sends the rest again).
//   - Aliases: aliases held by the proxy, resolved for writes and reads
//     (ZincSearch's aliases serve searches only: a bulk by alias creates an
//     index of that name), updated atomically by POST /_aliases.
//   - GetByID: GET /{index}/_doc/{id} (ZincSearch has none), for any id.
//   - StrictBulk: a malformed bulk gets 400 (ZincSearch answers 200 with no items).
//   - Refresh: refresh=true or wait_for on a write, and /_refresh, wait until
//     the engine made the writes searchable.
//   - Count: /{index}/_count (ZincSearch has none), from a search's total.
//   - StrictMapping: an index created with "dynamic": "strict" refuses a
//     document with an unmapped field (strict_dynamic_mapping_exception);
//     ZincSearch maps it as text.
//   - SearchAfter: hits carry their sort values, and search_after pages
//     (ZincSearch has neither), by from/size at the position found; and
//     "version": true gives hits their _version.
//
// Each is on unless Options.Off names it; off, that part passes through to
// ZincSearch as it is. The versions and aliases live in memory and, with
// Options.StateFile, in a file: they survive a restart of the engine (the
// proxy stays up) and of the proxy.
package searchproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Feature is one of what the proxy provides; Options.Off turns features off.
type Feature uint

// The features, all on by default.
const (
	ExternalVersions Feature = 1 << iota
	OrderedBulk
	ItemErrors
	Aliases
	GetByID
	StrictBulk
	Refresh
	Count
	SearchAfter
	StrictMapping
)

// Options configures a Proxy.
type Options struct {
	// Engine is ZincSearch's root URL (servers.Stack.Search); User and
	// Password its basic auth, added to every forwarded request.
	Engine         string
	User, Password string
	// StateFile keeps the versions and aliases; "" keeps them in memory.
	StateFile string
	// Off lists the features turned off (OR them).
	Off Feature
	// RefreshInterval is the engine's interval for making writes searchable
	// (ZINC_WAL_SYNC_INTERVAL); default 1s, ZincSearch's default.
	RefreshInterval time.Duration
	// RefreshWait bounds a refresh's wait for the engine to serve the
	// writes before it (then 503); default 20 s, within the clients' 30 s
	// request timeout.
	RefreshWait time.Duration
	// MaxBodyBytes bounds a request body (OpenSearch's
	// http.max_content_length); default 100 MiB.
	MaxBodyBytes int64
	// Client sends the requests to the engine; default one with keep-alive
	// and no proxy. Tests and fault injection give their own.
	Client *http.Client
	Log    *slog.Logger
}

// Proxy is the http.Handler. Close it to close its state file.
type Proxy struct {
	o      Options
	engine *url.URL
	state  *store
	client *http.Client
	log    *slog.Logger
	pages  pager
	// unflushed are the documents whose last write may not be searchable yet.
	unflushed unflushed
	// aliasMu makes alias updates one at a time (each reads, then writes).
	aliasMu sync.Mutex
}

var _ http.Handler = (*Proxy)(nil)

// New opens the state and returns the proxy.
func New(o Options) (*Proxy, error) {
	engine, err := url.Parse(strings.TrimRight(o.Engine, "/"))
	if err != nil || engine.Scheme == "" || engine.Host == "" {
		return nil, fmt.Errorf("searchproxy: bad engine URL %q", o.Engine)
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = time.Second
	}
	if o.RefreshWait <= 0 {
		o.RefreshWait = 20 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 100 << 20
	}
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(o.StateFile)
	if err != nil {
		return nil, err
	}
	return &Proxy{o: o, engine: engine, state: st, client: client, log: log}, nil
}

// Close closes the state file.
func (p *Proxy) Close() error { return p.state.close() }

func (p *Proxy) on(f Feature) bool { return p.o.Off&f == 0 }

// Server is a Proxy served on a port of 127.0.0.1.
type Server struct {
	*Proxy
	URL string
	srv *http.Server
}

// Start serves a new Proxy on 127.0.0.1:port (0: a free port).
func Start(o Options, port int) (*Server, error) {
	p, err := New(o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("searchproxy: listen: %w", err), p.Close())
	}
	s := &Server{Proxy: p, URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving (requests in flight get 2 s to finish; connections
// a client opened and never used are cut, as Shutdown alone would wait 5 s
// for them), then closes the proxy.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var err error
	if s.srv.Shutdown(ctx) != nil {
		err = s.srv.Close()
	}
	return errors.Join(err, s.Proxy.Close())
}

// ServeHTTP routes a request by its path's segments (each unescaped, so an
// id may hold '/', '#', '%' or spaces).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r.URL.EscapedPath())
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "illegal_argument_exception", "bad path: %v", err))
		return
	}
	if apiErr := p.route(w, r, seg); apiErr != nil {
		writeError(w, apiErr)
	}
}

func segments(escaped string) ([]string, error) {
	var seg []string
	for _, s := range strings.Split(strings.Trim(escaped, "/"), "/") {
		if s == "" {
			continue
		}
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, err
		}
		seg = append(seg, u)
	}
	return seg, nil
}

func (p *Proxy) route(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	m := r.Method
	at := func(i int) string {
		if i < len(seg) {
			return seg[i]
		}
		return ""
	}
	switch {
	case len(seg) == 0:
		return p.root(w, r)
	case seg[0] == "_bulk" && len(seg) == 1, at(1) == "_bulk" && len(seg) == 2:
		index := ""
		if len(seg) == 2 {
			index = seg[0]
		}
		return p.bulk(w, r, index)
	case seg[0] == "_refresh" && len(seg) == 1, at(1) == "_refresh" && len(seg) == 2:
		return p.refresh(w, r)
	case (seg[0] == "_aliases" || seg[0] == "_alias") && p.on(Aliases):
		return p.aliasesAPI(w, r, seg)
	case (at(1) == "_alias" || at(1) == "_aliases") && p.on(Aliases):
		return p.indexAliases(w, r, seg)
	case at(1) == "_doc" && len(seg) == 3 && (m == http.MethodGet || m == http.MethodHead) && p.on(GetByID):
		return p.getDoc(w, r, seg[0], seg[2])
	case (at(1) == "_doc" || at(1) == "_create") && (len(seg) == 3 || len(seg) == 2 && m == http.MethodPost) && m != http.MethodGet && m != http.MethodHead:
		return p.writeDoc(w, r, seg)
	case at(1) == "_count" && len(seg) == 2 && p.on(Count):
		return p.count(w, r, seg[0])
	case at(1) == "_search" && len(seg) == 2:
		return p.search(w, r, seg[0])
	case len(seg) == 1 && !strings.HasPrefix(seg[0], "_"):
		return p.indexAPI(w, r, seg[0])
	}
	// Everything else goes to the Elasticsearch-compatible API as it is,
	// with its first segment resolved when it names an alias.
	if len(seg) > 0 && !strings.HasPrefix(seg[0], "_") {
		seg[0] = p.resolveList(seg[0])
	}
	return p.forward(w, r, "/es/"+escapeSegments(seg), r.URL.RawQuery)
}

func escapeSegments(seg []string) string {
	esc := make([]string, len(seg))
	for i, s := range seg {
		esc[i] = url.PathEscape(s)
	}
	return strings.Join(esc, "/")
}

// resolveList resolves each name of a comma-separated list of indexes.
func (p *Proxy) resolveList(names string) string {
	if !p.on(Aliases) {
		return names
	}
	var out []string
	for _, n := range strings.Split(names, ",") {
		out = append(out, p.state.resolve(n)...)
	}
	return strings.Join(out, ",")
}

// writeIndex is the one index a write or a get by id addresses by name:
// the index an alias points at, or the name itself. An alias on several
// indexes has no write index (the proxy knows no is_write_index).
func (p *Proxy) writeIndex(name string) (string, *apiError) {
	if !p.on(Aliases) {
		return name, nil
	}
	indexes := p.state.resolve(name)
	if len(indexes) != 1 {
		e := errorf(http.StatusBadRequest, "illegal_argument_exception",
			"no write index is defined for alias [%s]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index", name)
		e.Index = name
		return "", e
	}
	return indexes[0], nil
}

// engineRequest sends a request to the engine with its basic auth.
func (p *Proxy) engineRequest(ctx context.Context, method, path, rawQuery string, body []byte, header http.Header) (*http.Response, error) {
	u := *p.engine
	u.RawPath = p.engine.EscapedPath() + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = rawQuery
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", "Host", "Content-Length", "Connection", "Accept-Encoding":
			continue
		}
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.SetBasicAuth(p.o.User, p.o.Password)
	return p.client.Do(req)
}

// engineJSON sends a JSON request and reads the answer whole.
func (p *Proxy) engineJSON(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	resp, err := p.engineRequest(ctx, method, path, "", body, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// unavailable is the answer when the engine cannot be reached: 503, which
// clients retry, as they retry OpenSearch's.
func unavailable(err error) *apiError {
	return errorf(http.StatusServiceUnavailable, "unavailable_shards_exception", "search engine unavailable: %v", err)
}

// forward passes a request to the engine and its answer back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, path, rawQuery string) *apiError {
	body, apiErr := p.readBody(r)
	if apiErr != nil {
		return apiErr
	}
	if len(body) == 0 && r.Method != http.MethodPost && r.Method != http.MethodPut {
		body = nil
	}
	resp, err := p.engineRequest(r.Context(), r.Method, path, rawQuery, body, r.Header)
	if err != nil {
		return unavailable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return engineStatus(resp.StatusCode, data)
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return nil
}

func (p *Proxy) readBody(r *http.Request) ([]byte, *apiError) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.o.MaxBodyBytes+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "illegal_argument_exception", "read body: %v", err)
	}
	if int64(len(body)) > p.o.MaxBodyBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, "content_too_long_exception",
			"request body is larger than the limit of [%d] bytes", p.o.MaxBodyBytes)
	}
	return body, nil
}

// root answers GET / as an OpenSearch domain does, once the engine answers.
func (p *Proxy) root(w http.ResponseWriter, r *http.Request) *apiError {
	status, _, err := p.engineJSON(r.Context(), http.MethodGet, "/es/", nil)
	if err != nil {
		return unavailable(err)
	}
	if status != http.StatusOK {
		return errorf(http.StatusServiceUnavailable, "unavailable_shards_exception", "search engine answered %d", status)
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name": "ddbpipe-local", "cluster_name": "ddbpipe-local", "cluster_uuid": "ddbpipe-local",
		"version": map[string]any{
			"distribution": "opensearch", "number": "2.19.0", "build_type": "zincsearch behind ddbpipe's search proxy",
			"lucene_version": "n/a", "minimum_wire_compatibility_version": "7.10.0", "minimum_index_compatibility_version": "7.0.0",
		},
		"tagline": "The OpenSearch Project: https://opensearch.org/",
	})
	return nil
}

// refreshParam reports whether a write asks to be searchable on return.
func refreshParam(q url.Values) bool {
	v, ok := q["refresh"]
	if !ok {
		return false
	}
	return len(v) == 0 || v[0] == "" || v[0] == "true" || v[0] == "wait_for"
}

// refresh answers /_refresh and /{index}/_refresh once the engine serves
// the writes before it: the latest writes of every index, found by id (the
// engine flushes in order of receipt, so the rest were flushed with them).
// A fixed wait of one sync interval and a margin was not enough on a
// loaded machine: a reindex's alias switch, right after its refresh, once
// served six searches empty. Writes still not served after RefreshWait
// answer 503: a refresh that returned 200 before its writes were
// searchable let a reindex of 100,000 objects switch to an index that
// served four searches empty.
func (p *Proxy) refresh(w http.ResponseWriter, r *http.Request) *apiError {
	if p.on(Refresh) {
		left := p.awaitServed(r.Context(), p.unflushed.latest(refreshChecks), p.o.RefreshWait)
		if err := r.Context().Err(); err != nil {
			return unavailable(err)
		}
		if left > 0 {
			return unavailable(fmt.Errorf("refresh: %d of the latest writes not searchable after %s; refresh again", left, p.o.RefreshWait))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"_shards": shards()})
	return nil
}

// A refresh checks the latest refreshChecks writes of each index.
const refreshChecks = 200

func shards() map[string]int { return map[string]int{"total": 1, "successful": 1, "failed": 0} }

func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}
