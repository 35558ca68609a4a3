package pngchart

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
)

// Series is one line of a timeline: a value per step (per second, say).
type Series struct {
	Name   string
	Unit   string
	Values []float64
}

// Mark is a moment the timeline points at (a kill, a restart), drawn as a
// vertical line across every panel in the colour of its kind.
type Mark struct {
	At   float64 // in steps
	Kind string
}

// Timeline draws series one above the other on a shared time axis, with
// marks across them and a legend of the marks' kinds.
type Timeline struct {
	Title  string
	XUnit  string // the steps' unit, e.g. "s"
	Series []Series
	Marks  []Mark
}

const (
	plotW  = 720
	panelH = 110
)

// WritePNG renders the timeline.
func (t Timeline) WritePNG(w io.Writer) error {
	steps := 0
	for _, s := range t.Series {
		steps = max(steps, len(s.Values))
		for _, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("pngchart: %q: series %q has value %v", t.Title, s.Name, v)
			}
		}
	}
	if steps < 2 {
		return fmt.Errorf("pngchart: %q has fewer than two steps", t.Title)
	}
	kinds := []string{}
	seen := map[string]bool{}
	for _, m := range t.Marks {
		if !seen[m.Kind] {
			seen[m.Kind] = true
			kinds = append(kinds, m.Kind)
		}
	}
	left := margin + 9*charW
	width := left + plotW + margin
	height := margin + lineH + gap + len(t.Series)*(panelH+lineH+gap) + lineH + gap + 2*lineH + margin
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text(img, margin, margin+lineH-3, t.Title)
	x := func(step float64) int { return left + int(math.Round(step/float64(steps-1)*plotW)) }
	markColor := map[string]color.RGBA{}
	for i, k := range kinds {
		markColor[k] = palette[(i+1)%len(palette)]
	}

	y := margin + lineH + gap
	for i, s := range t.Series {
		text(img, left, y+lineH-3, fmt.Sprintf("%s (%s)", s.Name, s.Unit))
		top := y + lineH
		bottom := top + panelH
		maxV := 0.0
		for _, v := range s.Values {
			maxV = max(maxV, v)
		}
		if maxV == 0 {
			maxV = 1
		}
		text(img, margin, top+lineH-3, format(maxV))
		text(img, margin, bottom, "0")
		hline(img, left, left+plotW, bottom, color.RGBA{0xbb, 0xbb, 0xbb, 0xff})
		for _, m := range t.Marks {
			vline(img, x(m.At), top, bottom, markColor[m.Kind])
		}
		c := palette[0]
		if i > 0 {
			c = color.RGBA{0x33, 0x33, 0x33, 0xff}
		}
		py := func(v float64) int { return bottom - int(math.Round(v/maxV*float64(panelH-2))) }
		for j := 1; j < len(s.Values); j++ {
			line(img, x(float64(j-1)), py(s.Values[j-1]), x(float64(j)), py(s.Values[j]), c)
		}
		y = bottom + gap
	}
	text(img, left, y+lineH-3, fmt.Sprintf("0 … %d %s", steps-1, t.XUnit))
	y += lineH + gap
	lx := left
	for _, k := range kinds {
		draw.Draw(img, image.Rect(lx, y, lx+12, y+10), &image.Uniform{markColor[k]}, image.Point{}, draw.Src)
		text(img, lx+16, y+10, k)
		lx += 16 + (len(k)+3)*charW
	}
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("pngchart: encode %q: %w", t.Title, err)
	}
	return nil
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

// line draws a segment, one pixel per step of its longer side.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		img.SetRGBA(x0+(x1-x0)*i/n, y0+(y1-y0)*i/n, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
