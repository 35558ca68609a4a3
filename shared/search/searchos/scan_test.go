package searchos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// retryCases are the engine's 503s that a retried request rides out, or
// gives up on after scanAttempts.
var retryCases = []struct {
	name     string
	failures int64 // answers of 503 before the engine serves
	wantErr  bool
}{
	{"two 503s, then served", 2, false},
	{"503 for good", 1 << 30, true},
}

// flakyEngine is an Engine on a server that answers 503 to its first
// failures requests and then as serve does (with the request's body
// read), retrying a few milliseconds apart; asked counts the requests.
func flakyEngine(t *testing.T, failures int64, serve func(w http.ResponseWriter, r *http.Request, body string)) (*Engine, *atomic.Int64) {
	t.Helper()
	saved := scanRetry
	scanRetry = retry.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}
	t.Cleanup(func() { scanRetry = saved })
	asked := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if asked.Add(1) <= failures {
			http.Error(w, `{"error":{"type":"unavailable_shards_exception","reason":"unexpected EOF"}}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		serve(w, r, string(body))
	}))
	t.Cleanup(srv.Close)
	e, err := New(Config{Endpoint: srv.URL, Alias: "objects"})
	if err != nil {
		t.Fatal(err)
	}
	return e, asked
}

// A scan's page that the engine answers 503 is read again: the verify
// it serves sees every document; an engine that keeps answering 503
// fails the scan with ErrUnavailable, after its attempts.
func TestScanRetriesAPageTheEngineDidNotServe(t *testing.T) {
	for _, tc := range retryCases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := flakyEngine(t, tc.failures, func(w http.ResponseWriter, _ *http.Request, body string) {
				if strings.Contains(body, `"id":"00"`) { // the first bucket holds the one document
					_, _ = io.WriteString(w, `{"hits":{"total":{"value":1},"hits":[{"_id":"00ab","_source":{"key":"k","version":3}}]}}`)
					return
				}
				_, _ = io.WriteString(w, `{"hits":{"total":{"value":0},"hits":[]}}`)
			})
			var mu sync.Mutex
			var got []search.Entry
			err := e.ScanIndex(context.Background(), func(es []search.Entry) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, es...)
				return nil
			})
			if tc.wantErr {
				if !errors.Is(err, search.ErrUnavailable) {
					t.Fatalf("scan of an engine that answers 503: %v, want ErrUnavailable", err)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0] != (search.Entry{Key: "k", Version: 3}) {
				t.Fatalf("scan: %v %v, want the one document", got, err)
			}
		})
	}
}

// A refresh the engine could not finish (503) is asked again, and a
// refresh that never finishes is an error, never a success: a reindex
// switches its aliases only after Refresh returns nil.
func TestRefreshAsksAgainUntilTheEngineFinishes(t *testing.T) {
	for _, tc := range retryCases {
		t.Run(tc.name, func(t *testing.T) {
			e, asked := flakyEngine(t, tc.failures, func(w http.ResponseWriter, r *http.Request, _ string) {
				if !strings.HasSuffix(r.URL.Path, "/_refresh") {
					http.Error(w, `{"error":"unexpected request"}`, http.StatusBadRequest)
					return
				}
				_, _ = io.WriteString(w, `{"_shards":{"total":1,"successful":1,"failed":0}}`)
			})
			err := e.Refresh(context.Background(), "objects-new")
			if tc.wantErr {
				if !errors.Is(err, search.ErrUnavailable) || asked.Load() != scanAttempts {
					t.Fatalf("Refresh = %v after %d requests, want ErrUnavailable after %d", err, asked.Load(), scanAttempts)
				}
				return
			}
			if err != nil || asked.Load() != tc.failures+1 {
				t.Fatalf("Refresh = %v after %d requests, want nil after %d", err, asked.Load(), tc.failures+1)
			}
		})
	}
}
