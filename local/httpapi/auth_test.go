package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var testIAM = IAM{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "local-secret", Region: "us-east-1"}

var authRoutes = []Route{
	{Method: "GET", Path: "/health", Function: "health", Authorizer: AuthNone},
	{Method: "ANY", Path: "/objects/{key+}", Function: "objects", Authorizer: AuthIAM},
	{Method: "GET", Path: "/polls/{id}/results", Function: "results", Authorizer: "browser"},
}

// signed builds a request to the API signed as a client would sign it.
func signed(tb testing.TB, method, path, body string, creds aws.Credentials, service, region string, at time.Time) *http.Request {
	tb.Helper()
	r, err := http.NewRequest(method, "http://api.local"+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	r.Header.Set("Content-Type", "text/plain")
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		tb.Fatal(err)
	}
	return r
}

func goodCreds() aws.Credentials {
	return aws.Credentials{AccessKeyID: testIAM.AccessKeyID, SecretAccessKey: testIAM.SecretAccessKey}
}

func TestSigV4(t *testing.T) {
	ok := func(method, path, body string) *http.Request {
		return signed(t, method, path, body, goodCreds(), "execute-api", "us-east-1", fixedTime)
	}
	const badSig = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	tests := []struct {
		name    string
		req     func() *http.Request
		status  int
		message string // "" for any
	}{
		{"signed GET", func() *http.Request { return ok("GET", "/objects/a/b.txt", "") }, 200, ""},
		{"signed PUT with body", func() *http.Request { return ok("PUT", "/objects/a%2Fb.txt", "hello") }, 200, ""},
		{"signed with query", func() *http.Request { return ok("GET", "/objects/a?versions=1&x=%20y", "") }, 200, ""},
		{"health is open", func() *http.Request { return httptest.NewRequest("GET", "/health", nil) }, 200, ""},
		{"no route stays 404", func() *http.Request { return httptest.NewRequest("GET", "/nope", nil) }, 404, "Not Found"},
		{"unsigned", func() *http.Request { return httptest.NewRequest("GET", "/objects/a", nil) }, 403, "Forbidden"},
		{"wrong secret", func() *http.Request {
			c := goodCreds()
			c.SecretAccessKey = "guess"
			return signed(t, "GET", "/objects/a", "", c, "execute-api", "us-east-1", fixedTime)
		}, 403, badSig},
		{"unknown key", func() *http.Request {
			c := goodCreds()
			c.AccessKeyID = "AKIDOTHER"
			return signed(t, "GET", "/objects/a", "", c, "execute-api", "us-east-1", fixedTime)
		}, 403, "The security token included in the request is invalid."},
		{"wrong service", func() *http.Request {
			return signed(t, "GET", "/objects/a", "", goodCreds(), "s3", "us-east-1", fixedTime)
		}, 403, "Credential should be scoped to correct service: 'execute-api'."},
		{"wrong region", func() *http.Request {
			return signed(t, "GET", "/objects/a", "", goodCreds(), "execute-api", "eu-west-1", fixedTime)
		}, 403, "Credential should be scoped to a valid region."},
		{"stale date", func() *http.Request {
			return signed(t, "GET", "/objects/a", "", goodCreds(), "execute-api", "us-east-1", fixedTime.Add(-5*time.Minute-time.Second))
		}, 403, "Signature expired: 20240305T100229Z is now earlier than 20240305T100230Z (20240305T100730Z - 5 min.)"},
		{"within skew", func() *http.Request {
			return signed(t, "GET", "/objects/a", "", goodCreds(), "execute-api", "us-east-1", fixedTime.Add(-4*time.Minute))
		}, 200, ""},
		{"from the future", func() *http.Request {
			return signed(t, "GET", "/objects/a", "", goodCreds(), "execute-api", "us-east-1", fixedTime.Add(6*time.Minute))
		}, 403, ""},
		{"altered body", func() *http.Request {
			r := ok("PUT", "/objects/a", "hello")
			r.Body, r.ContentLength = http.NoBody, 5
			r2 := ok("PUT", "/objects/a", "hellO")
			r2.Header = r.Header
			return r2
		}, 403, badSig},
		{"altered signed header", func() *http.Request {
			r := ok("PUT", "/objects/a", "hello")
			r.Header.Set("Content-Type", "application/json")
			return r
		}, 403, badSig},
		{"unsigned header added", func() *http.Request {
			r := ok("PUT", "/objects/a", "hello")
			r.Header.Set("X-Extra", "fine")
			return r
		}, 200, ""},
		{"replay on another path", func() *http.Request {
			r := ok("DELETE", "/objects/a", "")
			r2, _ := http.NewRequest("DELETE", "http://api.local/objects/b", nil)
			r2.Header = r.Header
			return r2
		}, 403, badSig},
		{"replay with another method", func() *http.Request {
			r := ok("GET", "/objects/a", "")
			r2, _ := http.NewRequest("DELETE", "http://api.local/objects/a", nil)
			r2.Header = r.Header
			return r2
		}, 403, badSig},
		{"malformed Authorization", func() *http.Request {
			r := ok("GET", "/objects/a", "")
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDLOCAL, Signature=abc")
			return r
		}, 403, ""},
		{"another scheme", func() *http.Request {
			r := ok("GET", "/objects/a", "")
			r.Header.Set("Authorization", "Bearer abc")
			return r
		}, 403, ""},
		{"no X-Amz-Date", func() *http.Request {
			r := ok("GET", "/objects/a", "")
			r.Header.Del("X-Amz-Date")
			return r
		}, 403, ""},
		{"oversized signature (within the header quota)", func() *http.Request {
			r := ok("GET", "/objects/a", "")
			r.Header.Set("Authorization", r.Header.Get("Authorization")+strings.Repeat("0", 8000))
			return r
		}, 403, badSig},
		{"oversized header (over the quota) never reaches the function", func() *http.Request {
			r := ok("GET", "/objects/a", "")
			r.Header.Set("Authorization", r.Header.Get("Authorization")+strings.Repeat("0", 20000))
			return r
		}, 431, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			s := mustServer(t, authRoutes, rec, WithIAM(testIAM), WithJWTAuthorizer("browser", JWTAuthorizer{Issuer: "https://issuer.invalid", JWKSURL: "http://127.0.0.1:1/none"}))
			w := serve(s, tt.req())
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", w.Code, tt.status, w.Body)
			}
			switch tt.message {
			case "":
			case badSig:
				assertSignatureRefused(t, w)
			default:
				assertMessage(t, w, tt.status, tt.message)
			}
			if tt.status >= 400 && rec.calls != 0 {
				t.Errorf("the function was invoked %d times for a refused request", rec.calls)
			}
			if tt.status == 200 && strings.HasPrefix(tt.req().URL.Path, "/objects") {
				ev := rec.event(t)
				if ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM == nil || ev.RequestContext.Authorizer.IAM.AccessKey != testIAM.AccessKeyID {
					t.Errorf("requestContext.authorizer = %+v, want iam with the access key", ev.RequestContext.Authorizer)
				}
			}
		})
	}
}

