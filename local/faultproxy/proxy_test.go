package faultproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// received is what an upstream saw of a request.
type received struct {
	Host       string
	RequestURI string
	Header     http.Header
	Body       []byte
}

// recordingUpstream records each request and answers 200 with a header
// and body of its own.
type recordingUpstream struct {
	mu   sync.Mutex
	reqs []received
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, received{Host: r.Host, RequestURI: r.RequestURI, Header: r.Header.Clone(), Body: body})
	u.mu.Unlock()
	w.Header().Set("X-Upstream", "yes")
	w.Header().Set("ETag", `"etag-1"`)
	_, _ = io.WriteString(w, "upstream body")
}

func (u *recordingUpstream) Requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.reqs...)
}

func TestForwardsRequestsUnchanged(t *testing.T) {
	tests := []struct {
		name    string
		service Service
		method  string
		uri     string // path and raw query as the client sends them
		header  map[string]string
		body    string
	}{
		{
			name: "s3 escaped key and bare subresource", service: S3, method: http.MethodPost,
			uri:    "/docs/a%21b%20c/%E2%82%AC.json?uploads",
			header: map[string]string{"X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD"},
		},
		{
			name: "s3 query the stdlib cannot parse", service: S3, method: http.MethodGet,
			uri: "/docs?list-type=2&prefix=a%2Fb&odd=1;2",
		},
		{
			name: "s3 put with body", service: S3, method: http.MethodPut,
			uri:  "/docs/key",
			body: strings.Repeat("x", 70000),
		},
		{
			name: "dynamodb json", service: DynamoDB, method: http.MethodPost, uri: "/",
			header: map[string]string{"X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0"},
			body:   `{"TableName":"votes","Key":{"pk":{"S":"a"}}}`,
		},
		{
			name: "sqs query form", service: SQS, method: http.MethodPost, uri: "/000000000000/votes",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			body:   "Action=SendMessage&MessageBody=hi&Version=2012-11-05",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &recordingUpstream{}
			upstream := MustUpstream(t, up)
			_, endpoint := MustStart(t, tt.service, upstream.URL)

			req, err := http.NewRequestWithContext(t.Context(), tt.method, endpoint+tt.uri, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260301/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc")
			req.Header.Set("X-Amz-Date", "20260301T120000Z")
			req.Header.Set("User-Agent", "aws-sdk-go-v2/test")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("request through proxy: %v", err)
			}
			respBody, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(respBody) != "upstream body" || resp.Header.Get("X-Upstream") != "yes" {
				t.Errorf("response = %d %q (X-Upstream %q), want the upstream's 200", resp.StatusCode, respBody, resp.Header.Get("X-Upstream"))
			}

			reqs := up.Requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			wantHost := strings.TrimPrefix(endpoint, "http://")
			if got.Host != wantHost {
				t.Errorf("Host = %q, want the proxy's %q as the client signed it", got.Host, wantHost)
			}
			if got.RequestURI != tt.uri {
				t.Errorf("RequestURI = %q, want %q", got.RequestURI, tt.uri)
			}
			for _, k := range []string{"Authorization", "X-Amz-Date", "User-Agent"} {
				if got.Header.Get(k) != req.Header.Get(k) {
					t.Errorf("%s = %q, want %q", k, got.Header.Get(k), req.Header.Get(k))
				}
			}
			for k, v := range tt.header {
				if got.Header.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, got.Header.Get(k), v)
				}
			}
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "Forwarded"} {
				if v := got.Header.Get(k); v != "" {
					t.Errorf("%s = %q added, want none", k, v)
				}
			}
			if string(got.Body) != tt.body {
				t.Errorf("body = %d bytes, want %d", len(got.Body), len(tt.body))
			}
		})
	}
}

// patternReader yields n bytes of a repeating pattern, the same bytes
// however it is read.
func patternReader(n int64) io.Reader {
	return io.LimitReader(&repeatReader{}, n)
}

type repeatReader struct{ off int }

func (r *repeatReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(r.off % 251)
		r.off++
	}
	return len(b), nil
}

