package archive_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

func TestNumberValidate(t *testing.T) {
	tests := []struct {
		in  string
		bad bool
	}{
		{in: "0"}, {in: "-0"}, {in: "42"}, {in: "-3.14159"},
		{in: "12345678901234567890.123456789"}, {in: "99999999999999999999999999999999999999"},
		{in: "1E+125"}, {in: "-1E-130"}, {in: "0.10"}, {in: "+7"}, {in: ".5"}, {in: "-.5"}, {in: "5."},
		{in: "5.e3"}, {in: "007"},
		{in: "", bad: true}, {in: "-", bad: true}, {in: ".", bad: true}, {in: "+-1", bad: true},
		{in: "1.2.3", bad: true}, {in: "1e", bad: true}, {in: "1e+-3", bad: true}, {in: "1e1234567", bad: true},
		{in: "NaN", bad: true}, {in: "Inf", bad: true}, {in: "0x10", bad: true}, {in: "1 ", bad: true}, {in: "1,5", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			err := archive.Number(tt.in).Validate()
			if tt.bad != (err != nil) {
				t.Fatalf("Validate(%q) = %v, want bad %v", tt.in, err, tt.bad)
			}
			if tt.bad && !errors.Is(err, archive.ErrUnsupportedValue) {
				t.Errorf("Validate(%q) = %v, want ErrUnsupportedValue", tt.in, err)
			}
		})
	}
}

func deep(n int) any {
	var v any = "leaf"
	for range n {
		v = []any{v}
	}
	return v
}

func TestImageJSON(t *testing.T) {
	tests := []struct {
		name    string
		img     archive.Item
		want    string
		wantErr error
	}{
		{name: "absent", img: nil, want: ""},
		{name: "empty", img: archive.Item{}, want: "{}"},
		{name: "scalars", img: archive.Item{
			"s": "héllo ✓", "n": archive.Number("12345678901234567890.123456789"), "b": []byte{0, 1, 0xff},
			"t": true, "f": false, "null": nil,
		}, want: `{"b":{"B":"AAH/"},"f":{"BOOL":false},"n":{"N":"12345678901234567890.123456789"},"null":{"NULL":true},"s":{"S":"héllo ✓"},"t":{"BOOL":true}}`},
		{name: "sets sorted", img: archive.Item{
			"ss": []string{"pear", "apple", "fig"},
			"ns": []archive.Number{"10", "-1.5", "2", "1E+2", ".5", "+7"},
			"bs": [][]byte{{2}, {1, 2}, {1}},
		}, want: `{"bs":{"BS":["AQ==","AQI=","Ag=="]},"ns":{"NS":["-1.5",".5","2","+7","10","1E+2"]},"ss":{"SS":["apple","fig","pear"]}}`},
		{name: "lists keep order, maps sorted", img: archive.Item{
			"l": []any{"b", archive.Number("1"), []any{}, map[string]any{"z": nil, "a": true}},
			"m": map[string]any{},
		}, want: `{"l":{"L":[{"S":"b"},{"N":"1"},{"L":[]},{"M":{"a":{"BOOL":true},"z":{"NULL":true}}}]},"m":{"M":{}}}`},
		{name: "escapes", img: archive.Item{"k\"\\": "<a&b>\n\t\x01\u2028"},
			want: "{\"k\\\"\\\\\":{\"S\":\"<a&b>\\n\\t\\u0001\u2028\"}}"},
		{name: "empty binary and string", img: archive.Item{"b": []byte{}, "s": ""}, want: `{"b":{"B":""},"s":{"S":""}}`},
		{name: "32 levels", img: archive.Item{"d": deep(31)}, want: `{"d":` + strings.Repeat(`{"L":[`, 31) + `{"S":"leaf"}` + strings.Repeat("]}", 31) + `}`},
		{name: "too deep", img: archive.Item{"d": deep(32)}, wantErr: archive.ErrUnsupportedValue},
		{name: "bad number", img: archive.Item{"m": map[string]any{"n": archive.Number("1,5")}}, wantErr: archive.ErrUnsupportedValue},
		{name: "bad number in set", img: archive.Item{"ns": []archive.Number{"1", "x"}}, wantErr: archive.ErrUnsupportedValue},
		{name: "float64 is not a plain value", img: archive.Item{"f": 1.5}, wantErr: archive.ErrUnsupportedValue},
		{name: "int is not a plain value", img: archive.Item{"l": []any{1}}, wantErr: archive.ErrUnsupportedValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := archive.ImageJSON(tt.img)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ImageJSON = %q, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ImageJSON\n got %s\nwant %s", got, tt.want)
			}
			if got != "" && !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
		})
	}
}

func TestImageJSONErrorNamesAttribute(t *testing.T) {
	_, err := archive.ImageJSON(archive.Item{"a": map[string]any{"b": []any{"x", 2.5}}})
	if err == nil || !strings.Contains(err.Error(), `"a.b[1]"`) {
		t.Fatalf("error %v does not name a.b[1]", err)
	}
}

func TestChecksumIgnoresSetOrderOnly(t *testing.T) {
	a := archive.Item{"pk": "p", "tags": []string{"x", "y"}, "ns": []archive.Number{"3", "1"}}
	b := archive.Item{"pk": "p", "tags": []string{"y", "x"}, "ns": []archive.Number{"1", "3"}}
	c := archive.Item{"pk": "p", "tags": []any{"x", "y"}, "ns": []archive.Number{"1", "3"}}
	ca, _ := archive.Checksum(a)
	cb, _ := archive.Checksum(b)
	if ca != cb {
		t.Errorf("same sets in another order: checksums %s and %s differ", ca, cb)
	}
	cc, _ := archive.Checksum(c)
	if cc == ca {
		t.Errorf("a list and a set with the same members share checksum %s; the JSON must tell them apart", cc)
	}
	if d, _ := archive.Checksum(archive.Item{"pk": "q"}); d == ca {
		t.Error("different images share a checksum")
	}
}

func TestKeyJSON(t *testing.T) {
	item := archive.Item{"pk": "poll#3", "sk": "voter#v1", "n": archive.Number("2")}
	tests := []struct {
		name    string
		keys    []string
		want    string
		wantErr bool
	}{
		{name: "hash and range", keys: []string{"sk", "pk"}, want: `{"pk":{"S":"poll#3"},"sk":{"S":"voter#v1"}}`},
		{name: "hash only", keys: []string{"pk"}, want: `{"pk":{"S":"poll#3"}}`},
		{name: "absent key", keys: []string{"pk", "nope"}, wantErr: true},
		{name: "no key names", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := archive.KeyJSON(item, tt.keys...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("KeyJSON err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("KeyJSON = %s, want %s", got, tt.want)
			}
		})
	}
}

func ExampleImageJSON() {
	img := archive.Item{
		"pk":     "poll#7",
		"votes":  archive.Number("12345678901234567890.5"),
		"tags":   []string{"b", "a"},
		"avatar": []byte("png"),
		"gone":   nil,
	}
	j, _ := archive.ImageJSON(img)
	fmt.Println(j)
	// Output: {"avatar":{"B":"cG5n"},"gone":{"NULL":true},"pk":{"S":"poll#7"},"tags":{"SS":["a","b"]},"votes":{"N":"12345678901234567890.5"}}
}
