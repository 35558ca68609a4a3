package stack

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ddbpipe/ddbpipe/local/iam"
)

// gateSearch serves the search proxy behind the IAM gate on a port of its
// own and returns its URL, the stack's search endpoint: the other
// services' gates sit in their fault proxies, and the search proxy is an
// http.Handler that the gate wraps. Until the judge starts (provisioning)
// only the admin may call; then every request is judged as OpenSearch
// Service authorizes it (iam.OpenSearchGate). The proxy's own port stays
// open but no variable names it, as the servers' behind their proxies.
func (e *Env) gateSearch(proxy http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("stack: the search gate: %w", err)
	}
	e.gate.searchProxy = proxy
	srv := &http.Server{Handler: http.HandlerFunc(e.gate.serveSearch), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.servers = append(e.servers, srv)
	return "http://" + ln.Addr().String(), nil
}

// serveSearch judges a search request, then hands it to the proxy.
func (g *iamGate) serveSearch(w http.ResponseWriter, r *http.Request) {
	if g.judge.Load() != nil {
		g.search.ServeHTTP(w, r)
		return
	}
	if key := iam.SigningKey(r); key != g.admin {
		iam.WriteOpenSearchDenial(w, "the local stack is starting: only its admin credentials may call yet, not "+key)
		return
	}
	g.searchProxy.ServeHTTP(w, r)
}
