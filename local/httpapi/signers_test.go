package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Three SigV4 signers nobody here wrote sign the same generated requests,
// each as its users call it, and the local API must accept every one: the
// Go SDK v2's v4.Signer, botocore's SigV4Auth (testdata/sign_botocore.py)
// and the JS SDK v3's @smithy/signature-v4 (tools/sigv4node/sign.mjs).
// Whatever the function then answers is not the point: the route is a
// $default AWS_IAM catch-all, so a request that passes the check reaches
// the function and one that does not never does. The same requests with
// one byte of the signature changed must all be refused.
//
// Node missing skips the smithy signer; its package or botocore missing
// skips too, but fails under DDBPIPE_REQUIRE_STACK=1 (make test installs
// the package: the Makefile's tools/sigv4node step).
const signerRequests = 500

func TestSignersAreAccepted(t *testing.T) {
	reqs := generateRequests(rand.New(rand.NewPCG(27, 2)), signerRequests)
	for _, sg := range []struct {
		name string
		sign func(t *testing.T, host string, reqs []userRequest) []signedRequest
	}{
		{"aws-sdk-go-v2", signGo},
		{"botocore", func(t *testing.T, host string, reqs []userRequest) []signedRequest {
			return signBotocore(t, host, "params", reqs)
		}},
		{"smithy-signature-v4", signSmithy},
	} {
		t.Run(sg.name, func(t *testing.T) {
			srv, rec := signerServer(t)
			host := srv.Listener.Addr().String()
			signed := sg.sign(t, host, reqs)
			if len(signed) != len(reqs) {
				t.Fatalf("%d requests signed, want %d", len(signed), len(reqs))
			}
			var refused int
			for i, w := range signed {
				resp := send(t, host, w)
				if resp.status != http.StatusOK || resp.errorType != "" {
					refused++
					if refused <= 5 {
						t.Errorf("%s %s (written %q): %d %s %s", w.method, w.target, reqs[i].url, resp.status, resp.errorType, resp.body)
					}
				}
			}
			if calls := rec.count(); refused != 0 || calls != len(reqs) {
				t.Errorf("%d of %d requests refused, %d reached the function", refused, len(reqs), calls)
			}
			t.Logf("%d requests signed by %s: %d refused", len(reqs), sg.name, refused)

			// One byte of the signature changed: every request is refused.
			before := rec.count()
			for i := 0; i < len(signed); i += 20 {
				w := signed[i].withSignatureByteChanged(i)
				if resp := send(t, host, w); resp.status != http.StatusForbidden || resp.errorType != "InvalidSignatureException" {
					t.Errorf("%s %s with a changed signature: %d %s, want 403 InvalidSignatureException", w.method, w.target, resp.status, resp.errorType)
				}
			}
			if rec.count() != before {
				t.Errorf("a request with a changed signature reached the function")
			}
		})
	}
}

// botocore signs a query handed to it in the URL as it is written
// (SigV4Auth takes it to be in canonical form already). Written encoded and
// sorted, it passes; with "/" unencoded (issue 27's example) API Gateway
// canonicalizes it as "delimiter=%2F", and so does the local API, whose
// refusal says so.
func TestBotocoreQueryAsWritten(t *testing.T) {
	srv, rec := signerServer(t)
	host := srv.Listener.Addr().String()
	reqs := []userRequest{
		{method: "GET", url: "/objects?delimiter=%2F&prefix=a%2F"},
		{method: "GET", url: "/objects?prefix=a%2F&delimiter=/"},
	}
	signed := signBotocore(t, host, "url", reqs)
	if resp := send(t, host, signed[0]); resp.status != http.StatusOK {
		t.Errorf("%s: %d %s, want 200", reqs[0].url, resp.status, resp.body)
	}
	resp := send(t, host, signed[1])
	if resp.status != http.StatusForbidden || resp.errorType != "InvalidSignatureException" {
		t.Fatalf("%s: %d %s, want 403 InvalidSignatureException", reqs[1].url, resp.status, resp.errorType)
	}
	if want := `'GET\n/objects\ndelimiter=%2F&prefix=a%2F\n`; !strings.Contains(resp.body, want) {
		t.Errorf("refusal %s does not quote the canonical request's %s", resp.body, want)
	}
	if rec.count() != 1 {
		t.Errorf("%d requests reached the function, want 1", rec.count())
	}
}

