package objectslambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

// put makes one raw PUT to the API and returns its status, headers and
// body.
func put(t *testing.T, e *stack.Env, key string, header map[string]string, body []byte) (int, http.Header, objectsapi.Meta) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, e.APIURL+"/objects/"+key, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.APIClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m objectsapi.Meta
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, resp.Header, m
}

// The same PUT twice, through the API: each precondition's retry is 200
// with the version its first attempt made and X-Object-Unchanged: true;
// other bytes are a new version or a conflict as before.
func TestPutRetriesOverHTTP(t *testing.T) {
	e := upStack(t)
	text := map[string]string{"Content-Type": "text/plain"}
	with := func(k, v string) map[string]string { return map[string]string{"Content-Type": "text/plain", k: v} }
	big := objectstest.Random(20<<10, 19) // in S3
	steps := []struct {
		name      string
		key       string
		header    map[string]string
		body      []byte
		status    int
		version   int64
		unchanged bool
	}{
		{"create", "retry/http/a.txt", with("If-None-Match", "*"), []byte("one"), 201, 1, false},
		{"create again", "retry/http/a.txt", with("If-None-Match", "*"), []byte("one"), 200, 1, true},
		{"create with other bytes", "retry/http/a.txt", with("If-None-Match", "*"), []byte("two"), 409, 0, false},
		{"plain again", "retry/http/a.txt", text, []byte("one"), 200, 1, true},
		{"other type", "retry/http/a.txt", map[string]string{"Content-Type": "text/markdown"}, []byte("one"), 200, 2, false},
		{"update", "retry/http/a.txt", with("If-Match", `"2"`), []byte("two"), 200, 3, false},
		{"update again", "retry/http/a.txt", with("If-Match", `"2"`), []byte("two"), 200, 3, true},
		{"stale update", "retry/http/a.txt", with("If-Match", `"2"`), []byte("three"), 409, 0, false},
		{"create with If-Match: 0", "retry/http/c.txt", with("If-Match", "0"), []byte("one"), 201, 1, false},
		{"create with If-Match: 0 again", "retry/http/c.txt", with("If-Match", `"0"`), []byte("one"), 200, 1, true},
		{"create with If-Match: 0 and If-None-Match: *", "retry/http/d.txt", map[string]string{"If-Match": "0", "If-None-Match": "*"}, []byte("one"), 201, 1, false},
		{"big", "retry/http/b.bin", text, big, 201, 1, false},
		{"big again", "retry/http/b.bin", text, big, 200, 1, true},
	}
	for _, s := range steps {
		status, h, m := put(t, e, s.key, s.header, s.body)
		unchanged := h.Get(objectsapi.HeaderUnchanged) == "true"
		if status != s.status || status < 300 && (m.Version != s.version || unchanged != s.unchanged || m.Unchanged != s.unchanged) {
			t.Errorf("%s: %d, version %d, header unchanged %t, body unchanged %t; want %d, version %d, unchanged %t",
				s.name, status, m.Version, unchanged, m.Unchanged, s.status, s.version, s.unchanged)
		}
		if status < 300 && h.Get("ETag") != fmt.Sprintf(`"%d"`, s.version) {
			t.Errorf("%s: ETag %s, want \"%d\"", s.name, h.Get("ETag"), s.version)
		}
	}
}

// errLost is what loseReply answers instead of the server's reply.
var errLost = errors.New("test: connection dropped after the request was served")

// loseReply is a client transport that sends every request and, when
// armed, throws the server's answer away (read to the end, so the server
// finished) and fails as a dropped connection does: the write happened,
// the client never hears of it.
type loseReply struct {
	base  http.RoundTripper
	mu    sync.Mutex
	armed bool
	lost  int
}

func (l *loseReply) arm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = true
}

func (l *loseReply) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	l.mu.Lock()
	lose := l.armed && err == nil
	l.armed = l.armed && !lose
	if lose {
		l.lost++
	}
	l.mu.Unlock()
	if !lose {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errLost
}