func TestStreamsLargeBodies(t *testing.T) {
	size := int64(128 << 20)
	if testing.Short() {
		size = 8 << 20
	}
	const first = 1 << 20
	// The handshakes below deadlock if the proxy holds a body back until it
	// has all of it; the timeout only turns such a hang into a failure.
	const hang = 2 * time.Minute

	upstreamGotFirst := make(chan struct{})
	clientGotFirst := make(chan struct{})
	var upstreamSum []byte
	var upstreamN int64
	upstream := MustUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			h := sha256.New()
			n, err := io.CopyN(h, r.Body, first)
			if err != nil {
				t.Errorf("upstream read first MiB: %v", err)
				return
			}
			close(upstreamGotFirst)
			m, err := io.Copy(h, r.Body)
			if err != nil {
				t.Errorf("upstream read rest: %v", err)
			}
			upstreamN, upstreamSum = n+m, h.Sum(nil)
		case http.MethodGet:
			w.Header().Set("Content-Length", fmt.Sprint(size))
			src := patternReader(size)
			if _, err := io.CopyN(w, src, first); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			select {
			case <-clientGotFirst:
			case <-time.After(hang):
				t.Error("client got no bytes before the upstream finished sending: the proxy buffers responses")
				return
			}
			_, _ = io.Copy(w, src)
		}
	}))
	p, endpoint := MustStart(t, S3, upstream.URL)

	t.Run("upload", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			src := patternReader(size)
			if _, err := io.CopyN(pw, src, first); err != nil {
				pw.CloseWithError(err)
				return
			}
			select {
			case <-upstreamGotFirst:
			case <-time.After(hang):
				pw.CloseWithError(errors.New("upstream got no bytes before the client finished sending: the proxy buffers requests"))
				return
			}
			_, err := io.Copy(pw, src)
			pw.CloseWithError(err)
		}()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, endpoint+"/docs/big.bin", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = size
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("PUT through proxy: %v", err)
		}
		resp.Body.Close()
		want := sha256.New()
		_, _ = io.Copy(want, patternReader(size))
		if upstreamN != size || !bytes.Equal(upstreamSum, want.Sum(nil)) {
			t.Errorf("upstream got %d bytes (sha256 %x), want %d (%x)", upstreamN, upstreamSum, size, want.Sum(nil))
		}
	})

	t.Run("download", func(t *testing.T) {
		resp, err := http.Get(endpoint + "/docs/big.bin")
		if err != nil {
			t.Fatalf("GET through proxy: %v", err)
		}
		defer resp.Body.Close()
		h := sha256.New()
		n, err := io.CopyN(h, resp.Body, first)
		if err != nil {
			t.Fatalf("read first MiB: %v", err)
		}
		close(clientGotFirst)
		m, err := io.Copy(h, resp.Body)
		if err != nil {
			t.Fatalf("read rest: %v", err)
		}
		want := sha256.New()
		_, _ = io.Copy(want, patternReader(size))
		if n+m != size || !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
			t.Errorf("client got %d bytes, want %d with the same sha256", n+m, size)
		}
	})

	if got := p.Stats().Forwarded; got != 2 {
		t.Errorf("Forwarded = %d, want 2", got)
	}
}

func TestKeepsConnectionsAlive(t *testing.T) {
	var upstreamConns atomic.Int64
	upstream := httptest.NewUnstartedServer(&recordingUpstream{})
	upstream.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			upstreamConns.Add(1)
		}
	}
	upstream.Start()
	t.Cleanup(upstream.Close)
	p, endpoint := MustStart(t, DynamoDB, upstream.URL)
	p.SetFaults(Faults{FailNext: 3}) // error answers must keep the connection too

	var dials atomic.Int64
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	for i := range 20 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint+"/", strings.NewReader(`{"TableName":"votes"}`))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := dials.Load(); got != 1 {
		t.Errorf("client dialled the proxy %d times, want 1", got)
	}
	if got := upstreamConns.Load(); got != 1 {
		t.Errorf("proxy opened %d upstream connections, want 1", got)
	}
}

func TestDropClosesTheConnection(t *testing.T) {
	up := &recordingUpstream{}
	upstream := MustUpstream(t, up)
	p, endpoint := MustStart(t, S3, upstream.URL)
	p.SetFaults(Faults{DropRate: 1})

	resp, err := http.Post(endpoint+"/docs/k?uploads", "text/plain", nil)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got response %d, want the connection closed without one", resp.StatusCode)
	}
	if got := p.Stats().Dropped; got != 1 {
		t.Errorf("Dropped = %d, want 1", got)
	}
	if got := len(up.Requests()); got != 0 {
		t.Errorf("upstream saw %d requests, want 0", got)
	}
}

