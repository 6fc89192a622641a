package main

import (
	"bufio"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Bars longer than chartClip times the baseline are cut there (their value
// reads "> ratio") so one outlier, such as a fixed RSS floor over a tiny
// budget, does not squash every other bar.
const chartClip = 3.0

// chartDPI is the PNG's resolution: chartSize's pixels are the image's.
const chartDPI = 96

var (
	chartBlue   = color.RGBA{0x2b, 0x7b, 0xb9, 0xff}
	chartOrange = color.RGBA{0xd9, 0x8c, 0x1f, 0xff} // RSS rows: lower is better
	chartRed    = color.RGBA{0xc0, 0x20, 0x20, 0xff}
)

// chartSize is the chart's size in pixels for n rows: a bar per row under
// the title and the legend, above the ratio axis.
func chartSize(n int) (w, h int) {
	return 1100, 150 + 28*n
}

// writeChart draws one horizontal bar per row, its length the ratio (RSS
// rows in orange, where lower is better), a red line at 1.0 (the
// baseline), and writes it to path as PNG.
func writeChart(path string, rows []row) error {
	if len(rows) == 0 {
		return fmt.Errorf("chart: no rows")
	}
	p, err := chart(rows)
	if err != nil {
		return err
	}
	w, h := chartSize(len(rows))
	px := func(n int) vg.Length { return vg.Length(n) * vg.Inch / chartDPI }
	c := vgimg.NewWith(vgimg.UseWH(px(w), px(h)), vgimg.UseDPI(chartDPI))
	// A margin of 8 pixels all round: the longest label reaches the left edge.
	m := px(8)
	p.Draw(draw.Crop(draw.New(c), m, -m, m, -m))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// chart builds the plot of writeChart: rows from the top down, each
// labelled "Name vs BaseName" on the Y axis and with its ratio at the end
// of its bar.
func chart(rows []row) (*plot.Plot, error) {
	p := plot.New()
	sans := func(s *text.Style, size float64) {
		s.Font.Variant = "Sans"
		s.Font.Size = vg.Points(size)
	}
	p.Title.Text = "pico-bench: figure / same-run baseline"
	sans(&p.Title.TextStyle, 14)
	p.X.Label.Text = "ratio (figure / baseline; RSS rows: peak RSS / memory bound)"
	sans(&p.X.Label.TextStyle, 11)
	sans(&p.X.Tick.Label, 10)
	sans(&p.Y.Tick.Label, 9)

	grid := plotter.NewGrid()
	grid.Horizontal.Color = nil
	p.Add(grid)

	n := len(rows)
	names := make([]string, n)
	ends := make(plotter.XYs, n)
	values := make([]string, n)
	var tp, rss *plotter.BarChart
	maxRatio := 1.0
	for i, r := range rows {
		y := n - 1 - i // the first row at the top
		names[y] = chartLabel(r)
		v := min(r.Ratio, chartClip)
		maxRatio = max(maxRatio, v)
		bar, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(14))
		if err != nil {
			return nil, err
		}
		bar.Horizontal = true
		bar.XMin = float64(y)
		bar.LineStyle.Width = 0
		bar.Color = chartBlue
		if r.Unit == "MiB" {
			bar.Color = chartOrange
			rss = bar
		} else {
			tp = bar
		}
		p.Add(bar)
		ends[y] = plotter.XY{X: v, Y: float64(y)}
		values[y] = fmt.Sprintf("%.2f", r.Ratio)
		if r.Ratio > chartClip {
			values[y] = "> " + values[y]
		}
	}

	// The legend stands in two empty rows above the bars.
	top := float64(n) + 1.5
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(n) - 0.5}})
	if err != nil {
		return nil, err
	}
	one.Color = chartRed
	one.Width = vg.Points(1.5)
	p.Add(one)

	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: ends, Labels: values})
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].YAlign = text.YCenter
		sans(&labels.TextStyle[i], 9)
	}
	labels.Offset = vg.Point{X: vg.Points(4)}
	p.Add(labels)

	if tp != nil {
		p.Legend.Add("figure / baseline", tp)
	}
	if rss != nil {
		p.Legend.Add("peak RSS / memory bound (lower is better)", rss)
	}
	p.Legend.Add("1.0: the baseline", one)
	p.Legend.Top = true
	sans(&p.Legend.TextStyle, 9)

	p.NominalY(names...)
	p.X.Min, p.X.Max = 0, maxRatio*1.12
	p.Y.Min, p.Y.Max = -0.5, top
	return p, nil
}

// chartLabel is a row's label on the Y axis, "Name vs BaseName", cut to
// 80 characters.
func chartLabel(r row) string {
	s := []rune(r.Name + " vs " + r.BaseName)
	if len(s) > 80 {
		s = append(s[:79], '…')
	}
	return string(s)
}