// userRequest is a request as a user writes it: the URL's path and query
// encoded or not, as long as a browser or an HTTP library would send it.
type userRequest struct {
	method string
	url    string // path and query
	body   []byte
	header [][2]string
}

// signedRequest is a signed request as its client sends it.
type signedRequest struct {
	method string
	target string // the request target: path and query as sent
	header [][2]string
	body   []byte
}

// withSignatureByteChanged returns a copy of w whose Authorization header
// has one hex digit of the signature changed (which one depends on n).
func (w signedRequest) withSignatureByteChanged(n int) signedRequest {
	out := w
	out.header = nil
	for _, h := range w.header {
		if strings.EqualFold(h[0], "Authorization") {
			i := strings.LastIndex(h[1], "Signature=") + len("Signature=") + n%64
			b := []byte(h[1])
			if b[i] == '0' {
				b[i] = '1'
			} else {
				b[i] = '0'
			}
			h[1] = string(b)
		}
		out.header = append(out.header, h)
	}
	return out
}

type signerRecorder struct{ *recorder }

func (r signerRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// signerServer is the local API on 127.0.0.1 with one AWS_IAM route that
// catches every path, on the real clock (the signers sign with theirs).
func signerServer(t *testing.T) (*httptest.Server, signerRecorder) {
	t.Helper()
	rec := &recorder{}
	s, err := NewServer([]Route{{Method: "", Path: "$default", Function: "any", Authorizer: AuthIAM}}, rec.invoke, WithIAM(testIAM))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, signerRecorder{rec}
}

type sent struct {
	status    int
	errorType string
	body      string
}

// send writes w to host byte for byte (its target as the client would put
// it on the request line) and reads the answer.
func send(t *testing.T, host string, w signedRequest) sent {
	t.Helper()
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", w.method, w.target, host)
	for _, h := range w.header {
		switch strings.ToLower(h[0]) {
		case "host", "content-length":
		default:
			fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n", len(w.body))
	b.Write(w.body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: w.method})
	if err != nil {
		t.Fatalf("%s %s: %v", w.method, w.target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return sent{status: resp.StatusCode, errorType: resp.Header.Get("X-Amzn-Errortype"), body: string(body)}
}

// signGo signs with the Go SDK's signer, as a Go client does: the URL
// parsed by net/url, the request target as net/http writes it.
func signGo(t *testing.T, host string, reqs []userRequest) []signedRequest {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: testIAM.AccessKeyID, SecretAccessKey: testIAM.SecretAccessKey}
	var out []signedRequest
	for _, u := range reqs {
		r, err := http.NewRequest(u.method, "http://"+host+u.url, bytes.NewReader(u.body))
		if err != nil {
			t.Fatalf("%q: %v", u.url, err)
		}
		for _, h := range u.header {
			r.Header.Add(h[0], h[1])
		}
		sum := sha256.Sum256(u.body)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "execute-api", testIAM.Region, time.Now()); err != nil {
			t.Fatal(err)
		}
		w := signedRequest{method: u.method, target: r.URL.RequestURI(), body: u.body}
		for name, vs := range r.Header {
			for _, v := range vs {
				w.header = append(w.header, [2]string{name, v})
			}
		}
		out = append(out, w)
	}
	return out
}

func signBotocore(t *testing.T, host, mode string, reqs []userRequest) []signedRequest {
	t.Helper()
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	if _, err := exec.LookPath(python); err != nil {
		needOrSkip(t, fmt.Sprintf("no %s for botocore (PYTHON names another)", python))
	}
	if err := exec.Command(python, "-c", "import botocore").Run(); err != nil {
		needOrSkip(t, fmt.Sprintf("%s has no botocore (pip install botocore)", python))
	}
	return runSigner(t, reqs, python, filepath.Join("testdata", "sign_botocore.py"),
		host, testIAM.Region, testIAM.AccessKeyID, testIAM.SecretAccessKey, mode)
}

func signSmithy(t *testing.T, host string, reqs []userRequest) []signedRequest {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node for @smithy/signature-v4")
	}
	dir := filepath.Join("..", "..", "tools", "sigv4node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@smithy", "signature-v4", "package.json")); err != nil {
		needOrSkip(t, "@smithy/signature-v4 is not installed: make test installs it (npm ci in tools/sigv4node)")
	}
	return runSigner(t, reqs, node, filepath.Join(dir, "sign.mjs"),
		host, testIAM.Region, testIAM.AccessKeyID, testIAM.SecretAccessKey)
}