// dynamoRequest posts a DynamoDB request through the proxy and returns its
// status, or -1 when the connection was dropped.
func dynamoRequest(tb testing.TB, client *http.Client, endpoint, action, body string) int {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint+"/", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDFAULTPROXY/20260301/eu-west-1/dynamodb/aws4_request, SignedHeaders=host, Signature=abc")
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestMatchLimitsFaults(t *testing.T) {
	upstream := MustUpstream(t, newFakeDynamo(nil))
	p, endpoint := MustStart(t, DynamoDB, upstream.URL)
	p.SetFaults(Faults{
		ThrottleRate: 1,
		Match: func(op Operation) bool {
			return op.Action == "PutItem" && op.Table == "hot"
		},
	})
	tests := []struct {
		action, body string
		want         int
	}{
		{"PutItem", `{"TableName":"hot","Item":{"pk":{"S":"a"}}}`, http.StatusBadRequest},
		{"PutItem", `{"TableName":"cold","Item":{"pk":{"S":"a"}}}`, http.StatusOK},
		{"GetItem", `{"TableName":"hot","Key":{"pk":{"S":"a"}}}`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.action+" "+tt.body, func(t *testing.T) {
			if got := dynamoRequest(t, http.DefaultClient, endpoint, tt.action, tt.body); got != tt.want {
				t.Errorf("status = %d, want %d", got, tt.want)
			}
		})
	}
	s := p.Stats()
	if got := s.ByAction["PutItem"]; got.Requests != 2 || got.Throttled != 1 || got.Forwarded != 1 {
		t.Errorf("ByAction[PutItem] = %+v, want 2 requests, 1 throttled, 1 forwarded", got)
	}
	if got := s.ByAction["GetItem"]; got.Requests != 1 || got.Forwarded != 1 {
		t.Errorf("ByAction[GetItem] = %+v, want 1 request forwarded", got)
	}
}

func TestLatency(t *testing.T) {
	upstream := MustUpstream(t, newFakeDynamo(nil))
	clock := newFakeClock()
	p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithClock(clock), WithSeed(7))
	p.SetFaults(Faults{
		Latency:       200 * time.Millisecond,
		LatencyJitter: 100 * time.Millisecond,
		Match:         func(op Operation) bool { return op.Action == "PutItem" },
	})
	for range 10 {
		dynamoRequest(t, http.DefaultClient, endpoint, "PutItem", `{"TableName":"votes"}`)
		dynamoRequest(t, http.DefaultClient, endpoint, "GetItem", `{"TableName":"votes"}`)
	}
	slept := clock.Slept()
	if len(slept) != 10 {
		t.Fatalf("slept %d times, want 10 (PutItem only)", len(slept))
	}
	distinct := map[time.Duration]bool{}
	for _, d := range slept {
		if d < 200*time.Millisecond || d >= 300*time.Millisecond {
			t.Errorf("latency %v, want in [200ms, 300ms)", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 2 {
		t.Errorf("latencies %v carry no jitter", slept)
	}
}

// outcomes sends n requests and returns each one's status (-1: dropped).
func outcomes(tb testing.TB, endpoint string, n int) []int {
	tb.Helper()
	got := make([]int, n)
	for i := range got {
		got[i] = dynamoRequest(tb, http.DefaultClient, endpoint, "GetItem", `{"TableName":"votes"}`)
	}
	return got
}

func TestFaultRatesAreSeededShares(t *testing.T) {
	upstream := MustUpstream(t, newFakeDynamo(nil))
	faults := Faults{ThrottleRate: 0.2, ServerErrorRate: 0.1, ServerErrorStatus: 500, DropRate: 0.1}
	const n = 400

	var runs [2][]int
	var stats [2]Stats
	for i := range runs {
		p, endpoint := MustStart(t, DynamoDB, upstream.URL, WithSeed(42))
		p.SetFaults(faults)
		runs[i] = outcomes(t, endpoint, n)
		stats[i] = p.Stats()
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Error("two proxies with the same seed injected different faults")
	}

	s := stats[0]
	if sum := s.Forwarded + s.Throttled + s.ServerErrors + s.Dropped; sum != n || s.Requests != n {
		t.Errorf("Stats = %+v: outcomes add up to %d, want %d", s.Counts, sum, n)
	}
	count := map[int]int64{}
	for _, status := range runs[0] {
		count[status]++
	}
	checks := []struct {
		name       string
		status     int
		got, share float64
	}{
		{"throttled", http.StatusBadRequest, float64(s.Throttled), faults.ThrottleRate},
		{"server errors", http.StatusInternalServerError, float64(s.ServerErrors), faults.ServerErrorRate},
		{"dropped", -1, float64(s.Dropped), faults.DropRate},
	}
	for _, c := range checks {
		if int64(c.got) != count[c.status] {
			t.Errorf("%s: Stats says %v, clients saw %d", c.name, c.got, count[c.status])
		}
		// The seed fixes the draw; the band only documents that the
		// shares are what was asked.
		if want := c.share * n; c.got < want/2 || c.got > want*3/2 {
			t.Errorf("%s = %v of %d, want about %v", c.name, c.got, n, want)
		}
	}
}

func TestSetFaultsConcurrently(t *testing.T) {
	upstream := MustUpstream(t, newFakeDynamo(nil))
	p, endpoint := MustStart(t, DynamoDB, upstream.URL)
	const workers, each = 4, 50

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				dynamoRequest(t, http.DefaultClient, endpoint, "GetItem", `{"TableName":"votes"}`)
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			p.SetFaults(Faults{ThrottleRate: float64(i%3) / 4, ServerErrorRate: 0.1, FailNext: i % 2})
			_ = p.Stats()
		}
	})
	wg.Wait()

	s := p.Stats()
	if s.Requests != workers*each {
		t.Errorf("Requests = %d, want %d", s.Requests, workers*each)
	}
	if sum := s.Forwarded + s.Throttled + s.ServerErrors + s.Dropped; sum != s.Requests {
		t.Errorf("Stats = %+v: outcomes add up to %d, want %d", s.Counts, sum, s.Requests)
	}
}

