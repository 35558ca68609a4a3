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
