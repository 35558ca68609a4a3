package docs

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/tests/clibin"
)

// The shell examples of README.md and docs/*.md are tests (docs/local.md,
// "The examples in these pages are tests", says how to write them):
//
//	```sh              run, in order, in one bash session per page
//	```text            right after a run block: its expected standard output
//	```sh aws          needs an AWS account: bash -n only
//	```sh norun: why   not run (bash -n only); keep these few
//
// TestDocsExamplesParse checks every page's blocks without a stack;
// TestDocs runs them with testscript on one local stack started with
// `ddbpipe local up`, the page's own command.

var docsPage = flag.String("docs.page", "", "TestDocs: run only this page (after README.md), e.g. docs/objects.md")

// docPages are the pages in the order they run: the README's tour on a
// fresh stack first, then the readers' pages. A page added under docs/ and
// not named here runs last.
// docPages run in this order on one stack; docs/operators.md goes last,
// as its month's-end walk-through moves the clock and starts this month over.
var docPages = []string{"README.md", "docs/producers.md", "docs/objects.md", "docs/search.md", "docs/analysts.md",
	"docs/deploying.md", "docs/local.md", "docs/design.md", "docs/operators.md"}

// docBlock is one fenced block of a page.
type docBlock struct {
	page   string
	line   int    // of the opening fence, 1-based
	lang   string // the info string's first word
	tag    string // the rest: "aws", "norun: reason", ""
	body   string
	expect *docBlock // the text block that follows a run block
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// runs reports whether the test runs the block.
func (b docBlock) runs() bool { return b.shell() && b.tag == "" }

func (b docBlock) shell() bool { return b.lang == "sh" || b.lang == "bash" }

// parseDocBlocks reads the fenced blocks of a Markdown page, pairing each
// run block with the text block right after it (blank lines between).
func parseDocBlocks(page, text string) ([]docBlock, error) {
	var blocks []docBlock
	var cur *docBlock
	var body []string
	fence := ""
	// adjacent: only blank lines since the previous block closed.
	adjacent, curAdjacent := false, false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			switch {
			case strings.HasPrefix(trimmed, "```"):
				fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
				lang, tag, _ := strings.Cut(strings.TrimSpace(trimmed[len(fence):]), " ")
				cur = &docBlock{page: page, line: n, lang: lang, tag: strings.TrimSpace(tag)}
				curAdjacent, body = adjacent, nil
			case trimmed != "":
				adjacent = false
			}
			continue
		}
		if trimmed == fence {
			cur.body = strings.Join(body, "\n") + "\n"
			if prev := len(blocks) - 1; cur.lang == "text" && curAdjacent && prev >= 0 && blocks[prev].runs() && blocks[prev].expect == nil {
				blocks[prev].expect = cur
			} else {
				blocks = append(blocks, *cur)
			}
			cur, adjacent = nil, true
			continue
		}
		body = append(body, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a fenced block that never closes", page, cur.line)
	}
	for _, b := range blocks {
		if !b.shell() {
			continue
		}
		switch {
		case b.tag == "", b.tag == "aws":
		case strings.HasPrefix(b.tag, "norun:") && strings.TrimSpace(strings.TrimPrefix(b.tag, "norun:")) != "":
		default:
			return nil, fmt.Errorf("%s: ```%s %s: want no tag, \"aws\" or \"norun: <reason>\"", b.where(), b.lang, b.tag)
		}
	}
	return blocks, nil
}

// allDocPages lists docPages, then any other page of docs/.
func allDocPages(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := slices.Clone(docPages)
	for _, f := range found {
		if rel := "docs/" + filepath.Base(f); !slices.Contains(pages, rel) {
			pages = append(pages, rel)
		}
	}
	return pages
}

