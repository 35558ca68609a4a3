package pngchart

import (
	"bytes"
	"image/png"
	"math"
	"testing"
)

func TestWritePNG(t *testing.T) {
	var buf bytes.Buffer
	c := Chart{Title: "requests per write", Unit: "req", Bars: []Bar{{"inline", 1}, {"s3", 2.5}, {"zero", 0}}}
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 3*18 {
		t.Errorf("image is %v, too small for 3 bars", b)
	}
}

func TestWritePNGRejects(t *testing.T) {
	for name, c := range map[string]Chart{
		"no bars":  {Title: "x"},
		"NaN":      {Title: "x", Bars: []Bar{{"a", math.NaN()}}},
		"negative": {Title: "x", Bars: []Bar{{"a", -1}}},
	} {
		if err := c.WritePNG(&bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestTimelineWritePNG(t *testing.T) {
	tl := Timeline{Title: "soak", XUnit: "s",
		Series: []Series{{Name: "votes", Unit: "votes/s", Values: []float64{0, 10, 30, 20}}, {Name: "faults", Unit: "/s", Values: []float64{1, 0, 2, 0}}},
		Marks:  []Mark{{At: 1, Kind: "kill"}, {At: 2.5, Kind: "restart"}, {At: 3, Kind: "kill"}}}
	var buf bytes.Buffer
	if err := tl.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// The first series' line reaches its maximum at step 2: its colour is
	// drawn at the top of the first panel, somewhere.
	b := img.Bounds()
	found := false
	for x := b.Min.X; x < b.Max.X && !found; x++ {
		for y := b.Min.Y; y < b.Max.Y/2; y++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == 0x1f && g>>8 == 0x77 && bl>>8 == 0xb4 {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("no line of the first series in the upper half")
	}
	for name, bad := range map[string]Timeline{
		"one step": {Title: "x", Series: []Series{{Name: "a", Values: []float64{1}}}},
		"NaN":      {Title: "x", Series: []Series{{Name: "a", Values: []float64{1, math.NaN()}}}},
	} {
		if err := bad.WritePNG(&bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
