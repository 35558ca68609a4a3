package servers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseModDownload(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []string // paths
		wantErr string
	}{
		{name: "two modules", out: `{"Path":"a.example/x","Version":"v1.0.0","Dir":"/m/x","Sum":"h1:x="}
{"Path":"b.example/y","Version":"v0.1.0","Dir":"/m/y","Sum":"h1:y="}`, want: []string{"a.example/x", "b.example/y"}},
		{name: "a module's error", out: `{"Path":"a.example/x","Version":"v9.9.9","Error":"not found"}`, wantErr: "not found"},
		{name: "not json", out: `go: bad`, wantErr: "read go mod download"},
		{name: "nothing", out: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mods, err := parseModDownload([]byte(tt.out))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range mods {
				got = append(got, m.Path)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestInstallZincSearch builds the engine (once per cache: minutes the
// first time) and checks a second install is only a stamp check.
func TestInstallZincSearch(t *testing.T) {
	requireStackTools(t)
	o, err := Options{Root: repoRoot(t), Log: testLog{t}, CacheDir: os.Getenv("DDBPIPE_TEST_ZINC_CACHE")}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := installZincSearch(t.Context(), o)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if want := filepath.Join(o.CacheDir, "bin", "zincsearch-"+zincVersion); bin != want {
		t.Errorf("binary %s, want %s", bin, want)
	}
	began := time.Now()
	again, err := installZincSearch(t.Context(), o)
	if err != nil || again != bin {
		t.Fatalf("second install: %s, %v", again, err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("second install took %s: it should only check the stamp", took)
	}
	if !stampMatches(bin+".stamp", zincRecipeDigest()) {
		t.Error("no stamp of the recipe beside the binary")
	}
}

// The recipe drops the forced GC at the end of each WAL tick, and stops
// the build when the file no longer reads as the recipe expects.
func TestDropForcedGC(t *testing.T) {
	tick := "\t\tdelete(indexes, name)\n\t\t}\n\n" + zincForcedGC + "\t}\n}\n"
	for _, tt := range []struct {
		name, file, want, wantErr string
	}{
		{name: "the tick's GC", file: tick, want: "\t\t_ = runtime.GC // left to GOGC (ddbpipe's build)\n"},
		{name: "none", file: "\t\truntime.Gosched()\n", wantErr: "0 forced GCs"},
		{name: "two", file: tick + zincForcedGC, wantErr: "2 forced GCs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := zincBuild{work: t.TempDir()}
			path := filepath.Join(b.src("zincsearch"), "pkg", "core", "index_shards_wallist.go")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			err := b.dropForcedGC()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			got, rerr := os.ReadFile(path)
			if err != nil || rerr != nil || strings.Contains(string(got), "runtime.GC()") || !strings.Contains(string(got), tt.want) {
				t.Errorf("got %v, %v:\n%s", err, rerr, got)
			}
		})
	}
}

// TestZincSearchCores: the engine's command names its cores only when
// asked, and then overrides a GOMAXPROCS it would inherit.
func TestZincSearchCores(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7")
	for _, c := range []struct {
		cores int
		want  string
	}{{0, "7"}, {1, "1"}, {2, "2"}} {
		cmd := zincSpec(&installation{zincsearch: "zincsearch"}, t.TempDir(), c.cores).command(4080)
		got := ""
		for _, kv := range cmd.Env { // the last of a key's values wins, as for exec
			if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
				got = v
			}
		}
		if got != c.want {
			t.Errorf("cores %d: GOMAXPROCS=%q, want %q", c.cores, got, c.want)
		}
	}
}
