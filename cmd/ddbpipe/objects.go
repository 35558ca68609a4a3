package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
)

// apiFlags are the flags of every command that calls the HTTP API (the
// objects commands, votes rejected).
type apiFlags struct {
	fs          *flag.FlagSet
	root, state *string
	api         *string
	identity    string // who signs on a local stack that judges IAM (asAPIRead, asAPIInvoke)
}

func newAPIFlags(name, identity string, stderr io.Writer) apiFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return apiFlags{
		fs:       fs,
		identity: identity,
		root:     fs.String("root", "", "repository root"),
		state:    fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)"),
		api:      fs.String("api", "", "API base URL (default: $API_URL or the local stack's)"),
	}
}

// client parses the flags and returns a client of the API and the one
// positional argument, the object key.
func (f apiFlags) client(ctx context.Context, args []string) (*objectsclient.Client, string, error) {
	if err := f.fs.Parse(args); err != nil {
		return nil, "", err
	}
	if f.fs.NArg() != 1 {
		return nil, "", fmt.Errorf("%s: want one object key after the flags", f.fs.Name())
	}
	c, err := f.connect(ctx)
	return c, f.fs.Arg(0), err
}

// connect returns a client of the API the flags, the environment or the
// local stack name.
func (f apiFlags) connect(ctx context.Context) (*objectsclient.Client, error) {
	cfg, api, err := f.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	return objectsclient.NewSigned(api, cfg, nil)
}

// endpoint is the HTTP API's base URL (-api, else $API_URL or the local
// stack's) and the AWS config to sign its requests with: SigV4
// (execute-api) from the standard credential chain, the local stack's key
// and region first, as f.identity on a local stack that judges IAM.
func (f apiFlags) endpoint(ctx context.Context) (aws.Config, string, error) {
	dir, err := findRoot(*f.root)
	if err != nil {
		dir = ""
	}
	getenv, err := stackEnv(dir, *f.state, f.identity)
	if err != nil {
		return aws.Config{}, "", err
	}
	api := *f.api
	if api == "" {
		api = getenv("API_URL")
	}
	if api == "" {
		return aws.Config{}, "", errors.New("no API URL: pass -api, export API_URL, or run `ddbpipe local up`")
	}
	cfg, err := cliAWS(ctx, getenv)
	return cfg, api, err
}

func objectsPut(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects put", asAPIInvoke, stderr)
	file := f.fs.String("file", "-", "file to store (- for stdin)")
	ct := f.fs.String("type", "", "content type (default application/octet-stream)")
	ifMatch := f.fs.Int64("if-match", -1, "store only if this is the latest version (0: only if the object does not exist)")
	table := f.fs.Bool("table", false, "keep the document in DynamoDB (chunked if need be), not S3")
	c, key, err := f.client(ctx, args)
	if err != nil {
		return err
	}
	body, err := readInput(*file)
	if err != nil {
		return err
	}
	o := objectsclient.PutOptions{ContentType: *ct, KeepInTable: *table}
	switch {
	case *ifMatch == 0:
		o.CreateOnly = true
	case *ifMatch > 0:
		o.IfMatch = ifMatch
	}
	if len(body) > objectslambda.DefaultMaxBody && !*table {
		var im *int64
		if *ifMatch >= 0 {
			im = ifMatch
		}
		st, err := c.Upload(ctx, key, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{ContentType: *ct, IfMatch: im})
		if err != nil {
			return err
		}
		how := "uploaded"
		if st.Unchanged {
			how = unchangedNote
		}
		fmt.Fprintf(stdout, "%s: version %d (%d bytes, %s)\n", showKey(key), st.Version, st.Size, how)
		return nil
	}
	m, err := c.Put(ctx, key, body, o)
	if err != nil {
		return err
	}
	how := m.Kind
	if m.Unchanged {
		how = unchangedNote
	}
	fmt.Fprintf(stdout, "%s: version %d (%d bytes, %s)\n", showKey(key), m.Version, m.Size, how)
	return nil
}

func objectsUpload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects upload", asAPIInvoke, stderr)
	file := f.fs.String("file", "", "file to upload (required)")
	ct := f.fs.String("type", "", "content type (default application/octet-stream)")
	ifMatch := f.fs.Int64("if-match", -1, "commit only if this is the latest version then (0: only if the object does not exist)")
	c, key, err := f.client(ctx, args)
	if err != nil {
		return err
	}
	if *file == "" {
		return errors.New("objects upload: -file is required")
	}
	fh, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return err
	}
	o := objectsclient.UploadOptions{ContentType: *ct}
	if *ifMatch >= 0 {
		o.IfMatch = ifMatch
	}
	st, err := c.Upload(ctx, key, fh, info.Size(), o)
	if err != nil {
		return err
	}
	if st.Unchanged {
		fmt.Fprintf(stdout, "%s: version %d (%d bytes, %s; upload %s)\n", showKey(key), st.Version, st.Size, unchangedNote, st.ID)
		return nil
	}
	fmt.Fprintf(stdout, "%s: version %d (%d bytes, upload %s)\n", showKey(key), st.Version, st.Size, st.ID)
	return nil
}

// unchangedNote is how put and upload say that the latest version already
// held the document, so nothing was written (the API's X-Object-Unchanged).
const unchangedNote = "unchanged: the latest version already holds these bytes"

func objectsGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects get", asAPIRead, stderr)
	version := f.fs.Int64("version", 0, "version to read (default: the latest)")
	out := f.fs.String("o", "-", "output file (- for stdout)")
	rng := f.fs.String("range", "", "read only these bytes: `a-b` (from byte a to byte b, both counted from 0), a- (to the end) or -n (the last n)")
	c, key, err := f.client(ctx, args)
	if err != nil {
		return err
	}
	if *rng != "" {
		off, n, err := cliRange(*rng)
		if err != nil {
			return err
		}
		p, err := c.GetRange(ctx, key, *version, off, n)
		if err != nil {
			return err
		}
		if err := writeOutput(*out, p.Body, stdout); err != nil {
			return err
		}
		if *out != "-" {
			fmt.Fprintf(stderr, "%s: version %d, bytes %d-%d of %d, %s → %s\n", showKey(key), p.Version, p.Off, p.Off+int64(len(p.Body))-1, p.Size, p.ContentType, *out)
		}
		return nil
	}
	o, err := c.Get(ctx, key, *version)
	if err != nil {
		return err
	}
	if err := writeOutput(*out, o.Body, stdout); err != nil {
		return err
	}
	if *out != "-" {
		fmt.Fprintf(stderr, "%s: version %d, %d bytes, %s → %s\n", showKey(key), o.Version, o.Size, o.ContentType, *out)
	}
	return nil
}

// cliRange reads -range (a-b, a- or -n, as a Range header's bytes= takes
// them) into GetRange's offset and length.
func cliRange(v string) (off, n int64, err error) {
	spec, ok, err := objects.ParseRange("bytes=" + v)
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("objects get: -range %q: %w", v, err)
	case !ok:
		return 0, 0, fmt.Errorf("objects get: -range %q: want a-b, a- or -n", v)
	case spec.IsSuffix && spec.Suffix == 0:
		return 0, 0, fmt.Errorf("objects get: -range %q names no byte: want -n with n at least 1", v)
	case spec.IsSuffix:
		return -spec.Suffix, objectsclient.ToEnd, nil
	case spec.Last < 0:
		return spec.First, objectsclient.ToEnd, nil
	case spec.Last-spec.First+1 <= 0: // a last byte that saturated
		return spec.First, objectsclient.ToEnd, nil
	}
	return spec.First, spec.Last - spec.First + 1, nil
}

func writeOutput(file string, body []byte, stdout io.Writer) error {
	if file == "-" {
		_, err := stdout.Write(body)
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

func objectsVersions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects versions", asAPIRead, stderr)
	asJSON := f.fs.Bool("json", false, "print JSON")
	c, key, err := f.client(ctx, args)
	if err != nil {
		return err
	}
	vs, err := c.Versions(ctx, key)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(vs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSIZE\tKIND\tTYPE\tMODIFIED\tSHA256")
	for _, v := range vs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%.16s…\n", v.Version, v.Size, v.Kind, v.ContentType, v.Modified.Format("2006-01-02 15:04:05"), v.SHA256)
	}
	return tw.Flush()
}

func objectsLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects ls", asAPIRead, stderr)
	recursive := f.fs.Bool("r", false, "list every key under the prefix, not the next level's folders")
	asJSON := f.fs.Bool("json", false, "print one JSON object per line: an object, or {\"prefix\":…} for a folder")
	page := f.fs.Int("page", objects.DefaultListLimit, "keys asked per request (1 to 1000)")
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 1 {
		return fmt.Errorf("objects ls: want at most one prefix after the flags, got %d arguments", f.fs.NArg())
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	o := objectsclient.ListOptions{Delimiter: "/", PageSize: *page}
	if *recursive {
		o.Delimiter = ""
	}
	enc := json.NewEncoder(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	n := 0
	for it, err := range c.List(ctx, f.fs.Arg(0), o) {
		if err != nil {
			tw.Flush() // the rows listed before the error, if any
			return err
		}
		if n == 0 && !*asJSON {
			// The header once there is a row: not before an error.
			fmt.Fprintln(tw, "MODIFIED\tSIZE\tVERSION\tKEY")
		}
		n++
		switch {
		case *asJSON && it.Prefix != "":
			err = enc.Encode(map[string]string{"prefix": it.Prefix})
		case *asJSON:
			err = enc.Encode(it.Entry)
		case it.Prefix != "":
			fmt.Fprintf(tw, "\tPRE\t\t%s\n", showKey(it.Prefix))
		default:
			e := it.Entry
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", e.Modified.Format("2006-01-02 15:04:05"), e.Size, e.Version, showKey(e.Key))
		}
		if err != nil {
			return err
		}
	}
	if *asJSON {
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(stderr, "no objects under %q\n", f.fs.Arg(0))
	}
	return nil
}

func objectsRm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects rm", asAPIInvoke, stderr)
	ifMatch := f.fs.Int64("if-match", 0, "delete only if this is the latest version")
	c, key, err := f.client(ctx, args)
	if err != nil {
		return err
	}
	var im *int64
	if *ifMatch > 0 {
		im = ifMatch
	}
	v, err := c.Delete(ctx, key, im)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: deleted at version %d\n", showKey(key), v)
	return nil
}

func readInput(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(file)
}

// showKey is a key as the CLI prints it: as it is, or Go-quoted when it
// holds a character that does not print (a control, a format character
// such as a bidirectional override), begins or ends with a space, or
// begins with a quote, so every key printed reads back unambiguously.
func showKey(k string) string {
	if k == "" || k[0] == '"' || k[0] == ' ' || k[len(k)-1] == ' ' || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(k)
	}
	return k
}