func readDocBlocks(t *testing.T, page string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), page))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseDocBlocks(page, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestDocsExamplesParse needs no stack: every page's fences close, every
// shell block is valid bash with a known tag, and every text block that
// expects an output follows a run block.
func TestDocsExamplesParse(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	counts := map[string]int{}
	for _, page := range allDocPages(t) {
		for _, b := range readDocBlocks(t, page) {
			if !b.shell() {
				continue
			}
			switch {
			case b.runs():
				counts["run"]++
			case b.tag == "aws":
				counts["aws"]++
			default:
				counts["norun"]++
			}
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = strings.NewReader(b.body)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: bash -n: %v\n%s", b.where(), err, out)
			}
		}
	}
	if counts["run"] == 0 {
		t.Fatal("no runnable example found: the pages or the parser changed")
	}
	t.Logf("shell examples: %d run by TestDocs, %d need AWS (bash -n only), %d not run (bash -n only)", counts["run"], counts["aws"], counts["norun"])
}

func TestDocMatch(t *testing.T) {
	for _, c := range []struct {
		name, want, got string
		ok              bool
	}{
		{"same", "a\nb\n", "a\nb\n", true},
		{"trailing spaces", "a  b\n", "a  b   \n\n", true},
		{"one line differs", "a\nb\n", "a\nc\n", false},
		{"missing line", "a\nb\n", "a\n", false},
		{"extra line", "a\n", "a\nb\n", false},
		{"inline wildcard", "sent … votes to …\n", "sent 10 votes to http://x\n", true},
		{"inline wildcard, wrong end", "total …0\n", "total 11\n", false},
		{"wildcard lines", "a\n…\nz\n", "a\nb\nc\nz\n", true},
		{"wildcard lines, none", "a\n…\nz\n", "a\nz\n", true},
		{"wildcard lines at the end", "a\n…\n", "a\nb\n", true},
		{"wildcard lines, order kept", "a\n…\nz\n", "z\na\n", false},
		{"indented wildcard lines", "a\n  …\nz\n", "a\n  b\n  c\nz\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := docMatch(c.want, c.got); (err == nil) != c.ok {
				t.Errorf("docMatch(%q, %q) = %v, want ok %v", c.want, c.got, err, c.ok)
			}
		})
	}
}

// docLines splits an output into lines, trailing spaces and blank lines at
// the end dropped.
func docLines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// docLineMatch matches one line against a pattern where … is any text.
func docLineMatch(pattern, line string) bool {
	parts := strings.Split(pattern, "…")
	if len(parts) == 1 {
		return pattern == line
	}
	if !strings.HasPrefix(line, parts[0]) {
		return false
	}
	line = line[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(line, p)
		if i < 0 {
			return false
		}
		line = line[i+len(p):]
	}
	return strings.HasSuffix(line, last)
}

// docMatch checks an output against a documented one: lines one for one,
// … inside a line any text, a line of … alone any number of lines.
func docMatch(want, got string) error {
	w, g := docLines(want), docLines(got)
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		var ok bool
		switch {
		case i == len(w):
			ok = j == len(g)
		case strings.TrimSpace(w[i]) == "…":
			ok = match(i+1, j) || j < len(g) && match(i, j+1)
		default:
			ok = j < len(g) && docLineMatch(w[i], g[j]) && match(i+1, j+1)
		}
		memo[k] = ok
		return ok
	}
	if match(0, 0) {
		return nil
	}
	// Name the first documented line that no output line after the last
	// match could stand for, to point at the drift.
	j := 0
	for _, p := range w {
		if strings.TrimSpace(p) == "…" {
			continue
		}
		for j < len(g) && !docLineMatch(p, g[j]) {
			j++
		}
		if j == len(g) {
			return fmt.Errorf("no output line matches the documented line %q (in order)", p)
		}
		j++
	}
	return fmt.Errorf("the output has lines the documentation does not show")
}

