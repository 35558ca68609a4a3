package lambdafn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// near reports whether t is within a second of want.
func near(t, want time.Time) bool { d := t.Sub(want); return d > -time.Second && d < time.Second }

// A rehearsal's clock file moves the clock, and moving it again moves
// every clock read after; without the variable the clock is the real one.
func TestClockFile(t *testing.T) {
	if c := NewVars(func(string) string { return "" }).Clock(); !near(c(), time.Now()) {
		t.Errorf("no clock file: %s, want now", c())
	}
	path := filepath.Join(t.TempDir(), "offset")
	if err := WriteClockOffset(path, -720*time.Hour); err != nil {
		t.Fatal(err)
	}
	v := NewVars(func(k string) string { return map[string]string{ClockFileVar: path}[k] })
	clock := v.Clock()
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	if got := clock(); !near(got, time.Now().Add(-720*time.Hour)) {
		t.Errorf("clock %s, want 30 days back", got)
	}
	if err := WriteClockOffset(path, 49*time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := clock(); !near(got, time.Now().Add(49*time.Hour)) {
		t.Errorf("after the move: %s, want 49 hours ahead", got)
	}
	// A file that goes bad later leaves the last offset in force.
	if err := os.WriteFile(path, []byte("soon"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := clock(); !near(got, time.Now().Add(49*time.Hour)) {
		t.Errorf("after a bad write: %s, want the last offset kept", got)
	}
}

func TestClockFileErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("yesterday\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"missing": "/nonexistent/offset", "not a duration": bad} {
		v := NewVars(func(string) string { return path })
		if c := v.Clock(); !near(c(), time.Now()) {
			t.Errorf("%s: the clock is not the real one", name)
		}
		if err := v.Err(); err == nil || !strings.Contains(err.Error(), ClockFileVar) {
			t.Errorf("%s: error %v, want one naming %s", name, err, ClockFileVar)
		}
	}
}
