package sigv4_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

type seen struct {
	auth, date, body string
}

func server(t *testing.T, got *seen) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = seen{auth: r.Header.Get("Authorization"), date: r.Header.Get("X-Amz-Date"), body: string(b)}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestClientSignsOnlyTheAPI(t *testing.T) {
	var api, other seen
	apiSrv, otherSrv := server(t, &api), server(t, &other)
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}
	hc, err := sigv4.Client(cfg, apiSrv.URL, &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post(apiSrv.URL+"/polls", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.HasPrefix(api.auth, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(api.auth, "/eu-west-1/execute-api/aws4_request") {
		t.Errorf("Authorization = %q, want SigV4 for execute-api in eu-west-1", api.auth)
	}
	if api.date == "" || api.body != `{"a":1}` {
		t.Errorf("X-Amz-Date %q, body %q; want a date and the body intact", api.date, api.body)
	}
	resp, err = hc.Get(otherSrv.URL + "/presigned?X-Amz-Signature=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if other.auth != "" {
		t.Errorf("a request to another host was signed: %q", other.auth)
	}
}

func TestClientNeedsCredentialsAndHost(t *testing.T) {
	if _, err := sigv4.Client(aws.Config{Region: "us-east-1"}, "http://127.0.0.1:1", nil); err == nil {
		t.Error("no credentials: want an error")
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	if _, err := sigv4.Client(cfg, "not a url", nil); err == nil {
		t.Error("no host: want an error")
	}
}