// TestDocs runs every page's examples against one local stack.
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the docs' examples on a local stack (-short)")
	}
	require := os.Getenv("DDBPIPE_REQUIRE_STACK") == "1"
	for _, tool := range []string{"bash", "curl", "jq", "aws", "shasum"} {
		if _, err := exec.LookPath(tool); err != nil {
			if require {
				t.Fatalf("the docs' examples need %s on the PATH (README: Prerequisites)", tool)
			}
			t.Skipf("the docs' examples need %s", tool)
		}
	}
	// The pages name "this month" (date -u) and expect its tables.
	stacktest.AfterMonthTurn(t, 10*time.Minute)
	root := repoRoot(t)
	tmp := t.TempDir()
	bin := clibin.Path(t, root, tmp)
	state := filepath.Join(tmp, "state")
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	stopStack := startDocsStack(t, bin, root, state, stacktest.Need(t), require)

	pages := allDocPages(t)
	if *docsPage != "" {
		pages = []string{"README.md", *docsPage}
	}
	scripts := filepath.Join(tmp, "scripts")
	if err := os.MkdirAll(scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, page := range pages {
		blocks := readDocBlocks(t, page)
		script, n := docScript(page, blocks)
		if n == 0 {
			continue
		}
		ran += n
		file := filepath.Join(scripts, strings.NewReplacer("/", "_", ".md", "").Replace(page)+".txtar")
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		// One page after another (t.Run waits for testscript's parallel
		// subtest): the pages share the stack, and the README's tour runs
		// on a fresh one.
		t.Run(page, func(t *testing.T) {
			testscript.Run(t, testscript.Params{
				Files: []string{file},
				Setup: func(e *testscript.Env) error {
					for _, name := range []string{"template.yaml", "events", "schemas"} {
						if err := os.Symlink(filepath.Join(root, name), filepath.Join(e.WorkDir, name)); err != nil {
							return err
						}
					}
					if err := os.Symlink(state, filepath.Join(e.WorkDir, ".ddbpipe")); err != nil {
						return err
					}
					e.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
					e.Setenv("HOME", home)
					e.Setenv("LANG", "C.UTF-8")
					e.Setenv("AWS_PAGER", "")
					return nil
				},
				Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
					// docmatch WANT GOT WHERE: GOT matches the documented WANT.
					"docmatch": func(ts *testscript.TestScript, neg bool, args []string) {
						if len(args) != 3 {
							ts.Fatalf("usage: docmatch want got where")
						}
						want, got := ts.ReadFile(args[0]), ts.ReadFile(args[1])
						if err := docMatch(want, got); err != nil {
							ts.Fatalf("%s: the output drifted from the documented one: %v\n--- documented\n%s--- got\n%s--- got, quoted\n%q", args[2], err, want, got, got)
						}
					},
				},
			})
		})
		if t.Failed() {
			break // the pages after build on the same stack
		}
	}
	if err := stopStack(); err != nil {
		t.Error(err)
	}
	t.Logf("%d runnable examples run, in %d pages", ran, len(pages))
}

// docScript makes a page's runnable blocks into one testscript: page.sh
// sources each block in one bash session, each block's standard output
// into its own file, and docmatch checks the documented ones.
func docScript(page string, blocks []docBlock) (string, int) {
	var sh, checks, files strings.Builder
	sh.WriteString("set -Eeuo pipefail\n")
	sh.WriteString("trap 'rc=$?; echo \"docs: the example at $DOC_BLOCK failed (exit $rc); its output:\" >&2; cat \"$DOC_OUT\" >&2' ERR\n")
	n := 0
	for _, b := range blocks {
		if !b.runs() {
			continue
		}
		n++
		name := fmt.Sprintf("b%02d", n)
		fmt.Fprintf(&sh, "DOC_BLOCK=%q DOC_OUT=%s.out\necho \"== $DOC_BLOCK\" >&2\n. ./%s.sh > %s.out\n", b.where(), name, name, name)
		fmt.Fprintf(&files, "-- %s.sh --\n%s", name, b.body)
		if b.expect != nil {
			fmt.Fprintf(&checks, "docmatch %s.want %s.out %s\n", name, name, b.where())
			fmt.Fprintf(&files, "-- %s.want --\n%s", name, b.expect.body)
		}
	}
	if n == 0 {
		return "", 0
	}
	return fmt.Sprintf("# The runnable examples of %s, in order.\nexec bash page.sh\n%s-- page.sh --\n%s%s", page, checks.String(), sh.String(), files.String()), n
}

