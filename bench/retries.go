package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

// dropProxy stands between a client and the HTTP API. It forwards every
// request as it came (the Host header too, so the client's signature
// holds), reads the API's whole answer, and then, while armed, closes the
// client's connection without a byte of it: the write happened, the
// client never hears of it, as when a connection drops after the commit.
type dropProxy struct {
	upstream string // the API's base URL
	armed    atomic.Bool
	dropped  atomic.Int64
	client   *http.Client
}

func (p *dropProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if p.armed.Load() {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			p.dropped.Add(1)
			conn.Close()
			return
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// benchRetries: PUTs whose answer is dropped after the API committed them,
// each retried as a client would: the retry must answer the version the
// first attempt made (200, unchanged), never a second version or a 409.
func benchRetries(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	b, err := startRetryBench(env, scale)
	if err != nil {
		return nil, err
	}
	defer b.close()
	for i := range b.tries {
		if err := b.try(ctx, i); err != nil {
			return nil, err
		}
	}
	if err := b.checkStored(ctx); err != nil {
		return nil, err
	}
	return b.report(), nil
}

// retryKeys is how many keys the tries of benchRetries go over.
const retryKeys = 25

// retryBench is one run of benchRetries: the proxy and the client that
// goes through it, then what the tries found.
type retryBench struct {
	env      *stack.Env
	proxy    *dropProxy
	srv      *http.Server
	proxyURL string
	hc       *http.Client // signs its requests
	tries    int
	run      string // this run's part of the keys

	latest                           map[string]int64 // each key's version, as the answers say
	conflicts, extra, notLost, wrong int
	retryLat                         []float64 // ms
	stored                           int64     // the keys' latest versions, added up
}

// startRetryBench starts the dropping proxy before the API.
func startRetryBench(env *stack.Env, scale float64) (*retryBench, error) {
	proxy := &dropProxy{upstream: env.APIURL, client: &http.Client{Timeout: time.Minute}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	proxyURL := "http://" + ln.Addr().String()
	hc, err := sigv4.Client(env.AWS, proxyURL, &http.Client{Timeout: time.Minute})
	if err != nil {
		srv.Close()
		return nil, err
	}
	tries := max(100, int(1000*scale))
	return &retryBench{
		env: env, proxy: proxy, srv: srv, proxyURL: proxyURL, hc: hc,
		tries:    tries,
		run:      strconv.FormatInt(time.Now().UnixNano(), 36),
		latest:   map[string]int64{},
		retryLat: make([]float64, 0, tries),
	}, nil
}

func (b *retryBench) close() { b.srv.Close() }

func (b *retryBench) key(i int) string {
	return fmt.Sprintf("bench/retries/%s/k%02d.txt", b.run, i%retryKeys)
}

// try is try i. Each try writes new bytes: a create (If-None-Match: *), an
// update on the version it read (If-Match), or a plain PUT, in turn, over
// a few keys. Its answer is dropped; the retry, with the same request,
// must say the version the dropped attempt made.
func (b *retryBench) try(ctx context.Context, i int) error {
	key := b.key(i)
	body := []byte(fmt.Sprintf("try %d of %s", i, b.run))
	header := map[string]string{}
	switch {
	case b.latest[key] == 0:
		header["If-None-Match"] = "*"
	case i%3 == 1:
		header["If-Match"] = strconv.Quote(strconv.FormatInt(b.latest[key], 10))
	}
	want := b.latest[key] + 1
	b.proxy.armed.Store(true)
	_, _, _, lost, err := b.put(ctx, key, body, header)
	b.proxy.armed.Store(false)
	if err != nil {
		return err
	}
	if !lost {
		b.notLost++
	}
	start := time.Now()
	status, version, unchanged, lost, err := b.put(ctx, key, body, header)
	b.retryLat = append(b.retryLat, float64(time.Since(start).Microseconds())/1000)
	switch {
	case err != nil:
		return err
	case lost:
		return errors.New("a retry's answer was lost with the proxy disarmed")
	case status == http.StatusConflict:
		b.conflicts++
	case status != http.StatusOK || !unchanged:
		b.wrong++
	case version > want:
		b.extra += int(version - want)
	case version < want:
		b.wrong++
	}
	if version > 0 {
		b.latest[key] = version
	}
	return nil
}

// put sends one PUT through the proxy: its status, the version its
// answer names and whether it says unchanged; lost is a dropped answer.
func (b *retryBench) put(ctx context.Context, key string, body []byte, header map[string]string) (status int, version int64, unchanged, lost bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, b.proxyURL+"/objects/"+key, bytes.NewReader(body))
	if err != nil {
		return 0, 0, false, false, err
	}
	req.Header.Set("Content-Type", "text/plain")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, 0, false, false, ctx.Err()
		}
		return 0, 0, false, true, nil
	}
	defer resp.Body.Close()
	var m objectsapi.Meta
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return resp.StatusCode, 0, false, false, fmt.Errorf("PUT %s: %d answer is not the object's meta: %s", key, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, m.Version, resp.Header.Get(objectsapi.HeaderUnchanged) == "true", false, nil
}

// checkStored reads what the table says: each key's latest version is its
// number of tries (the history itself is pruned to ObjectsMaxVersions).
func (b *retryBench) checkStored(ctx context.Context) error {
	perKey := map[string]int64{}
	for i := range b.tries {
		perKey[b.key(i)]++
	}
	for k, n := range perKey {
		v, err := latestVersion(ctx, b.env, k)
		if err != nil {
			return err
		}
		b.stored += v
		if v > n {
			b.extra += int(v - n)
		}
	}
	return nil
}

func (b *retryBench) report() *section {
	s := &section{title: "Objects: retried writes after a dropped answer"}
	tries := b.tries
	s.printf("%d PUTs (creates, If-Match updates and plain PUTs over %d keys) through a proxy that forwards each to the API,\n"+
		"reads its whole answer and then drops the connection (%d answers dropped, %d got through); each retried once with\n"+
		"the same request.\n\n", tries, retryKeys, b.proxy.dropped.Load(), b.notLost)
	s.printf("| retries | 200, unchanged, the first attempt's version | 409 | other answers | extra versions stored | retry p50 | retry p99 |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	s.printf("| %d | %d | %d | %d | %d | %.1f ms | %.1f ms |\n\n", tries, tries-b.conflicts-b.wrong, b.conflicts, b.wrong, b.extra,
		percentile(b.retryLat, 50), percentile(b.retryLat, 99))
	s.printf("Goal: 0 extra versions and 0 409s over the retries: %s. The keys' latest versions add up to %d for %d tries.\n",
		verdict(b.extra == 0 && b.conflicts == 0 && b.wrong == 0 && b.notLost == 0 && b.stored == int64(tries)), b.stored, tries)
	return s
}

// latestVersion is a key's latest version, as a HEAD of it answers.
func latestVersion(ctx context.Context, env *stack.Env, key string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, env.APIURL+"/objects/"+key, nil)
	if err != nil {
		return 0, err
	}
	resp, err := env.APIClient().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HEAD %s: %d", key, resp.StatusCode)
	}
	return strconv.ParseInt(resp.Header.Get("X-Object-Version"), 10, 64)
}
