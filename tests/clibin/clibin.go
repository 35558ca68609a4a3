// Package clibin gives tests the ddbpipe CLI as a command to run: the
// binary make test builds, else one built for the test.
package clibin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Path is the ddbpipe the docs' examples and the bad command lines run:
// $DDBPIPE_BIN (make test builds it; a relative path is from the
// repository's root) or one built into tmp from root. It is named ddbpipe
// in a folder of its own, so that folder can go on a PATH.
func Path(t testing.TB, root, tmp string) string {
	t.Helper()
	dir := filepath.Join(tmp, "bin")
	if bin := os.Getenv("DDBPIPE_BIN"); bin != "" {
		abs := bin // relative: to the repository's root, where make runs
		if !filepath.IsAbs(bin) {
			abs = filepath.Join(root, bin)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// On the PATH under its own name, whatever DDBPIPE_BIN is called.
		if err := os.Symlink(abs, filepath.Join(dir, "ddbpipe")); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "ddbpipe")
	}
	bin := filepath.Join(dir, "ddbpipe")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/ddbpipe")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/ddbpipe: %v\n%s", err, out)
	}
	return bin
}
