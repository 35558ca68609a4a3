package iam

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

const domainARN = "arn:aws:es:us-east-1:000000000000:domain/st-search"

var searchPlace = Place{Region: place.Region, AccountID: place.AccountID, SearchDomain: domainARN}

// TestMapOpenSearch: a request to the domain's REST API is its method's
// es:ESHttp* action on the domain's ARN and the URL path; neither the body
// nor the query counts, as OpenSearch Service authorizes them.
func TestMapOpenSearch(t *testing.T) {
	for _, tt := range []struct {
		name, method, path string
		want               []Call
	}{
		{"create an index", "PUT", "/st-objects-20260101", one("es:ESHttpPut", domainARN+"/st-objects-20260101")},
		{"delete an index", "DELETE", "/st-objects-20260101", one("es:ESHttpDelete", domainARN+"/st-objects-20260101")},
		{"read an alias", "GET", "/_alias/st-objects-write", one("es:ESHttpGet", domainARN+"/_alias/st-objects-write")},
		{"point the aliases", "POST", "/_aliases", one("es:ESHttpPost", domainARN+"/_aliases")},
		{"bulk, indexes in the body", "POST", "/_bulk", one("es:ESHttpPost", domainARN+"/_bulk")},
		{"search the alias", "POST", "/st-objects/_search", one("es:ESHttpPost", domainARN+"/st-objects/_search")},
		{"search by GET", "GET", "/st-objects/_search", one("es:ESHttpGet", domainARN+"/st-objects/_search")},
		{"head an index", "HEAD", "/st-objects", one("es:ESHttpHead", domainARN+"/st-objects")},
		{"patch", "PATCH", "/x", one("es:ESHttpPatch", domainARN+"/x")},
		{"the root", "GET", "/", one("es:ESHttpGet", domainARN+"/")},
		{"query ignored", "POST", "/_bulk?refresh=wait_for", one("es:ESHttpPost", domainARN+"/_bulk")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := http.NewRequest(tt.method, "http://127.0.0.1:9200"+tt.path, strings.NewReader(`{"index":{"_index":"other"}}`))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Map(FromHTTP(OpenSearch, r, nil), searchPlace)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMapOpenSearchRefuses: a method the service has no action for, and
// any request of a stack with no search domain, cannot be judged.
func TestMapOpenSearchRefuses(t *testing.T) {
	for _, tt := range []struct {
		name, method string
		p            Place
	}{
		{"OPTIONS", http.MethodOptions, searchPlace},
		{"no domain", http.MethodGet, place},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest(tt.method, "http://127.0.0.1:9200/st-objects/_search", nil)
			if _, err := Map(FromHTTP(OpenSearch, r, nil), tt.p); !errors.Is(err, ErrUnmapped) {
				t.Errorf("err = %v, want ErrUnmapped", err)
			}
		})
	}
}

// osCapture records the requests the search adapter sends and answers
// each 404, so every operation stops after the requests it must send.
type osCapture struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (c *osCapture) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	body := `{"error":{"type":"index_not_found_exception","reason":"no such index"},"status":404}`
	return &http.Response{
		StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r,
	}, nil
}

// TestMapSearchAdapter: what shared/search/searchos really sends, signed
// as the functions and the CLI sign it, maps to the grants the template
// gives the indexer, the objects API and the operator.
func TestMapSearchAdapter(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		run  func(*searchos.Engine) error
		want []Call
	}{
		{"create an index", func(e *searchos.Engine) error { return e.CreateIndex(ctx, "st-objects-1") },
			one("es:ESHttpPut", domainARN+"/st-objects-1")},
		{"delete an index", func(e *searchos.Engine) error { return e.DeleteIndex(ctx, "st-objects-1") },
			one("es:ESHttpDelete", domainARN+"/st-objects-1")},
		{"the aliases' indexes", func(e *searchos.Engine) error { _, _, err := e.Indexes(ctx); return err },
			[]Call{{Action: "es:ESHttpGet", Resource: domainARN + "/_alias/st-objects"}, {Action: "es:ESHttpGet", Resource: domainARN + "/_alias/st-objects-write"}}},
		{"switch the aliases", func(e *searchos.Engine) error { return e.Switch(ctx, []string{"st-objects-1"}, "st-objects-2") },
			one("es:ESHttpPost", domainARN+"/_aliases")},
		{"bulk into an index", func(e *searchos.Engine) error {
			_, err := e.Bulk(ctx, "st-objects-2", []search.Op{{ID: "k", Version: 1, Delete: true}})
			return err
		}, []Call{{Action: "es:ESHttpGet", Resource: domainARN + "/_alias/st-objects-2"}, {Action: "es:ESHttpPost", Resource: domainARN + "/_bulk"}}},
		{"search", func(e *searchos.Engine) error {
			_, err := e.Find(ctx, search.Plan{Terms: []string{"word"}, Limit: 10})
			return err
		},
			one("es:ESHttpPost", domainARN+"/st-objects/_search")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &osCapture{}
			cfg := aws.Config{Region: place.Region, Credentials: credentials.NewStaticCredentialsProvider("AKIDAsSearchIndexerFunction", "secret", "")}
			e, err := searchos.New(searchos.Config{Endpoint: "http://127.0.0.1:9200", Alias: "st-objects", AWS: &cfg, Transport: c})
			if err != nil {
				t.Fatal(err)
			}
			_ = tt.run(e) // every answer is a 404: only the requests count
			var got []Call
			for _, r := range c.reqs {
				if key := SigningKey(r); key != "AKIDAsSearchIndexerFunction" {
					t.Errorf("%s %s signed by %q, want the caller's key", r.Method, r.URL.Path, key)
				}
				calls, err := Map(FromHTTP(OpenSearch, r, nil), searchPlace)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, calls...)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
