package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGitignoreCoversBinaries: whatever `go build` leaves of a main
// package is ignored, so it cannot be committed by mistake. Built in its
// folder, a package leaves a binary named as the folder there; built from
// the root (go build ./functions/tally), one named the same at the root,
// unless a folder there has the name (go build refuses then). What the
// package is made of stays seen.
func TestGitignoreCoversBinaries(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.Dir}}{{end}}`, "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	ignored := func(path string) bool {
		return exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", path).Run() == nil
	}
	mains := 0
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		name := filepath.Base(dir)
		mains++
		if !ignored(rel + "/" + name) {
			t.Errorf(".gitignore does not cover %s/%s (go build in %s); add /%s/%s", rel, name, rel, rel, name)
		}
		if fi, err := os.Stat(filepath.Join(root, name)); (err != nil || !fi.IsDir()) && !ignored(name) {
			t.Errorf(".gitignore does not cover %s (go build ./%s at the root); add /%s", name, rel, name)
		}
		if ignored(rel + "/main.go") {
			t.Errorf(".gitignore hides %s/main.go", rel)
		}
	}
	if mains == 0 {
		t.Fatal("go list found no main package")
	}
}

// TestREADMEGoVersion: the Go the README asks for is go.mod's.
func TestREADMEGoVersion(t *testing.T) {
	root := repoRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	asked := regexp.MustCompile(`(?m)^- Go (\d+\.\d+)(?:\.\d+)? or newer`).FindSubmatch(readme)
	if asked == nil {
		t.Fatal(`README.md: no "- Go N.N or newer" among the prerequisites`)
	}
	if string(asked[1]) != string(m[1]) {
		t.Errorf("README.md asks for Go %s, go.mod says go %s", asked[1], m[1])
	}
}