// needOrSkip skips, or fails under DDBPIPE_REQUIRE_STACK=1 (make test),
// as the other tests that need something installed do.
func needOrSkip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// runSigner runs a signer script over reqs, one JSON line each way.
func runSigner(t *testing.T, reqs []userRequest, name string, args ...string) []signedRequest {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, u := range reqs {
		headers := [][2]string{}
		headers = append(headers, u.header...)
		if err := enc.Encode(map[string]any{"method": u.method, "url": u.url, "body": base64.StdEncoding.EncodeToString(u.body), "headers": headers}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, args[0], err, stderr.String())
	}
	var signed []signedRequest
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var o struct {
			Target  string
			Headers [][2]string
		}
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("%s output %q: %v", args[0], line, err)
		}
		u := reqs[len(signed)]
		signed = append(signed, signedRequest{method: u.method, target: o.Target, header: o.Headers, body: u.body})
	}
	return signed
}

// generateRequests makes n requests as users write them: keys of arbitrary
// UTF-8 and ASCII punctuation, repeated and trailing slashes, written
// encoded or not; query strings with repeated names, empty values, "+"
// for a space, "%2F" and a bare "/"; some with a body and headers whose
// values have runs of spaces.
func generateRequests(rnd *rand.Rand, n int) []userRequest {
	methods := []string{"GET", "GET", "GET", "PUT", "POST", "DELETE", "HEAD"}
	out := make([]userRequest, n)
	for i := range out {
		u := userRequest{method: methods[rnd.IntN(len(methods))]}
		var url strings.Builder
		url.WriteString("/objects")
		if rnd.IntN(8) > 0 {
			for s := range 1 + rnd.IntN(4) {
				url.WriteByte('/')
				url.WriteString(pathSegment(rnd, s))
			}
		}
		if rnd.IntN(5) > 1 {
			url.WriteByte('?')
			url.WriteString(queryString(rnd))
		}
		u.url = url.String()
		if u.method == "PUT" || u.method == "POST" {
			u.body = []byte(randomText(rnd, rnd.IntN(64)))
			u.header = append(u.header, [2]string{"Content-Type", []string{"text/plain", "application/octet-stream", "application/json; charset=utf-8"}[rnd.IntN(3)]})
		}
		if rnd.IntN(4) == 0 {
			u.header = append(u.header, [2]string{"X-Ddbpipe-Note", " two  spaces   inside "})
		}
		out[i] = u
	}
	return out
}

// The characters keys are made of; each is written raw or encoded.
var keyChars = []string{
	"a", "b", "Z", "0", "9", "-", "_", ".", "~", " ", "+", "%", "#", "?", "&", "=", "(", ")", "!", "*", "'",
	"$", "@", ":", ",", ";", "é", "ß", "☃", "日本", "😀", "\u00a0",
}