func TestUpstreamDown(t *testing.T) {
	upstream := MustUpstream(t, http.NotFoundHandler())
	upstream.Close()
	p, endpoint := MustStart(t, S3, upstream.URL, WithLogger(discardLogger()))
	seen := observe(p)

	resp, err := http.Get(endpoint + "/docs/k")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d, want 502", resp.StatusCode)
	}
	if ex := seen.Next(t); ex.Err == nil || ex.StatusCode != http.StatusBadGateway {
		t.Errorf("observed %+v, want status 502 and an error", ex)
	}
	if got := p.Stats().ByAction["GetObject"].UpstreamErrors; got != 1 {
		t.Errorf("UpstreamErrors[GetObject] = %d, want 1", got)
	}
}

// observed collects the exchanges a proxy reports. Observers run after the
// client has its response, so tests wait for them.
type observed chan Exchange

func observe(p *Proxy) observed {
	ch := make(observed, 16)
	p.Observe(func(ex Exchange) { ch <- ex })
	return ch
}

// Next waits for the next exchange; the timeout only turns a missing report
// into a failure instead of a hang.
func (o observed) Next(tb testing.TB) Exchange {
	tb.Helper()
	select {
	case ex := <-o:
		return ex
	case <-time.After(time.Minute):
		tb.Fatal("no exchange observed")
		return Exchange{}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestNewRejectsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		service  Service
		upstream string
		opts     []Option
		want     error
	}{
		{"unknown service", "kinesis", "http://127.0.0.1:1", nil, ErrUnknownService},
		{"no scheme", S3, "127.0.0.1:9000", nil, ErrBadUpstream},
		{"path", S3, "http://127.0.0.1:9000/base", nil, ErrBadUpstream},
		{"bad throttle code", DynamoDB, "http://127.0.0.1:8000", []Option{WithDynamoDBThrottleCode("SlowDown")}, ErrBadOption},
		{"nil clock", DynamoDB, "http://127.0.0.1:8000", []Option{WithClock(nil)}, ErrBadOption},
		{"key limit off DynamoDB", S3, "http://127.0.0.1:9000", []Option{WithKeyWriteLimit(0)}, ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.service, tt.upstream, tt.opts...); !errors.Is(err, tt.want) {
				t.Errorf("New = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestStartTwice(t *testing.T) {
	p, _ := MustStart(t, S3, "http://127.0.0.1:1")
	if _, err := p.Start(); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
}

func TestObserveReportsS3Uploads(t *testing.T) {
	tests := []struct {
		name        string
		method, uri string
		header      map[string]string
		body        string
		status      int
		respHeader  map[string]string
		respBody    string
		wantAction  string
		wantCreated bool
		wantCode    string
		wantSize    int64
	}{
		{
			name: "PutObject", method: http.MethodPut, uri: "/docs/a.json", body: "hello",
			status: 200, respHeader: map[string]string{"ETag": `"e1"`, "X-Amz-Version-Id": "v7"},
			wantAction: "PutObject", wantCreated: true, wantSize: 5,
		},
		{
			name: "aws-chunked PutObject", method: http.MethodPut, uri: "/docs/a.json",
			header: map[string]string{"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": "3"},
			body:   "3\r\nabc\r\n0\r\n\r\n", status: 200, respHeader: map[string]string{"ETag": `"e1"`, "X-Amz-Version-Id": "v7"},
			wantAction: "PutObject", wantCreated: true, wantSize: 3,
		},
		{
			name: "CompleteMultipartUpload", method: http.MethodPost, uri: "/docs/big?uploadId=u1", body: "<CompleteMultipartUpload/>",
			status: 200, respHeader: map[string]string{"X-Amz-Version-Id": "v7"},
			respBody:   "  \n<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult><ETag>\"e1-2\"</ETag></CompleteMultipartUploadResult>",
			wantAction: "CompleteMultipartUpload", wantCreated: true, wantSize: -1,
		},
		{
			name: "CompleteMultipartUpload error in a 200", method: http.MethodPost, uri: "/docs/big?uploadId=u1", body: "<CompleteMultipartUpload/>",
			status: 200, respBody: "   \n<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>",
			wantAction: "CompleteMultipartUpload", wantCode: "InternalError", wantSize: -1,
		},
		{
			name: "CopyObject", method: http.MethodPut, uri: "/docs/copy", header: map[string]string{"X-Amz-Copy-Source": "/docs/a.json"},
			status: 200, respHeader: map[string]string{"X-Amz-Version-Id": "v8"}, respBody: "<CopyObjectResult><ETag>\"e1\"</ETag></CopyObjectResult>",
			wantAction: "CopyObject", wantCreated: true, wantSize: -1,
		},
		{
			name: "PutObject refused", method: http.MethodPut, uri: "/docs/a.json", body: "hello",
			status: 403, respBody: "<Error><Code>AccessDenied</Code></Error>",
			wantAction: "PutObject", wantSize: 5,
		},
		{
			name: "GetObject", method: http.MethodGet, uri: "/docs/a.json",
			status: 200, respBody: "hello", wantAction: "GetObject", wantSize: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upstream := MustUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				for k, v := range tt.respHeader {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.respBody)
			}))
			p, endpoint := MustStart(t, S3, upstream.URL)
			seen := observe(p)

			req, _ := http.NewRequestWithContext(t.Context(), tt.method, endpoint+tt.uri, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != tt.respBody {
				t.Errorf("client got body %q, want %q", got, tt.respBody)
			}

			ex := seen.Next(t)
			if ex.Operation.Action != tt.wantAction || ex.Operation.Bucket != "docs" {
				t.Errorf("Operation = %+v, want %s on bucket docs", ex.Operation, tt.wantAction)
			}
			if ex.ObjectCreated() != tt.wantCreated {
				t.Errorf("ObjectCreated() = %v, want %v", ex.ObjectCreated(), tt.wantCreated)
			}
			if ex.ErrorCode != tt.wantCode {
				t.Errorf("ErrorCode = %q, want %q", ex.ErrorCode, tt.wantCode)
			}
			if ex.StatusCode != tt.status {
				t.Errorf("StatusCode = %d, want %d", ex.StatusCode, tt.status)
			}
			if ex.ETag != tt.respHeader["ETag"] || ex.VersionID != tt.respHeader["X-Amz-Version-Id"] {
				t.Errorf("ETag, VersionID = %q, %q, want %q, %q", ex.ETag, ex.VersionID, tt.respHeader["ETag"], tt.respHeader["X-Amz-Version-Id"])
			}
			if ex.ObjectSize != tt.wantSize {
				t.Errorf("ObjectSize = %d, want %d", ex.ObjectSize, tt.wantSize)
			}
			if ex.RequestContentLength != int64(len(tt.body)) {
				t.Errorf("RequestContentLength = %d, want %d", ex.RequestContentLength, len(tt.body))
			}
			if ex.ResponseBytes != int64(len(tt.respBody)) || ex.Err != nil {
				t.Errorf("ResponseBytes, Err = %d, %v, want %d, nil", ex.ResponseBytes, ex.Err, len(tt.respBody))
			}
			if q, _ := url.ParseQuery(ex.RawQuery); strings.Contains(tt.uri, "uploadId") && q.Get("uploadId") != "u1" {
				t.Errorf("RawQuery = %q, want the upload id", ex.RawQuery)
			}
		})
	}
}

func TestObserveSkipsInjectedFaults(t *testing.T) {
	upstream := MustUpstream(t, newFakeS3())
	p, endpoint := MustStart(t, S3, upstream.URL)
	seen := observe(p)
	p.SetFaults(Faults{FailNext: 1})

	for range 2 {
		req, _ := http.NewRequest(http.MethodPut, endpoint+"/docs/k", strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The throttled request came first on the same connection, so any
	// report of it would be in before the forwarded one's.
	if ex := seen.Next(t); ex.StatusCode != http.StatusOK {
		t.Errorf("first exchange observed has status %d, want the forwarded request's 200", ex.StatusCode)
	}
	if n := len(seen); n != 0 {
		t.Errorf("%d more exchanges observed, want none", n)
	}
}
