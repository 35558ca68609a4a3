package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// The product does not carry its test tools: the CLI and the functions
// link no `testing` package, and no package of shared/ imports the local
// emulation (local/) outside its _test.go files.
func TestProductLinksNoTestTools(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "../cmd/ddbpipe", "../functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list named %d packages:\n%s", len(deps), out)
	}
	for _, pkg := range deps {
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
			t.Errorf("the CLI or a function links %s", pkg)
		}
	}

	out, err = exec.Command("go", "list", "-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", "../shared/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/ddbpipe/ddbpipe/"
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list named %d packages under shared/:\n%s", len(lines), out)
	}
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, module+"local/") {
				t.Errorf("%s imports %s", strings.TrimPrefix(pkg, module), strings.TrimPrefix(imp, module))
			}
		}
	}
}

// Every arrow points down. Below the module's top, a folder links only
// what lies beneath it:
//
//	shared/     only shared/ (the product)
//	functions/  shared/
//	local/      shared/ and local/ (the local AWS; never deployed)
//	cmd/        shared/, and of local/ only the packages cliLocal names:
//	            the CLI's `local` commands and its demo run the local stack
//
// internal/ (the bench's and the soak's charts) and tools/ (pinned
// third-party tools, no package of this module) are linked by neither.
func TestLayoutArrowsPointDown(t *testing.T) {
	t.Parallel()
	// cliLocal is every local/ package the CLI links, directly or not.
	cliLocal := map[string]bool{
		"local/cfn":         true,
		"local/faultproxy":  true,
		"local/httpapi":     true,
		"local/iam":         true,
		"local/provision":   true,
		"local/registry":    true,
		"local/runner":      true,
		"local/schedule":    true,
		"local/searchproxy": true,
		"local/servers":     true,
		"local/stack":       true,
	}
	rules := []struct {
		pattern string
		allowed func(rel string) bool
	}{
		{"../shared/...", func(rel string) bool { return under(rel, "shared") }},
		{"../functions/...", func(rel string) bool { return under(rel, "shared") || under(rel, "functions") }},
		{"../local/...", func(rel string) bool { return under(rel, "shared") || under(rel, "local") }},
		{"../cmd/...", func(rel string) bool { return under(rel, "shared") || under(rel, "cmd") || cliLocal[rel] }},
	}
	for _, r := range rules {
		t.Run(strings.Trim(r.pattern, "./"), func(t *testing.T) {
			for _, rel := range moduleDeps(t, r.pattern) {
				if !r.allowed(rel) {
					t.Errorf("%s links %s", r.pattern, rel)
				}
			}
		})
	}
}

// moduleDeps lists, relative to the module, every package of the module
// that the packages matching pattern link (test files aside).
func moduleDeps(t *testing.T, pattern string) []string {
	t.Helper()
	const module = "github.com/ddbpipe/ddbpipe/"
	out, err := exec.Command("go", "list", "-deps", pattern).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, out)
	}
	var rels []string
	for _, pkg := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(pkg, module); ok {
			rels = append(rels, rel)
		}
	}
	if len(rels) == 0 {
		t.Fatalf("go list -deps %s named no package of the module:\n%s", pattern, out)
	}
	return rels
}

func under(rel, folder string) bool {
	return rel == folder || strings.HasPrefix(rel, folder+"/")
}
