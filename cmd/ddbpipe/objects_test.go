package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
	"github.com/ddbpipe/ddbpipe/tests/openapicheck"
)

// TestObjectsCommands drives put, get, update (read-modify-write with a
// racing writer) and rm against the local stack's HTTP API.
func TestObjectsCommands(t *testing.T) {
	st := stacktest.Need(t) // skips (or fails under DDBPIPE_REQUIRE_STACK) without Java and Node
	ctx := context.Background()
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	env, err := stack.Up(ctx, stack.Options{Root: root, Setups: registry.All, Servers: st, StackName: fmt.Sprintf("cli-objects-%d", os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	if err := env.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The CLI talks to the API through a proxy that checks every answer
	// against docs/openapi.yaml.
	api := openapicheck.Load(t, root).Proxy(t, env.Vars["API_URL"])
	// The CLI signs its requests from the standard credential chain: here
	// the local stack's key and region (the racer below inherits them).
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} {
		t.Setenv(k, env.Vars[k])
	}
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append(args[:2:2], append([]string{"-api", api}, args[2:]...)...), &out, &errOut)
		if err != nil {
			t.Logf("ddbpipe %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String(), err
	}

	in := filepath.Join(t.TempDir(), "doc.txt")
	if err := os.WriteFile(in, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("objects", "put", "-file", in, "-type", "text/plain", "cli/doc.txt"); err != nil || !strings.Contains(out, "version 1") {
		t.Fatalf("put = %q, %v; want version 1", out, err)
	}
	// The same put again (a retry whose answer was lost) writes nothing.
	if out, err := cli("objects", "put", "-file", in, "-type", "text/plain", "-if-match", "0", "cli/doc.txt"); err != nil || !strings.Contains(out, "version 1") || !strings.Contains(out, "unchanged") {
		t.Fatalf("put again = %q, %v; want version 1, unchanged", out, err)
	}
	if out, err := cli("objects", "update", "-exec", "tr a-z A-Z", "cli/doc.txt"); err != nil || !strings.Contains(out, "version 2") {
		t.Fatalf("update = %q, %v; want version 2", out, err)
	}
	if out, err := cli("objects", "get", "cli/doc.txt"); err != nil || out != "HELLO\n" {
		t.Fatalf("get = %q, %v; want HELLO", out, err)
	}
	// -range: a-b, a- and -n, to stdout or a file.
	for _, tc := range []struct{ rng, want string }{{"1-3", "ELL"}, {"4-", "O\n"}, {"-2", "O\n"}, {"0-99", "HELLO\n"}} {
		if out, err := cli("objects", "get", "-range", tc.rng, "cli/doc.txt"); err != nil || out != tc.want {
			t.Fatalf("get -range %s = %q, %v; want %q", tc.rng, out, err, tc.want)
		}
	}
	if _, err := cli("objects", "get", "-range", "9-", "cli/doc.txt"); err == nil || !strings.Contains(err.Error(), "range-not-satisfiable") {
		t.Fatalf("get -range 9- of 6 bytes: err %v, want range-not-satisfiable", err)
	}
	// A document kept in the table in chunks: a range across a chunk
	// boundary, written to a file.
	big := make([]byte, 600<<10) // random: stored as it is, not gzip'd
	rand.Read(big)
	bigFile := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(bigFile, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("objects", "put", "-table", "-file", bigFile, "cli-range/chunked.bin"); err != nil || !strings.Contains(out, "chunked") {
		t.Fatalf("put -table = %q, %v; want chunked", out, err)
	}
	partFile := filepath.Join(t.TempDir(), "part.bin")
	from, to := 256<<10-100, 256<<10+99
	if _, err := cli("objects", "get", "-range", fmt.Sprintf("%d-%d", from, to), "-o", partFile, "cli-range/chunked.bin"); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(partFile); err != nil || !bytes.Equal(got, big[from:to+1]) {
		t.Fatalf("get -range %d-%d -o: %d bytes, %v; want the document's 200 bytes there", from, to, len(got), err)
	}

	// A writer that gets in between each read and write, once per marker:
	// this test binary, running TestRacerPut. Each racer writes its own
	// bytes ("racer-a", "racer-b"): the same bytes again would be no new
	// version (the API answers unchanged), so no race.
	t.Setenv(racerURL, api+"/objects/cli/doc.txt")
	racer := func(mark string) string {
		return "if [ ! -e " + mark + " ]; then touch " + mark + "; " + racerBody + "=racer-" + filepath.Base(mark) + " '" + os.Args[0] + "' -test.run='^TestRacerPut$' >/dev/null || exit 9; fi; cat; echo edited"
	}
	dir := t.TempDir()
	_, err = cli("objects", "update", "-exec", racer(filepath.Join(dir, "a")), "cli/doc.txt")
	if err == nil || !strings.Contains(err.Error(), "raise -retries") {
		t.Fatalf("update racing without retries: err %v, want a conflict that suggests -retries", err)
	}
	out, err := cli("objects", "update", "-retries", "2", "-exec", racer(filepath.Join(dir, "b")), "cli/doc.txt")
	if err != nil || !strings.Contains(out, "version 5") || !strings.Contains(out, "2 attempt(s)") {
		t.Fatalf("update racing with retries = %q, %v; want version 5 after 2 attempts", out, err)
	}
	if out, err := cli("objects", "get", "cli/doc.txt"); err != nil || out != "racer-bedited\n" {
		t.Fatalf("get = %q, %v; want the racer's version, edited", out, err)
	}
	if out, err := cli("objects", "versions", "cli/doc.txt"); err != nil || strings.Count(out, "\n") != 6 {
		t.Fatalf("versions = %q, %v; want a header and 5 versions", out, err)
	}
	if _, err := cli("objects", "update", "-exec", "exit 3", "cli/doc.txt"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("update with a failing command: err %v, want its exit status", err)
	}
	// ls: one level with folders, every key with -r, JSON lines.
	for _, k := range []string{"cli/a/1.txt", "cli/a/2.txt", "cli/b.txt"} {
		if _, err := cli("objects", "put", "-file", in, k); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := cli("objects", "ls", "cli/")
	if err != nil || !strings.Contains(ls, "PRE") || !strings.Contains(ls, "cli/a/") || !strings.Contains(ls, "cli/b.txt") || strings.Contains(ls, "cli/a/1.txt") {
		t.Fatalf("ls cli/ = %q, %v; want the folder cli/a/ and cli/b.txt, cli/doc.txt", ls, err)
	}
	lsr, err := cli("objects", "ls", "-r", "-json", "cli/")
	if err != nil || strings.Count(lsr, "\n") != 4 || !strings.Contains(lsr, `"key":"cli/a/2.txt"`) {
		t.Fatalf("ls -r -json cli/ = %q, %v; want 4 JSON lines", lsr, err)
	}
	if _, err := cli("objects", "rm", "cli/doc.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("objects", "get", "cli/doc.txt"); err == nil {
		t.Fatal("get after rm succeeded")
	}
	if lsr, err := cli("objects", "ls", "-r", "cli/"); err != nil || strings.Contains(lsr, "cli/doc.txt") {
		t.Fatalf("ls after rm = %q, %v; want cli/doc.txt gone", lsr, err)
	}

	// Every key S3's rule takes round-trips through the commands: put,
	// get, versions, ls with and without -r, rm.
	t.Run("keys", func(t *testing.T) {
		objectstest.RoundTripKeys(t, cliKeyClient(t, api), objectstest.S3Keys(objectstest.KeyCount(1000), 29), []string{"", "/"}, 8)
	})
}

// cliKeyClient drives a key round trip with the objects commands, each
// key after "--" as a user would write it.
func cliKeyClient(t *testing.T, api string) objectstest.KeyClient {
	dir := t.TempDir()
	var files atomic.Int64
	cli := func(ctx context.Context, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append(args[:2:2], append([]string{"-api", api}, args[2:]...)...), &out, &errOut)
		return out.String(), err
	}
	// number reads the last "<word> N" of a command's answer: the key
	// before it may hold anything.
	number := func(out, word string) (int64, error) {
		i := strings.LastIndex(out, word+" ")
		if i < 0 {
			return 0, fmt.Errorf("no %q in %q", word, out)
		}
		var n int64
		_, err := fmt.Sscanf(out[i+len(word)+1:], "%d", &n)
		return n, err
	}
	return objectstest.KeyClient{
		Put: func(ctx context.Context, key string, body []byte) (int64, error) {
			f := filepath.Join(dir, fmt.Sprintf("%d", files.Add(1)))
			if err := os.WriteFile(f, body, 0o644); err != nil {
				return 0, err
			}
			out, err := cli(ctx, "objects", "put", "-file", f, "-type", "text/plain", "--", key)
			if err != nil {
				return 0, err
			}
			return number(out, "version")
		},
		Get: func(ctx context.Context, key string, version int64) ([]byte, error) {
			out, err := cli(ctx, "objects", "get", "-version", fmt.Sprint(version), "--", key)
			return []byte(out), err
		},
		Versions: func(ctx context.Context, key string) ([]int64, error) {
			out, err := cli(ctx, "objects", "versions", "-json", "--", key)
			if err != nil {
				return nil, err
			}
			var ms []struct{ Version int64 }
			if err := json.Unmarshal([]byte(out), &ms); err != nil {
				return nil, err
			}
			var vs []int64
			for _, m := range ms {
				vs = append(vs, m.Version)
			}
			return vs, nil
		},
		List: func(ctx context.Context, prefix, delimiter string) (keys, prefixes []string, err error) {
			args := []string{"objects", "ls", "-json"}
			switch delimiter {
			case "":
				args = append(args, "-r")
			case "/":
			default:
				return nil, nil, fmt.Errorf("objects ls lists by '/' only, not %q", delimiter)
			}
			out, err := cli(ctx, append(args, "--", prefix)...)
			if err != nil {
				return nil, nil, err
			}
			dec := json.NewDecoder(strings.NewReader(out))
			for dec.More() {
				var line struct{ Key, Prefix string }
				if err := dec.Decode(&line); err != nil {
					return nil, nil, err
				}
				if line.Prefix != "" {
					prefixes = append(prefixes, line.Prefix)
				} else {
					keys = append(keys, line.Key)
				}
			}
			return keys, prefixes, nil
		},
		Delete: func(ctx context.Context, key string) (int64, error) {
			out, err := cli(ctx, "objects", "rm", "--", key)
			if err != nil {
				return 0, err
			}
			return number(out, "version")
		},
		IsNotFound: objectsclient.IsNotFound,
	}
}

// racerURL names the document TestRacerPut overwrites, racerBody what it
// writes there.
const (
	racerURL  = "DDBPIPE_TEST_RACER_URL"
	racerBody = "DDBPIPE_TEST_RACER_BODY"
)

// TestRacerPut is the racing writer of TestObjectsCommands, which runs this
// test binary with racerURL and racerBody set: it stores the body there, as
// a client elsewhere would (no curl needed). Otherwise it skips.
func TestRacerPut(t *testing.T) {
	url := os.Getenv(racerURL)
	if url == "" {
		t.Skip("the racing writer of TestObjectsCommands, run by it")
	}
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(os.Getenv(racerBody)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl --data-binary sends
	cfg, err := awsenv.FromVars(t.Context(), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := sigv4.Client(cfg, url, nil) // the API wants SigV4
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("PUT %s = %d", url, resp.StatusCode)
	}
}
