package awsenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// closedBody is a request body as the SDK's is once the SDK has closed it:
// it still reads, but a copy through WriteTo answers io.EOF as an error.
// Here that is so from the start, so the transport's check after the last
// byte fails every time, not only on a loaded machine.
type closedBody struct{ *bytes.Reader }

func (closedBody) WriteTo(io.Writer) (int64, error) { return 0, io.EOF }
func (closedBody) Close() error                     { return nil }

// The transport's check of a closed body must not cost the connection (a
// closed connection under a response being read is a retried call, and a
// retried SQS receive hides the messages it lost). Through exactBodies the
// connection stays open for the next call; the SDK's client alone loses it.
func TestExactBodiesKeepTheConnection(t *testing.T) {
	for _, tt := range []struct {
		name   string
		client aws.HTTPClient
		kept   bool
	}{
		{"the SDK's client", awshttp.NewBuildableClient(), false},
		{"exactBodies", exactBodies{base: awshttp.NewBuildableClient()}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Kept: both calls answered, the second on the first's connection.
			// Lost: a call fails ("connection broken") or opens another.
			var mu sync.Mutex
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				got = append(got, string(b))
				mu.Unlock()
				_, _ = io.WriteString(w, strings.Repeat("answer ", 1000))
			}))
			defer srv.Close()
			var reused []bool
			kept := true
			for _, body := range []string{`{"first":1}`, `{"second":2}`} {
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
				})
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, closedBody{bytes.NewReader([]byte(body + "trailing bytes past the length"))})
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = int64(len(body))
				resp, err := tt.client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil {
					kept = false
					t.Logf("%s: %v", body, err)
				}
			}
			kept = kept && len(reused) == 2 && reused[1]
			if kept != tt.kept {
				t.Errorf("connection kept: %v (reused %v), want %v", kept, reused, tt.kept)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.kept && (len(got) != 2 || got[0] != `{"first":1}` || got[1] != `{"second":2}`) {
				t.Errorf("server read %q, want each body cut at its length", got)
			}
		})
	}
}

// Load wraps the SDK's client once, whatever it is given.
func TestLoadCutsBodies(t *testing.T) {
	cfg, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.HTTPClient.(exactBodies); !ok {
		t.Fatalf("HTTP client %T, want exactBodies", cfg.HTTPClient)
	}
	withExactBodies(&cfg)
	if inner := cfg.HTTPClient.(exactBodies).base; inner == nil {
		t.Fatal("no base client")
	} else if _, twice := inner.(exactBodies); twice {
		t.Error("wrapped twice")
	}
}
