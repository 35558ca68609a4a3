package tests

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// TestBrowserAuth runs the template with the JWT authorizer and public
// results switched on, as a deploy with JwtIssuer, JwtAudience and
// PublicPollResults=true would: the poll routes take a bearer token from
// the issuer (a TLS server of the test's own, with its own RSA key), the
// results are open, /objects still wants SigV4, /health is open.
func TestBrowserAuth(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	idp := httptest.NewTLSServer(mux)
	t.Cleanup(idp.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": idp.URL, "jwks_uri": idp.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "test", "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	token := func(aud string, exp time.Time) string {
		h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "test", "typ": "JWT"})
		c, _ := json.Marshal(map[string]any{"iss": idp.URL, "aud": aud, "sub": "browser-user", "exp": exp.Unix()})
		in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
		sum := sha256.Sum256([]byte(in))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return in + "." + base64.RawURLEncoding.EncodeToString(sig)
	}

	env, err := stack.Up(context.Background(), stack.Options{
		Servers: stacktest.Need(t), Root: repoRoot(t), Setups: registry.All, StackName: unique("auth"), FunctionLog: io.Discard,
		Params:     map[string]string{"JwtIssuer": idp.URL, "JwtAudience": "web-client", "PublicPollResults": "true"},
		JWKSClient: idp.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	api := env.APIURL
	poll := unique("browser-poll")

	call := func(hc *http.Client, method, path, bearer, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, api+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Every answer, refusals included, as docs/openapi.yaml says.
	plain, signed := openAPIChecked(t, env, http.DefaultClient, false), openAPIChecked(t, env, env.APIClient(), false)
	good := token("web-client", time.Now().Add(time.Hour))
	create := `{"pollId":"` + poll + `","options":["a","b"]}`
	tests := []struct {
		name         string
		hc           *http.Client
		method, path string
		bearer, body string
		want         int
	}{
		{"poll without a token", plain, "POST", "/polls", "", create, 401},
		{"poll signed with SigV4 (a JWT route takes no SigV4)", signed, "POST", "/polls", "", create, 401},
		{"poll with an expired token", plain, "POST", "/polls", token("web-client", time.Now().Add(-time.Minute)), create, 401},
		{"poll with another audience's token", plain, "POST", "/polls", token("other", time.Now().Add(time.Hour)), create, 401},
		{"poll with a good token", plain, "POST", "/polls", good, create, 201},
		{"read the poll with the token", plain, "GET", "/polls/" + poll, good, "", 200},
		{"results are public", plain, "GET", "/polls/" + poll + "/results", "", "", 200},
		{"health is public", plain, "GET", "/health", "", "", 200},
		{"objects unsigned", plain, "GET", "/objects/x", "", "", 403},
		{"objects with a token (IAM only)", plain, "GET", "/objects/x", good, "", 403},
		{"objects signed", signed, "GET", "/objects/x", "", "", 404},
	}
	for _, tt := range tests {
		if got, body := call(tt.hc, tt.method, tt.path, tt.bearer, tt.body); got != tt.want {
			t.Errorf("%s: %s %s = %d %s, want %d", tt.name, tt.method, tt.path, got, body, tt.want)
		}
	}
}
