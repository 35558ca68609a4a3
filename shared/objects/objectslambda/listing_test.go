package objectslambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
)

// Listing through the API, as a client sees it: the objects under a
// prefix, in key order, across pages; folders with a delimiter; a deleted
// object gone from the listing; the client's iterator merges both.
func TestListThroughTheAPI(t *testing.T) {
	_, c := newClient(t)
	ctx := context.Background()
	root := "ls-api/"
	var want []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 45 {
		key := fmt.Sprintf("%sdocs/%03d.txt", root, i)
		want = append(want, key)
		wg.Go(func() {
			if _, err := c.Put(ctx, key, []byte("body "+key), objectsclient.PutOptions{ContentType: "text/plain"}); err != nil {
				mu.Lock()
				t.Error(err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, k := range []string{root + "photos/cat.png", root + "top.md", root + "gone.txt"} {
		if _, err := c.Put(ctx, k, []byte("x"), objectsclient.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, root+"gone.txt", nil); err != nil {
		t.Fatal(err)
	}

	var got []string
	for it, err := range c.List(ctx, root+"docs/", objectsclient.ListOptions{PageSize: 10}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, it.Entry.Key)
		if it.Entry.Size == 0 || it.Entry.Version != 1 || len(it.Entry.SHA256) != 64 || it.Entry.ContentType != "text/plain" {
			t.Errorf("entry %+v", it.Entry)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d keys %v, want %d in order", len(got), got, len(want))
	}
	var level []string
	for it, err := range c.List(ctx, root, objectsclient.ListOptions{Delimiter: "/"}) {
		if err != nil {
			t.Fatal(err)
		}
		level = append(level, it.Prefix+it.Entry.Key)
	}
	if w := []string{root + "docs/", root + "photos/", root + "top.md"}; !slices.Equal(level, w) {
		t.Errorf("one level: %v, want %v", level, w)
	}
}

// Bad listing requests get a 400 with the reason, whatever the client.
func TestListRefusesBadQueries(t *testing.T) {
	e, _ := newClient(t)
	hc := e.APIClient() // signed, as the AWS_IAM routes require
	for _, tt := range []struct {
		query string
		want  string
	}{
		{"prefix=a%00b", "bad-prefix"},
		{"prefix=" + strings.Repeat("p", 1025), "bad-prefix"},
		{"delimiter=%00", "bad-delimiter"},
		{"delimiter=ab", "bad-delimiter"},
		{"limit=0", "bad-limit"},
		{"limit=1001", "bad-limit"},
		{"limit=ten", "bad-limit"},
		{"cursor=not-a-cursor", "bad-cursor"},
		{"prefix=a&cursor=" + url.QueryEscape(firstCursor(t, hc, e.APIURL, "b")), "bad-cursor"},
		{"marker=x", objectsapi.ReasonBadQuery},
	} {
		resp, err := hc.Get(e.APIURL + "/objects?" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		var body apigw.ErrorBody
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = json.Unmarshal(raw, &body)
		if resp.StatusCode != http.StatusBadRequest || body.Error != tt.want || body.Message == "" {
			t.Errorf("?%s: %d %s, want 400 %s", tt.query, resp.StatusCode, raw, tt.want)
		}
	}
}

// firstCursor lists one key under prefix (after storing two there) and
// returns the page's cursor.
func firstCursor(t *testing.T, hc *http.Client, api, prefix string) string {
	t.Helper()
	for _, k := range []string{prefix + "/1", prefix + "/2"} {
		req, _ := http.NewRequest(http.MethodPut, api+"/objects/"+k, strings.NewReader("x"))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := hc.Get(api + "/objects?limit=1&prefix=" + url.QueryEscape(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l objectsapi.Listing
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || l.Cursor == "" {
		t.Fatalf("listing of %s: %v %+v", prefix, err, l)
	}
	return l.Cursor
}
