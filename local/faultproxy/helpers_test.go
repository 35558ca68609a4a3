package faultproxy

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// fakeClock is a Clock that moves only when told to, or by the time a
// Sleep asks for.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

var _ Clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// MustStart builds a proxy for service in front of upstream, starts it and
// closes it when the test ends.
func MustStart(tb testing.TB, service Service, upstream string, opts ...Option) (*Proxy, string) {
	tb.Helper()
	p, err := New(service, upstream, append([]Option{WithSeed(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("New(%s, %s): %v", service, upstream, err)
	}
	u, err := p.Start()
	if err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return p, u
}

// MustUpstream starts an httptest server on 127.0.0.1 for h.
func MustUpstream(tb testing.TB, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}

// zeroBackoff keeps an SDK retryer's decisions (what to retry, how often)
// but drops its backoff sleeps, so retry tests take no wall-clock time.
type zeroBackoff struct{ aws.RetryerV2 }

func (zeroBackoff) RetryDelay(int, error) (time.Duration, error) { return 0, nil }

func withoutBackoff(r aws.Retryer) aws.Retryer {
	v2, ok := r.(aws.RetryerV2)
	if !ok {
		panic("faultproxy test: SDK retryer is not a RetryerV2")
	}
	return zeroBackoff{v2}
}

// fakeDynamo is a DynamoDB upstream: DescribeTable answers the key schema
// of keys (table -> partition key attribute), other operations succeed with
// an empty document.
type fakeDynamo struct {
	mu        sync.Mutex
	keys      map[string]string
	calls     map[string]int
	describes []http.Header
}

func newFakeDynamo(keys map[string]string) *fakeDynamo {
	return &fakeDynamo{keys: keys, calls: make(map[string]int)}
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action := targetAction(r.Header.Get("X-Amz-Target"))
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls[action]++
	if action == "DescribeTable" {
		f.describes = append(f.describes, r.Header.Clone())
	}
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if action != "DescribeTable" {
		_, _ = io.WriteString(w, "{}")
		return
	}
	var req struct{ TableName string }
	_ = json.Unmarshal(body, &req)
	f.mu.Lock()
	pk, ok := f.keys[req.TableName]
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"Table": map[string]any{
		"TableName":   req.TableName,
		"TableStatus": "ACTIVE",
		"KeySchema": []map[string]string{
			{"AttributeName": pk, "KeyType": "HASH"},
			{"AttributeName": "sk", "KeyType": "RANGE"},
		},
	}})
}

func (f *fakeDynamo) Calls(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[action]
}

func (f *fakeDynamo) Describes() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.describes...)
}

// fakeSQS is an SQS upstream (JSON protocol) answering SendMessage with the
// body's MD5, which the SDK verifies.
func fakeSQS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ MessageBody string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		sum := md5.Sum([]byte(req.MessageBody))
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"MessageId":        "5fea7756-0ea4-451a-a703-a558b933e274",
			"MD5OfMessageBody": hex.EncodeToString(sum[:]),
		})
	})
}

// fakeS3 is an S3 upstream storing objects in memory, answering PutObject
// with an ETag and a version id.
type fakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func newFakeS3() *fakeS3 { return &fakeS3{objects: make(map[string][]byte)} }

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
			body = decodeAWSChunked(body)
		}
		f.mu.Lock()
		f.objects[r.URL.Path] = body
		f.mu.Unlock()
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("X-Amz-Version-Id", "v1")
	case http.MethodGet:
		f.mu.Lock()
		body, ok := f.objects[r.URL.Path]
		f.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
			return
		}
		_, _ = w.Write(body)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// decodeAWSChunked strips aws-chunked framing ("<hex>;...\r\n<data>\r\n",
// ending with a zero chunk and trailers).
func decodeAWSChunked(b []byte) []byte {
	var out []byte
	for {
		line, rest, ok := strings.Cut(string(b), "\r\n")
		if !ok {
			return out
		}
		size, _, _ := strings.Cut(line, ";")
		var n int
		for _, c := range size {
			d := strings.IndexRune("0123456789abcdef", c|0x20)
			if d < 0 {
				return out
			}
			n = n*16 + d
		}
		if n == 0 || n > len(rest) {
			return out
		}
		out = append(out, rest[:n]...)
		b = []byte(strings.TrimPrefix(rest[n:], "\r\n"))
	}
}