// assertSignatureRefused checks API Gateway's InvalidSignatureException:
// the message, then the canonical request and string to sign it expected.
// It returns the canonical request.
func assertSignatureRefused(tb testing.TB, w *httptest.ResponseRecorder) string {
	tb.Helper()
	if w.Code != http.StatusForbidden || w.Header().Get("X-Amzn-Errortype") != "InvalidSignatureException" {
		tb.Fatalf("status %d, x-amzn-ErrorType %q; want 403 InvalidSignatureException (body %s)", w.Code, w.Header().Get("X-Amzn-Errortype"), w.Body)
	}
	var body struct{ Message string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		tb.Fatalf("body %s: %v", w.Body, err)
	}
	rest, ok := strings.CutPrefix(body.Message, msgBadSignature+"\n\nThe Canonical String for this request should have been\n'")
	canonical, sts, ok2 := strings.Cut(rest, "'\n\nThe String-to-Sign should have been\n'")
	if !ok || !ok2 || !strings.HasPrefix(sts, "AWS4-HMAC-SHA256\n") || !strings.HasSuffix(sts, "'\n") {
		tb.Fatalf("message = %q, want the bad-signature message with the canonical request and the string to sign", body.Message)
	}
	return canonical
}

// A refusal quotes the canonical request as API Gateway builds it: the path
// encoded once more, the query decoded, encoded again and sorted; the
// string to sign hashes it. The same URL signed right passes.
func TestSigV4RefusalQuotesCanonicalRequest(t *testing.T) {
	const path = "/objects/a%20b?prefix=a%2F&delimiter=/"
	s := mustServer(t, authRoutes, &recorder{}, WithIAM(testIAM), WithJWTAuthorizer("browser", JWTAuthorizer{Issuer: "https://issuer.invalid", JWKSURL: "http://127.0.0.1:1/none"}))
	if w := serve(s, signed(t, "GET", path, "", goodCreds(), "execute-api", "us-east-1", fixedTime)); w.Code != 200 {
		t.Fatalf("signed right: status %d, body %s", w.Code, w.Body)
	}
	c := goodCreds()
	c.SecretAccessKey = "guess"
	w := serve(s, signed(t, "GET", path, "", c, "execute-api", "us-east-1", fixedTime))
	got := assertSignatureRefused(t, w)
	want := "GET\n/objects/a%2520b\ndelimiter=%2F&prefix=a%2F\n" +
		"content-type:text/plain\nhost:api.local\nx-amz-date:20240305T100730Z\n\ncontent-type;host;x-amz-date\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got != want {
		t.Errorf("canonical request = %q, want %q", got, want)
	}
	sum := sha256.Sum256([]byte(want))
	wantSTS := "AWS4-HMAC-SHA256\n20240305T100730Z\n20240305/us-east-1/execute-api/aws4_request\n" + hex.EncodeToString(sum[:])
	if !strings.Contains(w.Body.String(), strings.ReplaceAll(wantSTS, "\n", `\n`)) {
		t.Errorf("body %s does not quote the string to sign %q", w.Body, wantSTS)
	}
}

