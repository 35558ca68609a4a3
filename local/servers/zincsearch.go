package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The ZincSearch pin: the engine's module and the profiler module it needs
// in place of its own (github.com/pyroscope-io/godeltaprof v0.1.2 does not
// compile on Go ≥ 1.22), each checked against its go.sum hash. Changing
// any of these, or zincRecipe, rebuilds the binary.
const (
	zincModule          = "github.com/zincsearch/zincsearch"
	zincVersion         = "v0.4.10"
	zincSum             = "h1:24Cz/qPDIEY9EEmNCy3D0/7pV6rPZHzhAsle9mAwKO8="
	godeltaprofModule   = "github.com/grafana/pyroscope-go/godeltaprof"
	godeltaprofVersion  = "v0.1.12"
	godeltaprofSum      = "h1:X6OemT2WcLtxdmNukEQuIp0c+efWVI/tBTd0oeWeDHI="
	godeltaprofOldPath  = "github.com/pyroscope-io/godeltaprof"
	zincPlaceholderPage = "<!doctype html><title>ZincSearch</title><p>ddbpipe's local ZincSearch: no web UI is built; use the API.\n"
	// zincRecipe names the build steps below; bump it when they change.
	zincRecipe = "zincsearch-recipe-2: copy module, web/dist placeholder, godeltaprof renamed and replaced, no forced GC per WAL tick, CGO_ENABLED=0 -trimpath"
)

// ZincSearch's settings on the local stack.
const (
	// zincWALSyncInterval is how often ZincSearch makes its writes
	// searchable (its default is 1s). Measured here, a write is
	// searchable 245 ms after its bulk at 250ms (1 s at the default), and
	// an idle engine takes 3.5 % of a core at 250ms against 7 % at 100ms.
	zincWALSyncInterval = 250 * time.Millisecond
)

// ZincWALSyncInterval is how long after a write ZincSearch makes it
// searchable, at most (plus the write's own time): the search proxy waits
// this long to honour refresh=wait_for.
func ZincWALSyncInterval() time.Duration { return zincWALSyncInterval }

