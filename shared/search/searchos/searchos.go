// Package searchos is the search flow's OpenSearch adapter: the index of
// object documents behind two aliases, written with bulk requests at
// external versions, searched, scanned for verification and rebuilt. It
// speaks OpenSearch's REST API through the OpenSearch Go client, signed
// with SigV4 (service "es") with the SDK's credentials; locally the same
// calls reach ZincSearch through the local stack's search proxy, which
// supplies the OpenSearch semantics ZincSearch lacks (docs/local.md).
//
// # Indexes and aliases
//
// Documents live in an index named <alias>-<suffix>. Searches read the
// alias <alias>; writes go to every index the alias <alias>-write names:
// one index in steady state, two while a reindex builds a new one, so the
// stream's changes reach both and the switch loses none.
//
// # Documents
//
// One per object key, with the id search.DocID(key):
//
//	key           keyword  the exact key (filters: exact, prefix)
//	key_words     text     the key's words (search.KeyWords)
//	id            keyword  the document id again (the verify scan's buckets)
//	version       long     the object's version
//	size          long
//	content_type  keyword
//	sha256        keyword
//	placement     keyword  inline | compressed | chunked | s3
//	modified      date
//	text          text     a text-like document's text (search.Text)
//	text_state    keyword  what text holds (search.TextState)
//	excerpt       keyword  the text's beginning, not indexed: snippets
package searchos

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/opensearch-project/opensearch-go/v4/opensearchtransport"
	"github.com/opensearch-project/opensearch-go/v4/signer/awsv2"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// Config says where the engine is and which alias to use.
type Config struct {
	// Endpoint is the engine's URL (https://host), or a domain endpoint
	// without a scheme, as CloudFormation's DomainEndpoint gives it.
	Endpoint string
	// Alias names the index searches read (e.g. "ddbpipe-objects").
	Alias string
	// AWS signs every request with SigV4 for OpenSearch Service (service
	// "es") when set.
	AWS *aws.Config
	// Transport is the HTTP transport (nil: the default one).
	Transport http.RoundTripper
	// Timeout bounds each request (default 30 s).
	Timeout time.Duration
}

// Engine is the index of object documents.
type Engine struct {
	c     *opensearchapi.Client
	alias string

	mu      sync.Mutex
	targets map[string]cachedTargets // write alias → its indexes
}

type cachedTargets struct {
	indexes []string
	at      time.Time
}

// targetsTTL is how long the indexes behind a write alias are cached: a
// reindex waits longer than this after adding its index, so every
// indexer writes to it before the table is scanned. One second costs a
// busy indexer one alias read a second and a reindex a 2 s wait (at 5 s
// the wait was 6 s of a 5,000-object reindex's 13 in the bench at scale
// 0.25).
const targetsTTL = time.Second

// TargetsTTL is targetsTTL, for the reindex's wait.
func TargetsTTL() time.Duration { return targetsTTL }

var (
	_ search.Index        = (*Engine)(nil)
	_ search.Finder       = (*Engine)(nil)
	_ search.IndexScanner = (*Engine)(nil)
)

// New builds the client. It makes no request.
func New(cfg Config) (*Engine, error) {
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("searchos: no endpoint: %w", search.ErrDisabled)
	}
	if cfg.Alias == "" {
		return nil, errors.New("searchos: no alias")
	}
	endpoint := cfg.Endpoint
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	u, err := url.Parse(strings.TrimSuffix(endpoint, "/"))
	if err != nil {
		return nil, fmt.Errorf("searchos: endpoint %q: %w", cfg.Endpoint, err)
	}
	tc := opensearchtransport.Config{
		URLs:      []*url.URL{u},
		Transport: cfg.Transport,
		// The indexer retries with its own backoff and deadline; a retry
		// inside the client would hide the engine's state from it.
		DisableRetry:   true,
		RequestTimeout: timeout,
		// No requests of the client's own: its node-stats poll (GET
		// /_nodes/_local/stats every 5 s) and its health checks (GET /)
		// are calls no role grants, refused on AWS and by the local
		// stack's IAM judge alike.
		NodeStatsInterval: -1,
		HealthCheck:       opensearchtransport.NoOpHealthCheck,
	}
	if cfg.AWS != nil {
		s, err := awsv2.NewSignerWithService(*cfg.AWS, "es")
		if err != nil {
			return nil, fmt.Errorf("searchos: signer: %w", err)
		}
		tc.Signer = s
	}
	tp, err := opensearchtransport.New(tc)
	if err != nil {
		return nil, fmt.Errorf("searchos: client: %w", err)
	}
	c := opensearchapi.NewFromClient(&opensearch.Client{Transport: tp})
	return &Engine{c: c, alias: cfg.Alias, targets: map[string]cachedTargets{}}, nil
}

// Alias is the alias searches read.
func (e *Engine) Alias() string { return e.alias }

// WriteAlias is the alias the indexer writes to.
func (e *Engine) WriteAlias() string { return e.alias + "-write" }

// statusOf is the HTTP status of a failed request: the response's, when
// there was one, else the one its error names (0: no answer at all).
func statusOf(resp *opensearch.Response, err error) int {
	if resp != nil && resp.StatusCode != 0 {
		return resp.StatusCode
	}
	var se *opensearch.StructError
	var str *opensearch.StringError
	switch {
	case errors.As(err, &se):
		return se.Status
	case errors.As(err, &str):
		return str.Status
	}
	return 0
}

// classify wraps a failed request's error: search.ErrUnavailable when a
// retry may succeed (no answer, 429, 5xx), search.ErrNoIndex on a 404.
func classify(op string, resp *opensearch.Response, err error) error {
	switch s := statusOf(resp, err); {
	case s == 0 || s == 429 || s >= 500:
		return fmt.Errorf("searchos: %s: %w: %w", op, search.ErrUnavailable, err)
	case s == 404:
		return fmt.Errorf("searchos: %s: %w: %w", op, search.ErrNoIndex, err)
	}
	return fmt.Errorf("searchos: %s: %w", op, err)
}

// responseOf is the raw response of a typed one (nil when there is none).
func responseOf(i interface{ Inspect() opensearchapi.Inspect }) *opensearch.Response {
	if i == nil {
		return nil
	}
	return i.Inspect().Response
}

// Variables of the functions' environment that name the engine.
const (
	// EndpointVar is the domain endpoint (the template's
	// SearchDomain.DomainEndpoint); empty when the stack runs without search.
	EndpointVar = "SEARCH_ENDPOINT"
	// AliasVar is the search alias (the template's "<stack>-objects").
	AliasVar = "SEARCH_INDEX"
)

// FromAWS builds the engine a function or the CLI uses: at endpoint,
// unless the configuration names an endpoint for OpenSearch
// (AWS_ENDPOINT_URL_OPENSEARCH: the local stack's search proxy), signed
// with the configuration's credentials. No endpoint at all is
// search.ErrDisabled.
func FromAWS(cfg aws.Config, endpoint, alias string) (*Engine, error) {
	if url, ok := awsenv.Endpoint(cfg, "OpenSearch"); ok {
		endpoint = url
	}
	return New(Config{Endpoint: endpoint, Alias: alias, AWS: &cfg})
}

var _ search.Indexes = (*Engine)(nil)