func TestRoutesNeedTheirAuthorizer(t *testing.T) {
	rec := &recorder{}
	if _, err := NewServer([]Route{{Method: "GET", Path: "/a", Function: "f", Authorizer: AuthIAM}}, rec.invoke); err == nil {
		t.Error("an AWS_IAM route without WithIAM was accepted")
	}
	if _, err := NewServer([]Route{{Method: "GET", Path: "/a", Function: "f", Authorizer: "nope"}}, rec.invoke, WithIAM(testIAM)); err == nil {
		t.Error("a route with an undefined authorizer was accepted")
	}
}

// issuer is a test OpenID provider: its own RSA key, a JWKS and an
// openid-configuration on 127.0.0.1.
type issuer struct {
	url string
	key *rsa.PrivateKey
	kid string
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "k1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": is.url, "jwks_uri": is.url + "/jwks.json"})
	})
	mux.HandleFunc("/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		e := base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes())
		n := base64.RawURLEncoding.EncodeToString(key.N.Bytes())
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": is.kid, "use": "sig", "alg": "RS256", "n": n, "e": e}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

func (is *issuer) token(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, 5, sum[:]) // crypto.SHA256
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestJWT(t *testing.T) {
	is := newIssuer(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": is.url, "aud": "web", "sub": "alice", "exp": fixedTime.Add(time.Hour).Unix(), "scope": "read"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	tests := []struct {
		name   string
		token  func() string
		status int
	}{
		{"good", func() string { return is.token(t, is.key, is.kid, claims(nil)) }, 200},
		{"aud in a list", func() string {
			return is.token(t, is.key, is.kid, claims(func(c map[string]any) { c["aud"] = []string{"x", "web"} }))
		}, 200},
		{"client_id instead of aud", func() string {
			return is.token(t, is.key, is.kid, claims(func(c map[string]any) { delete(c, "aud"); c["client_id"] = "web" }))
		}, 200},
		{"no token", func() string { return "" }, 401},
		{"expired", func() string {
			return is.token(t, is.key, is.kid, claims(func(c map[string]any) { c["exp"] = fixedTime.Add(-time.Second).Unix() }))
		}, 401},
		{"not yet valid", func() string {
			return is.token(t, is.key, is.kid, claims(func(c map[string]any) { c["nbf"] = fixedTime.Add(time.Minute).Unix() }))
		}, 401},
		{"wrong audience", func() string {
			return is.token(t, is.key, is.kid, claims(func(c map[string]any) { c["aud"] = "other" }))
		}, 401},
		{"wrong issuer", func() string {
			return is.token(t, is.key, is.kid, claims(func(c map[string]any) { c["iss"] = "https://evil.example" }))
		}, 401},
		{"bad signature", func() string { return is.token(t, other, is.kid, claims(nil)) }, 401},
		{"unknown kid", func() string { return is.token(t, other, "k2", claims(nil)) }, 401},
		{"tampered claims", func() string {
			tok := is.token(t, is.key, is.kid, claims(nil))
			p := strings.Split(tok, ".")
			c, _ := json.Marshal(claims(func(c map[string]any) { c["sub"] = "mallory" }))
			return p[0] + "." + base64.RawURLEncoding.EncodeToString(c) + "." + p[2]
		}, 401},
		{"not a JWT", func() string { return "abc.def" }, 401},
		{"alg none", func() string {
			h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`))
			c, _ := json.Marshal(claims(nil))
			return h + "." + base64.RawURLEncoding.EncodeToString(c) + "."
		}, 401},
	}
	rec := &recorder{}
	s := mustServer(t, authRoutes, rec, WithIAM(testIAM), WithJWTAuthorizer("browser", JWTAuthorizer{Issuer: is.url, Audience: []string{"web"}}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.calls
			r := httptest.NewRequest("GET", "/polls/p1/results", nil)
			if tok := tt.token(); tok != "" {
				r.Header.Set("Authorization", "Bearer "+tok)
			}
			w := serve(s, r)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", w.Code, tt.status, w.Body)
			}
			if tt.status == 401 {
				assertMessage(t, w, 401, "Unauthorized")
				if rec.calls != before {
					t.Error("the function was invoked for a refused token")
				}
				return
			}
			ev := rec.event(t)
			if a := ev.RequestContext.Authorizer; a == nil || a.JWT == nil || a.JWT.Claims["sub"] != "alice" || len(a.JWT.Scopes) != 1 {
				t.Errorf("requestContext.authorizer = %+v, want the token's claims and scopes", a)
			}
		})
	}
	// A SigV4-signed request is not a JWT: the JWT route refuses it.
	w := serve(s, signed(t, "GET", "/polls/p1/results", "", goodCreds(), "execute-api", "us-east-1", fixedTime))
	if w.Code != 401 {
		t.Errorf("SigV4 on a JWT route = %d, want 401", w.Code)
	}
}

// readOnly lets its one identity GET and nothing else: the unit test's
// stand-in for the IAM judge (local/iam judges the real policies).
type readOnly struct{ asked []string }

func (j *readOnly) Known(key string) bool { return key == "AKIDLOCALAsReader" }

func (j *readOnly) Invoke(_ context.Context, key, resource string) (string, error) {
	j.asked = append(j.asked, key+" "+resource)
	if strings.Contains(resource, "/$default/GET/") {
		return "", nil
	}
	return "User: arn:aws:iam::000000000000:role/reader is not authorized to perform: execute-api:Invoke on resource: " + resource, nil
}

// With a judge, an identity that signs with the API's secret is known; its
// request reaches the function only when the judge allows execute-api:Invoke
// on the route's ARN, and a refusal is API Gateway's AccessDeniedException.
// The admin's key is not judged.
func TestSigV4AsksTheJudge(t *testing.T) {
	reader := aws.Credentials{AccessKeyID: "AKIDLOCALAsReader", SecretAccessKey: testIAM.SecretAccessKey}
	stranger := aws.Credentials{AccessKeyID: "AKIDLOCALAsNobody", SecretAccessKey: testIAM.SecretAccessKey}
	tests := []struct {
		name   string
		creds  aws.Credentials
		method string
		status int
		asked  string // the judge's question, "" for none
		errTyp string
	}{
		{"allowed route", reader, "GET", 200, "AKIDLOCALAsReader arn:aws:execute-api:us-east-1:000000000000:local/$default/GET/objects/a/b c.txt", ""},
		{"denied route", reader, "DELETE", 403, "AKIDLOCALAsReader arn:aws:execute-api:us-east-1:000000000000:local/$default/DELETE/objects/a/b c.txt", "AccessDeniedException"},
		{"unknown identity", stranger, "GET", 403, "", "UnrecognizedClientException"},
		{"the admin is not judged", goodCreds(), "DELETE", 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &readOnly{}
			sig := testIAM
			sig.Judge = j
			rec := &recorder{}
			s := mustServer(t, authRoutes, rec, WithIAM(sig), WithAccountID("000000000000"),
				WithJWTAuthorizer("browser", JWTAuthorizer{Issuer: "https://issuer.invalid", JWKSURL: "http://127.0.0.1:1/none"}))
			w := serve(s, signed(t, tt.method, "/objects/a/b%20c.txt", "", tt.creds, "execute-api", "us-east-1", fixedTime))
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", w.Code, tt.status, w.Body)
			}
			if got := w.Header().Get("X-Amzn-Errortype"); got != tt.errTyp {
				t.Errorf("x-amzn-ErrorType = %q, want %q", got, tt.errTyp)
			}
			if want := []string{tt.asked}; tt.asked != "" && (len(j.asked) != 1 || j.asked[0] != tt.asked) {
				t.Errorf("the judge was asked %q, want %q", j.asked, want)
			}
			if tt.asked == "" && len(j.asked) != 0 {
				t.Errorf("the judge was asked %q, want nothing", j.asked)
			}
			if tt.status == 403 && rec.calls != 0 {
				t.Errorf("the function was invoked for a refused request")
			}
			if tt.errTyp == "AccessDeniedException" && !strings.Contains(w.Body.String(), "is not authorized to perform: execute-api:Invoke") {
				t.Errorf("body %s does not carry IAM's refusal", w.Body)
			}
		})
	}
}
