package faultproxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
)

// A proxy in front of an S3 server: the first upload is refused with
// SlowDown, the second reaches the server and is reported to the observer.
func Example() {
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"9a0364b9e99bb480dd25e1f0284c8555"`)
	}))
	defer s3.Close()

	p, err := faultproxy.New(faultproxy.S3, s3.URL, faultproxy.WithSeed(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	endpoint, err := p.Start() // point AWS_ENDPOINT_URL_S3 here
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	created := make(chan faultproxy.Exchange, 1)
	p.Observe(func(ex faultproxy.Exchange) {
		if ex.ObjectCreated() {
			created <- ex
		}
	})
	p.SetFaults(faultproxy.Faults{FailNext: 1})

	for range 2 {
		req, _ := http.NewRequest(http.MethodPut, endpoint+"/docs/a.txt", strings.NewReader("content"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	ex := <-created
	fmt.Println(ex.Operation.Action, ex.Operation.Bucket, ex.Operation.Key, ex.ETag, ex.ObjectSize)
	s := p.Stats()
	fmt.Println(s.Requests, s.Throttled, s.Forwarded)
	// Output:
	// 503
	// 200
	// PutObject docs a.txt "9a0364b9e99bb480dd25e1f0284c8555" 7
	// 2 1 1
}
