package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestCurlSigV4 checks that curl's --aws-sigv4, as docs/producers.md shows it,
// passes the local AWS_IAM check (and a wrong secret does not). It skips
// without curl.
func TestCurlSigV4(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	// A presigned URL on another host, which must not get the signature.
	blob := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer blob.Close()
	blobURL := strings.Replace(blob.URL, "127.0.0.1", "localhost", 1)
	rec := &recorder{respond: func(_ context.Context, _ string, ev events.APIGatewayV2HTTPRequest) ([]byte, error) {
		if ev.RawPath == "/objects/data/big.bin" {
			return []byte(`{"statusCode":303,"headers":{"location":"` + blobURL + `/big.bin?X-Amz-Signature=x"}}`), nil
		}
		return []byte(`{"statusCode":200,"body":"ok"}`), nil
	}}
	s, err := NewServer(authRoutes, rec.invoke, WithIAM(testIAM), WithJWTAuthorizer("browser", JWTAuthorizer{Issuer: "https://issuer.invalid"}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	curl := func(secret string, args ...string) string {
		t.Helper()
		base := []string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
			"--aws-sigv4", "aws:amz:" + testIAM.Region + ":execute-api", "--user", testIAM.AccessKeyID + ":" + secret}
		out, err := exec.CommandContext(t.Context(), "curl", append(base, args...)...).Output()
		if err != nil {
			t.Fatalf("curl %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tt := range []struct {
		name, secret string
		args         []string
		want         string
	}{
		{"GET", testIAM.SecretAccessKey, []string{srv.URL + "/objects/docs/notes.md/versions"}, "200"},
		{"GET with a query", testIAM.SecretAccessKey, []string{srv.URL + "/objects/docs/a.txt?version=2"}, "200"},
		{"PUT with a body", testIAM.SecretAccessKey, []string{"-X", "PUT", "--data-binary", "hello", "-H", "Content-Type: text/markdown", "-H", "If-Match: 1", srv.URL + "/objects/docs/notes.md"}, "200"},
		{"-L to a presigned URL elsewhere", testIAM.SecretAccessKey, []string{"-L", srv.URL + "/objects/data/big.bin"}, "200"},
		{"wrong secret", "nope", []string{srv.URL + "/objects/docs/a.txt"}, "403"},
	} {
		if got := curl(tt.secret, tt.args...); got != tt.want {
			t.Errorf("%s: curl = %s, want %s", tt.name, got, tt.want)
		}
	}
}
