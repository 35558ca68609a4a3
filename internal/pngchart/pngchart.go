// Package pngchart draws the small bar charts of the benchmark report as
// PNG files, with nothing but the standard library and a bitmap font.
package pngchart

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Bar is one labelled value.
type Bar struct {
	Label string
	Value float64
}

// Chart is a horizontal bar chart.
type Chart struct {
	Title string
	Unit  string // printed after each value
	Bars  []Bar
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
}

const (
	lineH   = 13 // basicfont.Face7x13 line height
	charW   = 7
	barH    = 18
	gap     = 8
	margin  = 12
	barArea = 360
)

// WritePNG renders the chart.
func (c Chart) WritePNG(w io.Writer) error {
	if len(c.Bars) == 0 {
		return fmt.Errorf("pngchart: %q has no bars", c.Title)
	}
	labelW := 0
	maxV := 0.0
	for _, b := range c.Bars {
		labelW = max(labelW, len(b.Label)*charW)
		if math.IsNaN(b.Value) || math.IsInf(b.Value, 0) || b.Value < 0 {
			return fmt.Errorf("pngchart: %q: bar %q has value %v", c.Title, b.Label, b.Value)
		}
		maxV = max(maxV, b.Value)
	}
	valueW := 16 * charW
	width := margin*3 + labelW + barArea + valueW
	width = max(width, margin*2+len(c.Title)*charW)
	height := margin*2 + lineH + gap + len(c.Bars)*(barH+gap)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text(img, margin, margin+lineH-3, c.Title)
	y := margin + lineH + gap
	for i, b := range c.Bars {
		text(img, margin, y+barH-5, b.Label)
		x0 := margin*2 + labelW
		n := 0
		if maxV > 0 {
			n = int(math.Round(b.Value / maxV * barArea))
		}
		draw.Draw(img, image.Rect(x0, y, x0+max(n, 1), y+barH), &image.Uniform{palette[i%len(palette)]}, image.Point{}, draw.Src)
		text(img, x0+n+6, y+barH-5, format(b.Value)+" "+c.Unit)
		y += barH + gap
	}
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("pngchart: encode %q: %w", c.Title, err)
	}
	return nil
}

func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func text(img draw.Image, x, y int, s string) {
	d := font.Drawer{Dst: img, Src: image.Black, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