// installZincSearch builds ZincSearch into CacheDir/bin/zincsearch-<version>
// from the Go module proxy, unless a binary built by the same recipe is
// there. The module is built in a writable copy: it embeds web/dist, which
// it does not ship (a placeholder page stands in), and its profiler
// dependency is replaced by a renamed copy of the newer module.
func installZincSearch(ctx context.Context, o Options) (string, error) {
	binDir := filepath.Join(o.CacheDir, "bin")
	bin := filepath.Join(binDir, "zincsearch-"+zincVersion)
	stamp, sum := bin+".stamp", zincRecipeDigest()
	if isExecutable(bin) && stampMatches(stamp, sum) {
		return bin, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: go not found: building ZincSearch (search) needs Go", ErrMissingTool)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	unlock, err := lockFile(filepath.Join(binDir, "zincsearch.lock"), o.Log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) && stampMatches(stamp, sum) { // built by another process while we waited
		return bin, nil
	}

	fmt.Fprintf(o.Log, "building ZincSearch %s into %s (first run: up to 5 minutes with empty Go caches)…\n", zincVersion, binDir)
	began := time.Now()
	// An interrupted build must not look complete.
	if err := os.Remove(stamp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("servers: %w", err)
	}
	work, err := os.MkdirTemp(binDir, ".build-zincsearch-")
	if err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	defer os.RemoveAll(work)
	b := zincBuild{goTool: goTool, work: work}
	if err := b.run(ctx); err != nil {
		return "", fmt.Errorf("servers: build ZincSearch %s: %w", zincVersion, err)
	}
	if err := os.Rename(b.out(), bin); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	if err := os.WriteFile(stamp, []byte(sum+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	fmt.Fprintf(o.Log, "ZincSearch built in %s\n", time.Since(began).Round(time.Second))
	return bin, nil
}

// zincRecipeDigest identifies the pin and the recipe: a binary stamped with
// another digest is rebuilt.
func zincRecipeDigest() string {
	return digest([]byte(zincModule), []byte(zincVersion), []byte(zincSum),
		[]byte(godeltaprofModule), []byte(godeltaprofVersion), []byte(godeltaprofSum),
		[]byte(zincPlaceholderPage), []byte(zincRecipe))
}

// zincBuild is one build of ZincSearch in a scratch folder.
type zincBuild struct {
	goTool, work string
}

func (b zincBuild) src(name string) string { return filepath.Join(b.work, "src", name) }
func (b zincBuild) out() string            { return filepath.Join(b.work, "zincsearch") }

func (b zincBuild) run(ctx context.Context) error {
	dirs, err := b.download(ctx)
	if err != nil {
		return err
	}
	if err := b.copyModule(dirs[zincModule], b.src("zincsearch")); err != nil {
		return err
	}
	if err := b.copyModule(dirs[godeltaprofModule], b.src("godeltaprof")); err != nil {
		return err
	}
	if err := b.placeholderUI(); err != nil {
		return err
	}
	if err := b.renameGodeltaprof(); err != nil {
		return err
	}
	if err := b.dropForcedGC(); err != nil {
		return err
	}
	return b.compile(ctx)
}

// goEnv is the environment of the go commands: no workspace, no cgo, and
// go.mod updated as the replacement needs.
func (b zincBuild) goEnv() []string {
	flags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -mod=mod")
	return append(environ("GOFLAGS=", "GOWORK=", "CGO_ENABLED="), "GOFLAGS="+flags, "GOWORK=off", "CGO_ENABLED=0")
}

// download fetches both pinned modules into the module cache and checks
// their hashes; it returns each module's folder.
func (b zincBuild) download(ctx context.Context) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, b.goTool, "mod", "download", "-json",
		zincModule+"@"+zincVersion, godeltaprofModule+"@"+godeltaprofVersion)
	cmd.Dir = b.work // outside any module
	cmd.Env = b.goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	mods, perr := parseModDownload(out)
	if err != nil || perr != nil {
		return nil, fmt.Errorf("go mod download: %w\n%s%s", errors.Join(err, perr), out, lastLines(stderr.String(), errorTail))
	}
	want := map[string]string{zincModule: zincSum, godeltaprofModule: godeltaprofSum}
	dirs := map[string]string{}
	for _, m := range mods {
		sum, ok := want[m.Path]
		if !ok {
			continue
		}
		if m.Sum != sum {
			return nil, fmt.Errorf("%s@%s has hash %s, pinned %s", m.Path, m.Version, m.Sum, sum)
		}
		dirs[m.Path] = m.Dir
	}
	for path := range want {
		if dirs[path] == "" {
			return nil, fmt.Errorf("go mod download gave no folder for %s", path)
		}
	}
	return dirs, nil
}

// modDownload is one module of `go mod download -json`.
type modDownload struct {
	Path, Version, Dir, Sum, Error string
}

// parseModDownload reads the JSON objects `go mod download -json` prints
// one after another; a module's own error is returned as an error.
func parseModDownload(out []byte) ([]modDownload, error) {
	var mods []modDownload
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m modDownload
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return mods, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read go mod download's output: %w", err)
		}
		if m.Error != "" {
			return nil, fmt.Errorf("%s@%s: %s", m.Path, m.Version, m.Error)
		}
		mods = append(mods, m)
	}
}

// copyModule copies a module from the (read-only) module cache; os.CopyFS
// makes the copies writable.
func (b zincBuild) copyModule(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}

// placeholderUI gives the module's //go:embed web/dist something to embed.
func (b zincBuild) placeholderUI() error {
	dist := filepath.Join(b.src("zincsearch"), "web", "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dist, "index.html"), []byte(zincPlaceholderPage), 0o644)
}

// renameGodeltaprof gives the copy of the newer godeltaprof the old module
// path (its own packages import each other by it too), and has ZincSearch
// build with it.
func (b zincBuild) renameGodeltaprof() error {
	dir := b.src("godeltaprof")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case d.Name() == "go.mod":
			return rewriteFile(path, func(s string) string {
				return strings.Replace(s, "module "+godeltaprofModule, "module "+godeltaprofOldPath, 1)
			})
		case strings.HasSuffix(d.Name(), ".go"):
			return rewriteFile(path, func(s string) string {
				return strings.ReplaceAll(s, `"`+godeltaprofModule, `"`+godeltaprofOldPath)
			})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rename godeltaprof: %w", err)
	}
	gomod := filepath.Join(b.src("zincsearch"), "go.mod")
	return rewriteFile(gomod, func(s string) string {
		return s + "\nreplace " + godeltaprofOldPath + " => ../godeltaprof\n"
	})
}