// pathSegment is one segment of a key as a user writes it in a URL: "%",
// "#" and "?" always encoded, the rest raw or encoded at random. Some are
// empty (repeated or trailing slashes) and a few are dot segments.
func pathSegment(rnd *rand.Rand, n int) string {
	switch rnd.IntN(20) {
	case 0, 1:
		return ""
	case 2:
		if n > 0 {
			return []string{".", ".."}[rnd.IntN(2)]
		}
	}
	var b strings.Builder
	for range 1 + rnd.IntN(8) {
		c := keyChars[rnd.IntN(len(keyChars))]
		switch {
		case strings.Contains("%#?", c):
			b.WriteString(percentEncode(rnd, c))
		case isUnreserved(c):
			if rnd.IntN(10) == 0 {
				b.WriteString(percentEncode(rnd, c))
			} else {
				b.WriteString(c)
			}
		default:
			if rnd.IntN(2) == 0 {
				b.WriteString(percentEncode(rnd, c))
			} else {
				b.WriteString(c)
			}
		}
	}
	return b.String()
}

// queryString is a query as a user writes it: repeated names, names with
// no "=" or an empty value, now and then a trailing "&"; sometimes a
// listing's prefix and delimiter, "/" as "%2F" or bare.
func queryString(rnd *rand.Rand) string {
	var pairs []string
	var names []string
	if rnd.IntN(4) == 0 {
		pairs = append(pairs, "prefix="+queryPart(rnd, 1), "delimiter="+[]string{"/", "%2F", "%2f"}[rnd.IntN(3)])
	}
	for range 1 + rnd.IntN(4) {
		name := queryPart(rnd, 1)
		if len(names) > 0 && rnd.IntN(3) == 0 {
			name = names[rnd.IntN(len(names))]
		}
		names = append(names, name)
		switch rnd.IntN(5) {
		case 0:
			pairs = append(pairs, name)
		case 1:
			pairs = append(pairs, name+"=")
		default:
			pairs = append(pairs, name+"="+queryPart(rnd, 0))
		}
	}
	rnd.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	q := strings.Join(pairs, "&")
	if rnd.IntN(6) == 0 {
		q += "&"
	}
	return q
}

// queryPart is a name or value of at least min characters: a space as "+"
// or "%20"; "&", "=", "#", "%", "+" and ";" encoded; "/" and the other
// reserved characters and UTF-8 raw or encoded.
func queryPart(rnd *rand.Rand, min int) string {
	var b strings.Builder
	for range min + rnd.IntN(7) {
		c := keyChars[rnd.IntN(len(keyChars))]
		if rnd.IntN(6) == 0 {
			c = "/"
		}
		switch {
		case c == " ":
			b.WriteString([]string{"+", "%20"}[rnd.IntN(2)])
		case strings.Contains("&=#%+;", c), isUnreserved(c) && rnd.IntN(10) == 0:
			b.WriteString(percentEncode(rnd, c))
		case isUnreserved(c), rnd.IntN(2) == 0:
			b.WriteString(c)
		default:
			b.WriteString(percentEncode(rnd, c))
		}
	}
	return b.String()
}

func isUnreserved(c string) bool {
	return len(c) == 1 && uriEncode(c, false) == c
}

// percentEncode writes every byte of c as %XX, in upper or lower case.
func percentEncode(rnd *rand.Rand, c string) string {
	e := uriEncode(c, false)
	if !strings.HasPrefix(e, "%") {
		e = fmt.Sprintf("%%%02X", c[0])
	}
	if rnd.IntN(4) == 0 {
		e = strings.ToLower(e)
	}
	return e
}

func randomText(rnd *rand.Rand, n int) string {
	const alphabet = "abc xyz{}\"é☃\n0123"
	r := []rune(alphabet)
	var b strings.Builder
	for range n {
		b.WriteRune(r[rnd.IntN(len(r))])
	}
	return b.String()
}
