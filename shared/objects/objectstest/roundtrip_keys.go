package objectstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// KeyClient is a client of the objects API as a key round trip drives it:
// the Go client, the CLI, or raw signed HTTP, one request a call.
type KeyClient struct {
	Put      func(ctx context.Context, key string, body []byte) (version int64, err error)
	Get      func(ctx context.Context, key string, version int64) ([]byte, error) // 0: the latest
	Versions func(ctx context.Context, key string) ([]int64, error)               // newest first
	// List follows the cursors to the end: the keys and the common
	// prefixes, in the order the API gave them.
	List       func(ctx context.Context, prefix, delimiter string) (keys, prefixes []string, err error)
	Delete     func(ctx context.Context, key string) (version int64, err error)
	IsNotFound func(error) bool
}

// RoundTripKeys proves that every key round-trips through c: each is put
// twice (two versions, n and n+1: a key deleted before starts past its
// last version), read at the latest version and at version n, its
// versions listed, found in listings (in byte order, with and without each
// of delimiters, under prefixes cut from the keys), deleted, and then gone.
// The API may hold other keys: the listings are checked against every key
// it lists. workers requests run at once.
func RoundTripKeys(t *testing.T, c KeyClient, keys, delimiters []string, workers int) {
	t.Helper()
	ctx := context.Background()
	body := func(key string, v int64) []byte { return fmt.Appendf(nil, "v%d of %q", v, key) }
	each := func(step string, fn func(key string) error) { t.Helper(); forEachKey(t, keys, workers, step, fn) }
	var mu sync.Mutex
	first := map[string]int64{} // the version of each key's first put
	each("put", func(k string) error {
		v, err := c.Put(ctx, k, []byte("first"))
		if err != nil {
			return err
		}
		got, err := c.Put(ctx, k, body(k, v+1))
		if err != nil {
			return err
		}
		if got != v+1 {
			return fmt.Errorf("put made version %d, then %d", v, got)
		}
		mu.Lock()
		first[k] = v
		mu.Unlock()
		return nil
	})
	each("get and versions", func(k string) error {
		mu.Lock()
		v := first[k]
		mu.Unlock()
		for _, tt := range []struct {
			version int64
			want    string
		}{{0, string(body(k, v+1))}, {v, "first"}} {
			got, err := c.Get(ctx, k, tt.version)
			if err != nil {
				return fmt.Errorf("get version %d: %w", tt.version, err)
			}
			if string(got) != tt.want {
				return fmt.Errorf("get version %d: %q, want %q", tt.version, got, tt.want)
			}
		}
		vs, err := c.Versions(ctx, k)
		if err != nil {
			return fmt.Errorf("versions: %w", err)
		}
		if len(vs) < 2 || vs[0] != v+1 || vs[1] != v {
			return fmt.Errorf("versions %v, want [%d %d …]", vs, v+1, v)
		}
		return nil
	})

	all, listings := checkListings(t, c, keys, delimiters)
	t.Logf("%d keys: put twice, read, versions; %d listings checked against %d listed keys", len(keys), listings, len(all))

	each("delete", func(k string) error {
		v, err := c.Delete(ctx, k)
		if err != nil {
			return err
		}
		mu.Lock()
		want := first[k] + 1
		mu.Unlock()
		if v != want {
			return fmt.Errorf("deleted version %d, want %d", v, want)
		}
		if _, err := c.Get(ctx, k, 0); !c.IsNotFound(err) {
			return fmt.Errorf("get after the delete: %v, want not found", err)
		}
		return nil
	})
	listUntil(t, c, func(listed []string) bool {
		for _, k := range listed {
			if slices.Contains(keys, k) {
				return false
			}
		}
		return true
	})
}

// checkListings waits for the listing index to hold every key (it follows
// the table within moments), then checks the API's listings, under
// prefixes cut from the keys and with each delimiter, against S3's listing
// of everything listed. It returns everything listed and how many
// listings it checked.
func checkListings(t *testing.T, c KeyClient, keys, delimiters []string) (all []string, listings int) {
	t.Helper()
	ctx := context.Background()
	all = listUntil(t, c, func(listed []string) bool { return subset(keys, listed) })
	if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Fatal("the listing of everything is not in strictly increasing byte order")
	}
	for _, prefix := range samplePrefixes(keys) {
		for _, d := range delimiters {
			gotKeys, gotPrefixes, err := c.List(ctx, prefix, d)
			if err != nil {
				t.Fatalf("list prefix %q delimiter %q: %v", prefix, d, err)
			}
			wantKeys, wantPrefixes := S3Listing(all, prefix, d)
			if !slices.Equal(gotKeys, wantKeys) || !slices.Equal(gotPrefixes, wantPrefixes) {
				t.Errorf("list prefix %q delimiter %q: %d keys and %d prefixes, want %d and %d (S3's listing of the %d keys listed)",
					prefix, d, len(gotKeys), len(gotPrefixes), len(wantKeys), len(wantPrefixes), len(all))
			}
			listings++
		}
	}
	return all, listings
}

// forEachKey runs fn for every key, workers at once, and fails the test
// with the first failures (step names what fn does).
func forEachKey(t *testing.T, keys []string, workers int, step string, fn func(key string) error) {
	t.Helper()
	var mu sync.Mutex
	var failed []string
	work := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range work {
				if err := fn(k); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%.80q: %.300s", k, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	if len(failed) > 0 {
		slices.Sort(failed)
		t.Fatalf("%s: %d of %d keys failed; the first: %s", step, len(failed), len(keys), strings.Join(failed[:min(len(failed), 5)], "; "))
	}
}

// listUntil lists every key until done says the listing is as wanted,
// for up to a minute, and returns the last listing.
func listUntil(t *testing.T, c KeyClient, done func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		listed, _, err := c.List(context.Background(), "", "")
		if err != nil {
			t.Fatalf("list everything: %v", err)
		}
		if done(listed) {
			return listed
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listing of everything (%d keys) is not as wanted after a minute", len(listed))
		}
		time.Sleep(time.Second)
	}
}

func subset(keys, of []string) bool {
	in := make(map[string]bool, len(of))
	for _, k := range of {
		in[k] = true
	}
	for _, k := range keys {
		if !in[k] {
			return false
		}
	}
	return true
}

// samplePrefixes are listing prefixes cut from the keys: none, the first
// byte, half and all of every 40th key (at a character boundary), and a few
// odd ones.
func samplePrefixes(keys []string) []string {
	out := []string{"", "/", ".", "a", " ", "#"}
	for i := 0; i < len(keys); i += 40 {
		k := keys[i]
		for _, n := range []int{1, len(k) / 2, len(k)} {
			for n > 0 && n < len(k) && !utf8.RuneStart(k[n]) {
				n--
			}
			if n > 0 {
				out = append(out, k[:n])
			}
		}
	}
	return unique(out)
}

// S3Listing is what S3's ListObjectsV2 answers for keys (sorted): the
// keys under prefix, and with a delimiter the keys that hold it after the
// prefix rolled up into their common prefixes, once each.
func S3Listing(keys []string, prefix, delimiter string) (entries, prefixes []string) {
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if i := strings.Index(rest, delimiter); delimiter != "" && i >= 0 {
			cp := prefix + rest[:i+len(delimiter)]
			if len(prefixes) == 0 || prefixes[len(prefixes)-1] != cp {
				prefixes = append(prefixes, cp)
			}
			continue
		}
		entries = append(entries, k)
	}
	return entries, prefixes
}
