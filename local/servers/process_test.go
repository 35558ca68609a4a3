package servers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 8}
	for _, s := range []string{"abc", "defg", "hij"} {
		fmt.Fprint(b, s)
	}
	if got, want := b.String(), "cdefghij"; got != want {
		t.Errorf("after small writes got %q, want %q", got, want)
	}
	fmt.Fprint(b, "0123456789")
	if got, want := b.String(), "23456789"; got != want {
		t.Errorf("after a write larger than the buffer got %q, want %q", got, want)
	}
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"", 3, ""},
	}
	for _, tt := range tests {
		if got := lastLines(tt.s, tt.n); got != tt.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tjava\nVmPeak:\t 3000 kB\nVmRSS:\t  120212 kB\nThreads:\t40\n"
	got, err := parseVmRSS(status)
	if err != nil || got != 120212*1024 {
		t.Errorf("got %d, %v; want %d", got, err, 120212*1024)
	}
	if _, err := parseVmRSS("Name:\tzombie\n"); err == nil {
		t.Error("no VmRSS line: got nil error")
	}
}

func TestEnvironDropsServerSettings(t *testing.T) {
	t.Setenv("VGW_PORT", ":1")
	t.Setenv("ROOT_ACCESS_KEY", "someone")
	t.Setenv("DDBPIPE_KEEP", "yes")
	env := environ("VGW_", "ROOT_ACCESS_KEY")
	for _, kv := range env {
		if strings.HasPrefix(kv, "VGW_") || strings.HasPrefix(kv, "ROOT_ACCESS_KEY") {
			t.Errorf("environ kept %s", kv)
		}
	}
	if !slices.Contains(env, "DDBPIPE_KEEP=yes") {
		t.Error("environ dropped DDBPIPE_KEEP")
	}
}
