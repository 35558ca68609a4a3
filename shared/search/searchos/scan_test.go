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

// A scan's page that the engine answers 503 is read again: the verify
// it serves sees every document; an engine that keeps answering 503
// fails the scan with ErrUnavailable, after its attempts.
func TestScanRetriesAPageTheEngineDidNotServe(t *testing.T) {
	saved := scanRetry
	scanRetry = retry.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}
	t.Cleanup(func() { scanRetry = saved })
	for _, tc := range []struct {
		name     string
		failures int64 // answers of 503 before the engine serves
		wantErr  bool
	}{
		{"two 503s, then served", 2, false},
		{"503 for good", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failed atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if failed.Add(1) <= tc.failures {
					http.Error(w, `{"error":"unexpected EOF"}`, http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if strings.Contains(string(body), `"id":"00"`) { // the first bucket holds the one document
					_, _ = io.WriteString(w, `{"hits":{"total":{"value":1},"hits":[{"_id":"00ab","_source":{"key":"k","version":3}}]}}`)
					return
				}
				_, _ = io.WriteString(w, `{"hits":{"total":{"value":0},"hits":[]}}`)
			}))
			defer srv.Close()
			e, err := New(Config{Endpoint: srv.URL, Alias: "objects"})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var got []search.Entry
			err = e.ScanIndex(context.Background(), func(es []search.Entry) error {
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
	saved := scanRetry
	scanRetry = retry.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}
	t.Cleanup(func() { scanRetry = saved })
	for _, tc := range []struct {
		name     string
		failures int64
		wantErr  bool
	}{
		{"two 503s, then refreshed", 2, false},
		{"503 for good", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/_refresh") {
					http.Error(w, `{"error":"unexpected request"}`, http.StatusBadRequest)
					return
				}
				if asked.Add(1) <= tc.failures {
					http.Error(w, `{"error":{"type":"unavailable_shards_exception","reason":"refresh: 1 of the latest writes not searchable"}}`, http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"_shards":{"total":1,"successful":1,"failed":0}}`)
			}))
			defer srv.Close()
			e, err := New(Config{Endpoint: srv.URL, Alias: "objects"})
			if err != nil {
				t.Fatal(err)
			}
			err = e.Refresh(context.Background(), "objects-new")
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