// zincForcedGC is the call that ends each of ZincSearch's WAL ticks: a full
// collection every zincWALSyncInterval, whether anything was written or
// not, whose cost grows with the index held in memory.
const zincForcedGC = "\t\t// force gc\n\t\truntime.GC()\n"

// dropForcedGC leaves collections to Go's pacer (GOGC) instead: the
// reference to runtime.GC that stays keeps the file's import in use.
func (b zincBuild) dropForcedGC() error {
	path := filepath.Join(b.src("zincsearch"), "pkg", "core", "index_shards_wallist.go")
	n := 0
	err := rewriteFile(path, func(s string) string {
		n = strings.Count(s, zincForcedGC)
		return strings.Replace(s, zincForcedGC, "\t\t_ = runtime.GC // left to GOGC (ddbpipe's build)\n", 1)
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("drop the forced GC: %s has %d forced GCs where the recipe expects 1", path, n)
	}
	return err
}

func rewriteFile(path string, edit func(string) string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(edit(string(data))), 0o644)
}

func (b zincBuild) compile(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, b.goTool, "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/zincsearch/zincsearch/pkg/meta.Version="+zincVersion,
		"-o", b.out(), "./cmd/zincsearch")
	cmd.Dir = b.src("zincsearch")
	cmd.Env = b.goEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, lastLines(string(out), errorTail))
	}
	return nil
}

// Search engine credentials: ZincSearch's first admin, created on its first
// start in a data folder, and required by every API call.
const (
	SearchUser     = AccessKeyID
	SearchPassword = SecretAccessKey
)

func zincSpec(inst *installation, dataDir string, cores int) serverSpec {
	return serverSpec{
		name:  SearchServer,
		title: "search (ZincSearch)",
		command: func(port int) *exec.Cmd {
			cmd := exec.Command(inst.zincsearch)
			// ZincSearch reads a .env file in its working folder.
			cmd.Dir = dataDir
			cmd.Env = append(environ("ZINC_", "GIN_MODE="),
				"ZINC_SERVER_ADDRESS=127.0.0.1",
				"ZINC_SERVER_PORT="+strconv.Itoa(port),
				"ZINC_DATA_PATH="+dataDir,
				"ZINC_FIRST_ADMIN_USER="+SearchUser,
				"ZINC_FIRST_ADMIN_PASSWORD="+SearchPassword,
				"ZINC_TELEMETRY=false",
				"ZINC_SENTRY=false",
				"ZINC_PROFILER=false",
				"ZINC_SWAGGER_ENABLE=false",
				"ZINC_WAL_SYNC_INTERVAL="+zincWALSyncInterval.String(),
				// One shard per index, as the project's indexes ask of
				// OpenSearch (ZincSearch ignores number_of_shards): with its
				// default 3, equal documents scored apart (their shards'
				// statistics differ) and every shard polls its WAL, 1/3 of
				// the idle CPU here (8 indexes: 3.4 % of a core).
				"ZINC_SHARD_NUM=1",
				"GIN_MODE=release",
			)
			if cores > 0 {
				cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(cores))
			}
			return cmd
		},
		ready: zincReady,
	}
}

// zincReady asks the Elasticsearch-compatible API's root, with the
// credentials, which only a started ZincSearch answers.
func zincReady(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/es/", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(SearchUser, SearchPassword)
	resp, err := probeHTTPClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /es/: %s", resp.Status)
	}
	return nil
}

// StartSearch installs the search engine if needed and starts it alone,
// for tests that need no other server (local/searchproxy's). Options.DataDir
// keeps its indexes under DataDir/zincsearch; Stop stops it.
func StartSearch(ctx context.Context, o Options) (*Stack, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	bin, err := installZincSearch(ctx, o)
	if err != nil {
		return nil, err
	}
	s := &Stack{log: o.Log, ready: o.ReadyTimeout}
	dirs, err := s.dataDirs(o.DataDir)
	if err != nil {
		return nil, err
	}
	p, err := startServer(ctx, o, zincSpec(&installation{zincsearch: bin}, dirs.search, o.SearchCores))
	if err != nil {
		return nil, errors.Join(err, s.removeTemp())
	}
	s.procs, s.Search = []*process{p}, p.url
	return s, nil
}
