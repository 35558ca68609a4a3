package runner

import (
	"slices"
	"testing"
)

type writes [][]byte

func (w *writes) Write(p []byte) (int, error) {
	*w = append(*w, append([]byte(nil), p...))
	return len(p), nil
}

func TestLinesPassesWholeLines(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"one line", []string{"a\n"}, []string{"a\n"}},
		{"a line in pieces", []string{"a", "b", "c\n"}, []string{"abc\n"}},
		{"lines and a piece", []string{"a\nb\nc", "d\n"}, []string{"a\nb\n", "cd\n"}},
		{"a piece at the exit", []string{"a\nb"}, []string{"a\n", "b\n"}},
		{"nothing", nil, nil},
		{"empty lines", []string{"\n\n"}, []string{"\n\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out writes
			l := &lines{out: &out}
			for _, c := range tt.chunks {
				if n, err := l.Write([]byte(c)); n != len(c) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", c, n, err)
				}
			}
			l.flush()
			var got []string
			for _, w := range out {
				got = append(got, string(w))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
}
