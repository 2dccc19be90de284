// Package chart draws the PNG figures that ndpperf and ndpsim write with
// --plot: latency CDFs (one curve per transport), lines (incast completion per
// round, per-flow throughput of a permutation).
// It is a thin layer over gonum.org/v1/plot that fixes the size, fonts and
// colours so every figure of the project looks the same; the commands only
// hand it their samples.
//
// Every figure is Width × Height pixels. Drawing happens after a benchmark has
// measured, never during.
package chart

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Width and Height are the size of every figure in pixels.
const (
	Width  = 800
	Height = 500
	dpi    = 96
)

// maxPoints bounds the points of one drawn curve: a CDF of 20,000 samples is
// drawn through at most this many of its quantiles.
const maxPoints = 2000

// Samples is one named set of measurements (one transport's latencies).
type Samples struct {
	Name   string
	Values []float64
}

// Series is one named curve of (X[i], Y[i]) points.
type Series struct {
	Name string
	X, Y []float64
}

// ErrNoData is returned when there is nothing to draw.
var ErrNoData = errors.New("chart: nothing to draw")

// CDF draws the empirical distribution of each set: x is the value, y the
// fraction of samples at or below it. The x axis is logarithmic when every
// value is positive and they span more than a factor of ten, so the body and
// the tail of a latency distribution both show.
func CDF(file, title, xlabel string, sets []Samples) error {
	p := newPlot(title, xlabel, "fraction of samples ≤ x")
	lo, hi, drawn := math.Inf(1), math.Inf(-1), 0
	for i, s := range sets {
		if len(s.Values) == 0 {
			continue
		}
		v := slices.Clone(s.Values)
		slices.Sort(v)
		lo, hi = min(lo, v[0]), max(hi, v[len(v)-1])
		k := min(len(v), maxPoints)
		pts := make(plotter.XYs, 0, k+1)
		if k == 1 {
			pts = append(pts, plotter.XY{X: v[0], Y: 1})
		}
		for j := 0; k > 1 && j < k; j++ {
			idx := j * (len(v) - 1) / (k - 1)
			pts = append(pts, plotter.XY{X: v[idx], Y: float64(idx+1) / float64(len(v))})
		}
		if err := addLine(p, i, s.Name, pts, false); err != nil {
			return err
		}
		drawn++
	}
	if drawn == 0 {
		return ErrNoData
	}
	if lo > 0 && hi > 10*lo {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Min, p.Y.Max = 0, 1
	return save(p, file)
}

// Lines draws each series as a line; with few points, each point is marked.
func Lines(file, title, xlabel, ylabel string, series []Series) error {
	p := newPlot(title, xlabel, ylabel)
	drawn := 0
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("chart: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		if len(s.X) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(s.X))
		for j := range s.X {
			pts[j] = plotter.XY{X: s.X[j], Y: s.Y[j]}
		}
		if err := addLine(p, i, s.Name, pts, len(pts) <= 60); err != nil {
			return err
		}
		drawn++
	}
	if drawn == 0 {
		return ErrNoData
	}
	// From zero, with room above the highest point; the legend goes to the
	// bottom right, below curves that start at zero.
	p.Y.Min = math.Min(p.Y.Min, 0)
	if p.Y.Max > 0 {
		p.Y.Max *= 1.08
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(4)
	return save(p, file)
}

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
	return p
}

func addLine(p *plot.Plot, i int, name string, pts plotter.XYs, marks bool) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("chart: %s: %w", name, err)
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	l.Dashes = plotutil.Dashes(i / 7) // colours repeat after 7: change the dash then
	p.Add(l)
	if marks {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("chart: %s: %w", name, err)
		}
		s.Color = l.Color
		s.Shape = plotutil.Shape(i)
		p.Add(s)
		p.Legend.Add(name, l, s)
	} else {
		p.Legend.Add(name, l)
	}
	return nil
}

// CheckName reports whether file is a name the figures can be written to (it
// must end in .png), so a command can refuse a bad --plot before a long run.
func CheckName(file string) error {
	if !strings.EqualFold(filepath.Ext(file), ".png") {
		return fmt.Errorf("chart: %s: the file name must end in .png", file)
	}
	return nil
}

// save writes p as a Width × Height PNG to file.
func save(p *plot.Plot, file string) error {
	if err := CheckName(file); err != nil {
		return err
	}
	w := vg.Length(Width) * vg.Inch / dpi
	h := vg.Length(Height) * vg.Inch / dpi
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	p.Draw(draw.New(c))
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart: write %s: %w", file, err)
	}
	return f.Close()
}
