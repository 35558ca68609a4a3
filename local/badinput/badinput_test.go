package badinput

import (
	"strings"
	"testing"
)

// The corpus holds at least 60 cases over the four entry points, each named
// once and saying what must become of it.
func TestCorpus(t *testing.T) {
	cases := Cases()
	if len(cases) < 60 {
		t.Errorf("%d cases, want at least 60", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.ID()] {
			t.Errorf("%s twice", c.ID())
		}
		seen[c.ID()] = true
		switch c.Entry {
		case HTTP:
			if c.Status < 400 || c.Method == "" || !strings.HasPrefix(c.Path, "/") {
				t.Errorf("%s: %s %s wanting %d", c.ID(), c.Method, c.Path, c.Status)
			}
		case SQS, Stream, CLI:
			if c.Want == "" {
				t.Errorf("%s: says nothing of what must become of it", c.ID())
			}
		default:
			t.Errorf("%s: unknown entry point", c.ID())
		}
	}
	n := Count()
	for _, e := range []string{SQS, HTTP, Stream, CLI} {
		if n[e] < 10 {
			t.Errorf("%s: %d cases, want at least 10", e, n[e])
		}
	}
	t.Log(Summary())
	if s := Summary(); !strings.Contains(s, "cases (") {
		t.Errorf("summary %q", s)
	}
}
