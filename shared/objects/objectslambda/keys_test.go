package objectslambda_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// Every key S3's rule takes round-trips through the API with the Go
// client: put, get, versions, listings with and without delimiters,
// delete. 1,200 keys with make keys (OddKeys and random ones of 1 to
// 1,024 bytes); the OddKeys alone in make test (KeyCount).
func TestKeysRoundTripWithTheGoClient(t *testing.T) {
	_, c := newClient(t)
	objectstest.RoundTripKeys(t, GoKeyClient(c), objectstest.S3Keys(objectstest.KeyCount(1200), 27), []string{"", "/", "#", " ", ".", "é"}, 8)
}

// GoKeyClient drives a key round trip with the Go client.
func GoKeyClient(c *objectsclient.Client) objectstest.KeyClient {
	return objectstest.KeyClient{
		Put: func(ctx context.Context, key string, body []byte) (int64, error) {
			m, err := c.Put(ctx, key, body, objectsclient.PutOptions{ContentType: "text/plain"})
			return m.Version, err
		},
		Get: func(ctx context.Context, key string, version int64) ([]byte, error) {
			o, err := c.Get(ctx, key, version)
			return o.Body, err
		},
		Versions: func(ctx context.Context, key string) ([]int64, error) {
			ms, err := c.Versions(ctx, key)
			var vs []int64
			for _, m := range ms {
				vs = append(vs, m.Version)
			}
			return vs, err
		},
		List: func(ctx context.Context, prefix, delimiter string) (keys, prefixes []string, err error) {
			for it, err := range c.List(ctx, prefix, objectsclient.ListOptions{Delimiter: delimiter}) {
				if err != nil {
					return nil, nil, err
				}
				if it.Prefix != "" {
					prefixes = append(prefixes, it.Prefix)
				} else {
					keys = append(keys, it.Entry.Key)
				}
			}
			return keys, prefixes, nil
		},
		Delete: func(ctx context.Context, key string) (int64, error) {
			return c.Delete(ctx, key, nil)
		},
		IsNotFound: objectsclient.IsNotFound,
	}
}

// The same keys with requests signed by botocore (SigV4 as the AWS CLI and
// boto3 compute it) instead of Go's signer: the Go client writes the
// requests, botosign.py signs and sends them as they are written.
func TestKeysRoundTripSignedByBotocore(t *testing.T) {
	e := upStack(t)
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	if err := exec.Command(python, "-c", "import botocore").Run(); err != nil {
		t.Skipf("%s cannot import botocore: %v", python, err)
	}
	creds, err := e.AWS.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &botoTransport{host: u.Host, pool: make(chan *botoProc, 4)}
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"AWS_SESSION_TOKEN="+creds.SessionToken, "AWS_REGION="+e.AWS.Region)
	for range cap(tr.pool) {
		tr.pool <- startBoto(t, python, env)
	}
	c := objectsclient.New(e.APIURL, &http.Client{Transport: tr, Timeout: 2 * time.Minute})
	objectstest.RoundTripKeys(t, GoKeyClient(c), objectstest.S3Keys(objectstest.KeyCount(1200), 28), []string{"", "/", "#"}, cap(tr.pool))
}

// botoTransport sends requests to the API through botosign.py processes
// (the others, presigned S3 URLs, go as they are).
type botoTransport struct {
	host string
	pool chan *botoProc
}

type botoProc struct {
	in  io.Writer
	out *bufio.Reader
}

func startBoto(t *testing.T, python string, env []string) *botoProc {
	t.Helper()
	cmd := exec.Command(python, filepath.Join("testdata", "botosign.py"))
	cmd.Env, cmd.Stderr = env, os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return &botoProc{in: in, out: bufio.NewReaderSize(out, 1<<20)}
}

func (b *botoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != b.host {
		return http.DefaultTransport.RoundTrip(req)
	}
	body := []byte{}
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	headers := map[string]string{}
	for k, vs := range req.Header {
		headers[k] = strings.Join(vs, ", ")
	}
	line, err := json.Marshal(map[string]any{"method": req.Method, "url": req.URL.String(), "headers": headers, "body": body})
	if err != nil {
		return nil, err
	}
	p := <-b.pool
	defer func() { b.pool <- p }()
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("botosign: %w", err)
	}
	answer, err := p.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("botosign: %w", err)
	}
	var a struct {
		Status  int
		Headers http.Header
		Body    []byte
		Error   string
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return nil, fmt.Errorf("botosign: %w", err)
	}
	if a.Error != "" {
		return nil, fmt.Errorf("botosign: %s", a.Error)
	}
	h := http.Header{}
	for k, vs := range a.Headers {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	return &http.Response{StatusCode: a.Status, Status: http.StatusText(a.Status), Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(a.Body)), ContentLength: int64(len(a.Body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// Presigned uploads and downloads take every key too: the bucket's keys
// are digests of the object key, and the status and completion links
// write the key with objectsapi.EscapeKey. Small documents go in one
// presigned PUT; one 17 MiB document goes in parts (its completion POSTs
// to the key's ?uploadId=ID) and comes back through a presigned GET (303).
func TestKeysThroughPresignedTransfers(t *testing.T) {
	_, c := newClient(t)
	ctx := context.Background()
	odd := objectstest.OddKeys()
	keys := []string{"presigned/ a b+c#d?uploads", "/", "a/../b", "a//b/", "..", "a?uploadId=x", "versions", "x/uploads/abc123/complete", "\x01\n\x7f",
		odd[len(odd)-1], strings.Repeat("é", 512)}
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, key := range keys {
		wg.Go(func() {
			body := objectstest.Random(1000+i, uint64(i))
			st, err := c.Upload(ctx, key, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{})
			if err != nil {
				errs[i] = err
				return
			}
			got, err := c.Get(ctx, key, st.Version)
			if err != nil || !bytes.Equal(got.Body, body) || st.Key != key {
				errs[i] = fmt.Errorf("upload as %q v%d, read back %d bytes: %v", st.Key, st.Version, len(got.Body), err)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%.60q: %v", keys[i], err)
		}
	}

	key := "presigned/big #1/../a+b?versions"
	body := objectstest.Random(17<<20, 99)
	st, err := c.Upload(ctx, key, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{})
	if err != nil {
		t.Fatalf("multipart upload: %v", err)
	}
	got, err := c.Get(ctx, key, 0) // over 4 MiB: a 303 to a presigned GET, followed and verified
	if err != nil || !bytes.Equal(got.Body, body) || got.Version != st.Version {
		t.Fatalf("get: v%d, %d bytes, %v; want v%d, the %d bytes uploaded", got.Version, len(got.Body), err, st.Version, len(body))
	}
}
