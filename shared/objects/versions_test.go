package objects

import (
	"fmt"
	"slices"
	"sort"
	"testing"
)

func TestSortKey(t *testing.T) {
	tests := []struct {
		name    string
		version int64
		want    string
	}{
		{"latest", 0, "v0"},
		{"first", 1, "v0000000001"},
		{"ten", 10, "v0000000010"},
		{"last", MaxVersion, "v9999999999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SortKey(tt.version)
			if got != tt.want {
				t.Fatalf("SortKey(%d) = %q, want %q", tt.version, got, tt.want)
			}
			back, err := ParseSortKey(got)
			if err != nil || back != tt.version {
				t.Errorf("ParseSortKey(%q) = %d, %v; want %d", got, back, err, tt.version)
			}
		})
	}
}

// String order of the sort keys is version order, v0 first: a Query on
// begins_with(sk, "v") returns the latest copy, then the history oldest first.
func TestSortKeysSortAsVersions(t *testing.T) {
	versions := []int64{0, 1, 2, 9, 10, 11, 99, 100, 1_000_000, MaxVersion}
	keys := make([]string, len(versions))
	for i, v := range versions {
		keys[i] = SortKey(v)
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("sort keys %v are not in version order", keys)
	}
}

func TestParseSortKeyRejects(t *testing.T) {
	for _, sk := range []string{"", "v", "c", "v00", "v1", "v-000000001", "v0000000000", "v000000001a", "V0000000001", "v00000000001", "x0000000001", "v+000000001"} {
		t.Run(fmt.Sprintf("%q", sk), func(t *testing.T) {
			if v, err := ParseSortKey(sk); err == nil {
				t.Errorf("ParseSortKey(%q) = %d, want an error", sk, v)
			}
		})
	}
}

func TestSortKeyPanicsOutOfRange(t *testing.T) {
	for _, v := range []int64{-1, MaxVersion + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SortKey(%d) did not panic", v)
				}
			}()
			SortKey(v)
		}()
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"9999999999", MaxVersion, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"10000000000", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
		{"abc", 0, false},
		{" 1", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseVersion(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseVersion(%q) = %d, %v; want %d, ok %t", tt.in, got, err, tt.want, tt.ok)
			}
			if !tt.ok && ReasonOf(err) != ReasonBadVersion {
				t.Errorf("reason %q, want %q", ReasonOf(err), ReasonBadVersion)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name    string
		history []int64
		latest  int64
		max     int
		want    []int64
	}{
		{"under the limit", []int64{1, 2, 3}, 3, 5, nil},
		{"at the limit", []int64{1, 2, 3}, 3, 3, nil},
		{"one over", []int64{1, 2, 3, 4}, 4, 3, []int64{1}},
		{"many over", []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 12, 10, []int64{1, 2}},
		{"gaps from earlier prunes", []int64{5, 6, 9, 12, 13}, 13, 2, []int64{5, 6, 9}},
		{"unsorted with duplicates", []int64{4, 2, 3, 2, 1, 4}, 4, 2, []int64{1, 2}},
		{"max below 1 keeps the latest", []int64{1, 2, 3}, 3, 0, []int64{1, 2}},
		{"newer than latest never pruned", []int64{1, 2, 3, 4, 5}, 3, 1, []int64{1, 2}},
		{"latest missing from an eventually consistent list", []int64{1, 2, 3}, 4, 2, []int64{1}},
		{"empty", nil, 7, 3, nil},
		{"zero and negatives ignored", []int64{-1, 0, 1, 2}, 2, 1, []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.history)
			got := Prune(tt.history, tt.latest, tt.max)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Prune(%v, %d, %d) = %v, want %v", tt.history, tt.latest, tt.max, got, tt.want)
			}
			if !slices.Equal(in, tt.history) {
				t.Errorf("Prune changed its input to %v", tt.history)
			}
			if slices.Contains(got, tt.latest) {
				t.Errorf("Prune deletes the latest version %d", tt.latest)
			}
		})
	}
}
