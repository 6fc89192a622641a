package main

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
)

// writeChart draws one horizontal bar per row, its length the ratio, with a
// marker at 1.0 (the baseline), and writes it as PNG. Labels use a built-in
// 5x7 pixel font so nothing outside the standard library is needed.
func writeChart(path string, rows []row) error {
	const (
		rowH   = 26
		left   = 8
		labelW = 6 * 76
		barMax = 420
		top    = 34
	)
	// Bars longer than 3x the baseline are clipped (and marked) so one
	// outlier, such as a fixed RSS floor over a tiny budget, does not
	// squash every other bar.
	const clip = 3.0
	maxRatio := 1.0
	for _, r := range rows {
		maxRatio = math.Max(maxRatio, math.Min(r.Ratio, clip))
	}
	scale := float64(barMax) / (maxRatio * 1.1)
	width := left + labelW + barMax + 70
	height := top + rowH*len(rows) + 16
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	black := color.RGBA{0x20, 0x20, 0x20, 0xff}
	text(img, left, 10, "pico-bench: figure / same-run baseline (| = 1.0)", black, 2)
	x0 := left + labelW
	for i, r := range rows {
		y := top + i*rowH
		label := r.Name + " vs " + r.BaseName
		if len(label) > 75 {
			label = label[:74] + "."
		}
		text(img, left, y+9, label, black, 1)
		w := int(math.Min(r.Ratio, clip) * scale)
		c := color.RGBA{0x2b, 0x7b, 0xb9, 0xff}
		if r.Unit == "MiB" {
			c = color.RGBA{0xd9, 0x8c, 0x1f, 0xff} // RSS rows: lower is better
		}
		fillRect(img, x0, y+4, w, rowH-8, c)
		val := fmt.Sprintf("%.2f", r.Ratio)
		if r.Ratio > clip {
			val = "> " + val
		}
		text(img, x0+w+4, y+9, val, black, 1)
	}
	one := x0 + int(scale)
	fillRect(img, one, top-4, 1, rowH*len(rows)+4, color.RGBA{0xc0, 0x20, 0x20, 0xff})
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := png.Encode(w, img); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fillRect(img *image.RGBA, x, y, w, h int, c color.Color) {
	draw.Draw(img, image.Rect(x, y, x+w, y+h), image.NewUniform(c), image.Point{}, draw.Src)
}

// text draws s with the 5x7 font at (x, y), each pixel scaled by k.
func text(img *image.RGBA, x, y int, s string, c color.Color, k int) {
	for _, r := range s {
		if r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		g, ok := font[r]
		if !ok {
			g = font['?']
		}
		for row := 0; row < 7; row++ {
			for col := 0; col < 5; col++ {
				if g[row]&(1<<(4-col)) != 0 {
					fillRect(img, x+col*k, y+row*k, k, k, c)
				}
			}
		}
		x += 6 * k
	}
}