// A PUT whose answer is lost after it committed, retried as it was, many
// times over: each retry answers with the version its first attempt made
// (unchanged), and no try makes a second version or a 409. Tries cycle
// over no precondition, If-Match on the version read, and create-only,
// and over a document inline and one in S3: each of the six pairs ten
// times, on a key whose history grows to 40 versions. (200 tries, the
// key's history at 133, proved no more and took 14 s of CPU.)
func TestRetryAfterDroppedAnswer(t *testing.T) {
	e := upStack(t)
	const tries = 60
	drop := &loseReply{base: http.DefaultTransport}
	hc, err := sigv4.Client(e.AWS, e.APIURL, &http.Client{Timeout: time.Minute, Transport: drop})
	if err != nil {
		t.Fatal(err)
	}
	c := objectsclient.New(e.APIURL, hc)
	ctx := context.Background()
	const key = "retry/dropped/doc.bin"
	var version int64 // of key: one per try of the two update modes
	var updates, conflicts, extra, unchanged int
	start := time.Now()
	for i := range tries {
		size := 200 // inline
		if i%2 == 1 {
			size = 20 << 10 // S3
		}
		body := objectstest.Random(size, uint64(i)+1000)
		k, o, want := key, objectsclient.PutOptions{ContentType: "application/x-test"}, version+1
		switch i % 3 {
		case 1:
			if version > 0 {
				o.IfMatch = &version
			}
		case 2:
			k, o.CreateOnly, want = fmt.Sprintf("retry/dropped/created/%d.bin", i), true, 1
		}
		drop.arm()
		if _, err := c.Put(ctx, k, body, o); !errors.Is(err, errLost) {
			t.Fatalf("try %d: first attempt: %v, want the dropped answer", i, err)
		}
		m, err := c.Put(ctx, k, body, o)
		if _, conflict := objectsclient.IsConflict(err); conflict {
			conflicts++
			continue
		}
		if err != nil {
			t.Fatalf("try %d: retry: %v", i, err)
		}
		if m.Unchanged {
			unchanged++
		}
		if m.Version != want {
			extra++
			t.Errorf("try %d: retry answered version %d, want %d", i, m.Version, want)
		}
		if k == key {
			updates++
			version = m.Version
		}
	}
	latest, err := c.Get(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	extra += int(latest.Version) - updates
	t.Logf("%d tries with the answer dropped after the commit, in %s: %d answers dropped, %d retries unchanged, %d extra versions, %d conflicts (%s at version %d after %d updates)",
		tries, time.Since(start).Round(time.Millisecond), drop.lost, unchanged, extra, conflicts, key, latest.Version, updates)
	if conflicts != 0 || extra != 0 || unchanged != tries || drop.lost != tries {
		t.Errorf("%d conflicts, %d extra versions, %d of %d retries unchanged (%d answers dropped); want 0, 0, all", conflicts, extra, unchanged, tries, drop.lost)
	}
}

// Presigned uploads finished twice: the same document uploaded again (a
// retried upload, with the ifMatch of its first attempt) is granted and
// commits nothing, its bytes deleted; a multipart upload completed twice
// answers with the upload as it is, never a refusal.
func TestUploadFinishedTwice(t *testing.T) {
	e, c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	body := objectstest.Random(64<<10, 64)
	key := "retry/upload/doc.bin"
	zero := int64(0)
	first, err := c.Upload(ctx, key, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{ContentType: "application/x-test", IfMatch: &zero})
	if err != nil || first.Version != 1 || first.Unchanged {
		t.Fatalf("first upload: %+v, %v; want version 1", first, err)
	}
	again, err := c.Upload(ctx, key, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{ContentType: "application/x-test", IfMatch: &zero})
	if err != nil || again.State != objectsapi.StateCommitted || again.Version != 1 || !again.Unchanged {
		t.Fatalf("the same upload again: %+v, %v; want committed version 1, unchanged", again, err)
	}
	bucket := e.Vars["OBJECTS_BUCKET_NAME"]
	if _, err := e.Clients.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(objects.UploadKey(key, again.ID))}); err == nil {
		t.Errorf("the unchanged upload's bytes are still in the bucket")
	}
	one := int64(1)
	if _, err := c.Upload(ctx, key, bytes.NewReader(body[1:]), int64(len(body)-1), objectsclient.UploadOptions{ContentType: "application/x-test", IfMatch: &zero}); err == nil {
		t.Errorf("a create-only upload of other bytes over version 1 went through")
	}
	if vs, err := c.Versions(ctx, key); err != nil || len(vs) != 1 {
		t.Errorf("%d versions (%v), want 1", len(vs), err)
	}
	// A change uploaded on version 1, then again as it was.
	changed := append(bytes.Clone(body), "!"...)
	for i, wantUnchanged := range []bool{false, true} {
		st, err := c.Upload(ctx, key, bytes.NewReader(changed), int64(len(changed)), objectsclient.UploadOptions{ContentType: "application/x-test", IfMatch: &one})
		if err != nil || st.Version != 2 || st.Unchanged != wantUnchanged {
			t.Fatalf("change, attempt %d: %+v, %v; want version 2, unchanged %t", i+1, st, err, wantUnchanged)
		}
	}

	// Multipart, completed twice (the first answer lost), then once more
	// after the finalizer committed it.
	mkey := "retry/upload/multi.bin"
	big := objectstest.Random(17<<20, 17)
	g, err := c.BeginUpload(ctx, mkey, int64(len(big)), objectsclient.UploadOptions{SHA256: objects.SumOf(big).String()})
	if err != nil || g.Multipart == nil {
		t.Fatalf("grant: %+v %v; want a multipart upload", g.Multipart, err)
	}
	parts := make([]objectsapi.Part, len(g.Multipart.Parts))
	for i, p := range g.Multipart.Parts {
		off := int64(i) * g.Multipart.PartSize
		chunk := big[off:min(off+g.Multipart.PartSize, int64(len(big)))]
		req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(chunk))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range p.Header {
			if !strings.EqualFold(k, "Content-Length") {
				req.Header[k] = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("part %d: %s", i+1, resp.Status)
		}
		parts[i] = objectsapi.Part{Number: int32(i + 1), ETag: resp.Header.Get("ETag")}
	}
	complete := func() (int, objectsapi.UploadStatus) {
		t.Helper()
		in, _ := json.Marshal(objectsapi.CompleteRequest{Parts: parts})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.APIURL+g.Multipart.Complete, bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.APIClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st objectsapi.UploadStatus
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("complete: %d %s", resp.StatusCode, raw)
		}
		return resp.StatusCode, st
	}
	for i := range 2 {
		status, st := complete()
		t.Logf("complete, call %d: %d %s", i+1, status, st.State)
		ok := status == http.StatusAccepted && st.State == objectsapi.StatePending ||
			status == http.StatusOK && st.State == objectsapi.StateCommitted && st.Version == 1
		if !ok {
			t.Fatalf("complete, call %d: %d %+v; want 202 pending or 200 committed version 1", i+1, status, st)
		}
	}
	st, err := c.Wait(ctx, mkey, g.ID)
	if err != nil || st.Version != 1 {
		t.Fatalf("wait: %+v %v; want committed version 1", st, err)
	}
	if status, st := complete(); status != http.StatusOK || st.State != objectsapi.StateCommitted || st.Version != 1 {
		t.Fatalf("complete after the commit: %d %+v; want 200 committed version 1", status, st)
	}
	if vs, err := c.Versions(ctx, mkey); err != nil || len(vs) != 1 {
		t.Errorf("%d versions of %s (%v), want 1", len(vs), mkey, err)
	}
}

// A presigned upload of bytes a PUT already stored commits a version that
// references the stored blob (the finalizer's commit checks the blob's
// head), and the bucket still holds the bytes once.
func TestUploadOfStoredBytesSharesTheBlob(t *testing.T) {
	e, c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body := objectstest.Random(64<<10, 65)
	if _, err := c.Put(ctx, "shared/upload/a.bin", body, objectsclient.PutOptions{ContentType: "application/x-test"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Upload(ctx, "shared/upload/b.bin", bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{ContentType: "application/x-test"})
	if err != nil || st.State != objectsapi.StateCommitted || st.Version != 1 {
		t.Fatalf("upload: %+v, %v; want committed version 1", st, err)
	}
	got, err := c.Get(ctx, "shared/upload/b.bin", 0)
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("read back: %v (%d bytes)", err, len(got.Body))
	}
	blob := objects.ContentKey(objects.SumOf(body), int64(len(body)))
	out, err := e.Clients.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(e.Vars["OBJECTS_BUCKET_NAME"]), Prefix: aws.String(blob)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Versions) != 1 {
		t.Errorf("%d stored versions of %s, want the one the PUT wrote", len(out.Versions), blob)
	}
}
