// Package sigv4 signs HTTP API requests with AWS Signature Version 4
// (service execute-api), as an API whose routes use the AWS_IAM authorizer
// requires: an http.RoundTripper that signs the requests to one host with
// credentials from an aws.Config (the standard chain) and the body's SHA-256.
package sigv4

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Service is the signing name of API Gateway's invoke endpoints.
const Service = "execute-api"

// Transport signs every request to Host and passes the others (presigned
// S3 URLs, for one) through unsigned.
type Transport struct {
	Base        http.RoundTripper // nil: http.DefaultTransport
	Credentials aws.CredentialsProvider
	Region      string
	Host        string // host[:port] of the API
	Now         func() time.Time
}

// RoundTrip signs a copy of req and sends it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.URL.Host != t.Host {
		return base.RoundTrip(req)
	}
	signed, err := t.sign(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return base.RoundTrip(signed)
}

func (t *Transport) sign(req *http.Request) (*http.Request, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sigv4: read body: %w", err)
		}
		body = b
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	creds, err := t.Credentials.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("sigv4: credentials: %w", err)
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(req.Context(), creds, out, hex.EncodeToString(sum[:]), Service, t.Region, now().UTC()); err != nil {
		return nil, fmt.Errorf("sigv4: sign: %w", err)
	}
	return out, nil
}

// Client returns a copy of hc (nil: http.DefaultClient) whose requests to
// apiURL's host are signed with cfg's credentials and region.
func Client(cfg aws.Config, apiURL string, hc *http.Client) (*http.Client, error) {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("sigv4: API URL %q has no host", apiURL)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("sigv4: no AWS credentials to sign requests to %s", u.Host)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.Transport = &Transport{Base: hc.Transport, Credentials: cfg.Credentials, Region: cfg.Region, Host: u.Host}
	return &c, nil
}
