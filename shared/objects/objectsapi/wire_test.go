package objectsapi

import "testing"

func TestContentRange(t *testing.T) {
	if got := ContentRange(10, 20, 100); got != "bytes 10-19/100" {
		t.Errorf("ContentRange(10, 20, 100) = %q", got)
	}
	tests := []struct {
		v                string
		start, end, size int64
		ok               bool
	}{
		{"bytes 0-0/1", 0, 1, 1, true},
		{"bytes 10-19/100", 10, 20, 100, true},
		{"bytes 99-99/100", 99, 100, 100, true},
		{"bytes 0-100/100", 0, 0, 0, false}, // past the end
		{"bytes 5-4/100", 0, 0, 0, false},   // reversed
		{"bytes */100", 0, 0, 0, false},     // a 416's
		{"bytes 1-2/*", 0, 0, 0, false},     // unknown size
		{"bytes 01-2/10", 0, 0, 0, false},   // not as written
		{"items 1-2/10", 0, 0, 0, false},
		{"bytes 1-2/10 trailing", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	}
	for _, tt := range tests {
		start, end, size, err := ParseContentRange(tt.v)
		if (err == nil) != tt.ok || start != tt.start || end != tt.end || size != tt.size {
			t.Errorf("ParseContentRange(%q) = %d, %d, %d, %v; want %d, %d, %d, ok %t", tt.v, start, end, size, err, tt.start, tt.end, tt.size, tt.ok)
		}
	}
}
