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