// startDocsStack runs `ddbpipe local up` as the README says, on the
// servers `make test` shares (-attach: no other stack there is named
// ddbpipe, and the pages read only their own stack's tables, buckets and
// queues), and returns what stops it the way the pages do: `ddbpipe local
// down`, which drops the stack's tables.
func startDocsStack(t *testing.T, bin, root, state string, st *servers.Stack, require bool) func() error {
	t.Helper()
	logPath := filepath.Join(state, "local-up.log")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// The stack's variables come from its local.env only: not from the
	// servers `make test` exported, which the CLI would read first.
	// DDBPIPE_ENFORCE_IAM and DDBPIPE_IAM_RECORDS configure the stack
	// itself: they stay (make test checks the IAM records of every stack).
	var env []string
	for _, kv := range os.Environ() {
		iamVar := strings.HasPrefix(kv, "DDBPIPE_ENFORCE_IAM=") || strings.HasPrefix(kv, "DDBPIPE_IAM_RECORDS=")
		if iamVar || !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "DDBPIPE_") {
			env = append(env, kv)
		}
	}
	// Shorter batching windows than the template's (5 and 10 s) keep the
	// pages' waits short; the examples' outputs do not depend on them.
	up := exec.Command(bin, "local", "up", "-attach", "-root", root, "-state-dir", state,
		"-param", "CounterBatchingWindowSeconds=1", "-param", "ArchiveBatchingWindowSeconds=1")
	up.Env, up.Stdout, up.Stderr = slices.Clone(env), logf, logf
	for k, v := range st.Vars() {
		up.Env = append(up.Env, k+"="+v) // local up's alone: the pages' commands read local.env
	}
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait(); logf.Close() }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		down := exec.Command(bin, "local", "down", "-state-dir", state)
		down.Env = env
		out, err := down.CombinedOutput()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
			<-exited
			return fmt.Errorf("`ddbpipe local down` did not stop `local up` within 30s: %v\n%s", err, out)
		}
		if err != nil {
			return fmt.Errorf("ddbpipe local down: %v\n%s", err, out)
		}
		return nil
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(state, "local.pid")); err == nil {
			return stop
		}
		select {
		case err := <-exited:
			stopped = true
			log, _ := os.ReadFile(logPath)
			if require {
				t.Fatalf("ddbpipe local up ended: %v\n%s", err, log)
			}
			t.Skipf("ddbpipe local up did not start (no Java or Node?): %v\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("ddbpipe local up not ready after 3 minutes:\n%s", log)
		}
	}
}

func TestParseDocBlocks(t *testing.T) {
	page := "# p\n\n```sh\necho hi\n```\n\n```text\nhi\n```\n\nprose\n\n```text\nnot an output\n```\n\n```sh aws\naws s3 ls\n```\n```text\nnot checked\n```\n\n```sh norun: too slow\nmake soak\n```\n\n````md\n```sh\nnested\n```\n````\n"
	blocks, err := parseDocBlocks("p.md", page)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range blocks {
		s := fmt.Sprintf("%d %s %q runs=%v", b.line, b.lang, b.tag, b.runs())
		if b.expect != nil {
			s += fmt.Sprintf(" expect=%q", b.expect.body)
		}
		got = append(got, s)
	}
	want := []string{
		`3 sh "" runs=true expect="hi\n"`,
		`13 text "" runs=false`,
		`17 sh "aws" runs=false`,
		`20 text "" runs=false`,
		`24 sh "norun: too slow" runs=false`,
		`28 md "" runs=false`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"```sh\nx\n", "```sh maybe\nx\n```\n", "```sh norun:\nx\n```\n"} {
		if _, err := parseDocBlocks("bad.md", bad); err == nil {
			t.Errorf("parseDocBlocks(%q): no error", bad)
		}
	}
}
