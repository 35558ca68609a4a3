package servers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseJavaMajor(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want int
	}{
		{"openjdk 17", "openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)\n", 17},
		{"temurin 25", "openjdk version \"25\" 2025-09-16 LTS\n", 25},
		{"early access", "openjdk version \"26-ea\" 2026-03-17\n", 26},
		{"java 8", "java version \"1.8.0_292\"\nJava(TM) SE Runtime Environment\n", 8},
		{"java 11 with JAVA_TOOL_OPTIONS", "Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version \"11.0.2\" 2019-01-15\n", 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJavaMajor(tt.out)
			if err != nil {
				t.Fatalf("parseJavaMajor: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
	if _, err := parseJavaMajor("bash: java: command not found"); err == nil {
		t.Error("parseJavaMajor of garbage: got nil error")
	}
}

func TestParseNodeMajor(t *testing.T) {
	tests := []struct {
		out     string
		want    int
		wantErr bool
	}{
		{out: "v20.20.2\n", want: 20},
		{out: "v22.0.0", want: 22},
		{out: "20.1.0", wantErr: true},
		{out: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseNodeMajor(tt.out)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseNodeMajor(%q) = %d, %v; want %d, error %t", tt.out, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRequiredVersion(t *testing.T) {
	gomod := []byte(`module ddbpipe/tools/versitygw

go 1.25.0

require github.com/versity/versitygw v1.8.0

require (
	github.com/versity/versitygw-extra v0.1.0 // indirect
	github.com/aws/aws-sdk-go-v2 v1.45.1 // indirect
)
`)
	got, err := requiredVersion(gomod, versitygwModule)
	if err != nil || got != "v1.8.0" {
		t.Errorf("got %q, %v; want v1.8.0", got, err)
	}
	got, err = requiredVersion(gomod, "github.com/aws/aws-sdk-go-v2")
	if err != nil || got != "v1.45.1" {
		t.Errorf("in a require block: got %q, %v; want v1.45.1", got, err)
	}
	if _, err := requiredVersion(gomod, "example.com/missing"); err == nil {
		t.Error("missing module: got nil error")
	}
}

func TestDigest(t *testing.T) {
	if digest([]byte("ab"), []byte("c")) == digest([]byte("a"), []byte("bc")) {
		t.Error("digest does not separate its parts")
	}
	if digest([]byte("x")) != digest([]byte("x")) {
		t.Error("digest is not deterministic")
	}
}

// TestInstallNPMStamp checks that npm runs only when the pinned files changed
// or node_modules is missing. PATH is emptied, so running npm fails.
func TestInstallNPMStamp(t *testing.T) {
	root := t.TempDir()
	pins := filepath.Join(root, "tools", "localstack")
	npmDir := filepath.Join(root, ".local", "npm")
	mustWrite(t, filepath.Join(pins, "package.json"), `{"name":"x"}`)
	mustWrite(t, filepath.Join(pins, "package-lock.json"), `{"lockfileVersion":3}`)
	mustWrite(t, filepath.Join(npmDir, "node_modules", ".package-lock.json"), `{}`)
	mustWrite(t, filepath.Join(npmDir, stampFile), digest([]byte(`{"name":"x"}`), []byte(`{"lockfileVersion":3}`))+"\n")
	t.Setenv("PATH", "")
	o := Options{Root: root, Log: &strings.Builder{}}

	if err := installNPM(t.Context(), o, "localstack", npmDir); err != nil {
		t.Fatalf("installed and stamped: %v, want no npm run", err)
	}

	mustWrite(t, filepath.Join(pins, "package-lock.json"), `{"lockfileVersion":3,"changed":true}`)
	if err := installNPM(t.Context(), o, "localstack", npmDir); err == nil || !strings.Contains(err.Error(), "npm ci") {
		t.Errorf("lock changed: got %v, want an npm ci error", err)
	}
	if _, err := os.Stat(filepath.Join(npmDir, stampFile)); err == nil {
		t.Error("stamp still there after a failed install")
	}

	mustWrite(t, filepath.Join(pins, "package-lock.json"), `{"lockfileVersion":3}`)
	mustWrite(t, filepath.Join(npmDir, stampFile), digest([]byte(`{"name":"x"}`), []byte(`{"lockfileVersion":3}`))+"\n")
	if err := os.RemoveAll(filepath.Join(npmDir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := installNPM(t.Context(), o, "localstack", npmDir); err == nil {
		t.Error("node_modules missing: got nil error, want an npm run")
	}
}

func TestStampMatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), stampFile)
	if stampMatches(path, "abc") {
		t.Error("missing stamp matches")
	}
	mustWrite(t, path, "abc\n")
	if !stampMatches(path, "abc") {
		t.Error("written stamp does not match")
	}
	if stampMatches(path, "abd") {
		t.Error("other sum matches")
	}
}

func mustWrite(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}
