package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// mapBins is the number of time bins of thompson's decision map.
const mapBins = 120

// decisionMap counts thompson's decisions per (time bin, size class) and
// backend, in memory bounded by bins × classes, whatever the input length.
type decisionMap struct {
	ops    int64
	arms   int
	counts map[[2]int][]int64
}

func newDecisionMap(ops int64, arms int) *decisionMap {
	return &decisionMap{ops: max(ops, 1), arms: arms, counts: map[[2]int][]int64{}}
}

func (m *decisionMap) add(op int64, class, arm int) {
	k := [2]int{int(op * mapBins / m.ops), class}
	c := m.counts[k]
	if c == nil {
		c = make([]int64, m.arms)
		m.counts[k] = c
	}
	c[arm]++
}

// plotData is what -plot draws besides the report: the runs' cumulative
// costs and thompson's decisions.
type plotData struct {
	arms []string
	runs []policyRun
	dmap *decisionMap
}

// palette colours policies and backends.
var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
	color.RGBA{23, 190, 207, 255}, color.RGBA{0, 0, 0, 255},
}

// writePlot draws cumulative regret over ops for each policy and
// thompson's decision map (size class against time, colour = backend)
// side by side into file, PNG or SVG by its extension.
func writePlot(file string, rep *Report, pd *plotData) error {
	ext := strings.ToLower(filepath.Ext(file))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("replay: -plot %s: want a .png or .svg file", file)
	}
	regret, leg, err := regretPlot(rep, pd)
	if err != nil {
		return err
	}
	var dm *plot.Plot
	if pd.dmap != nil {
		if dm, err = mapPlot(pd); err != nil {
			return err
		}
	}
	// Regret | its legend | the decision map: the legend of eleven
	// policies gets a strip of its own rather than hiding the lines.
	regretW, legendW, mapW := 16*vg.Centimeter, 3.5*vg.Centimeter, vg.Length(0)
	if dm != nil {
		mapW = 16 * vg.Centimeter
	}
	w, h := regretW+legendW+mapW, 12*vg.Centimeter
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if ext == ".svg" {
		c = vgsvg.New(w, h)
	} else {
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	dc := draw.New(c)
	regret.Draw(draw.Crop(dc, 0, -(legendW + mapW), 0, 0))
	leg.Draw(draw.Crop(dc, regretW, -mapW, 0, -vg.Centimeter))
	if dm != nil {
		dm.Draw(draw.Crop(dc, regretW+legendW, 0, 0, 0))
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("replay: -plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("replay: -plot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("replay: -plot: %w", err)
	}
	return nil
}

func regretPlot(rep *Report, pd *plotData) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	p.Title.Text = "cumulative regret, " + rep.Input
	p.X.Label.Text = "op"
	p.X.Tick.Marker = intTicks{}
	p.Y.Label.Text = "regret, % of the oracle"
	p.Y.Tick.Marker = symlogTicks{}
	for i, run := range pd.runs {
		pts := make(plotter.XYs, 0, len(run.points))
		for _, pt := range run.points {
			if pt.oracle <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(pt.op), Y: symlog((pt.policyUs - pt.oracle) / pt.oracle * 100)})
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, leg, fmt.Errorf("replay: plot: %w", err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.2)
		p.Add(l)
		leg.Add(run.name, l)
	}
	p.Add(plotter.NewGrid())
	return p, leg, nil
}

// symlog compresses regret, which spans -1% to 40,000%, onto one axis:
// sign(x)·log10(1 + |x|).
func symlog(x float64) float64 {
	if x < 0 {
		return -log10p1(-x)
	}
	return log10p1(x)
}

func mapPlot(pd *plotData) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "thompson's decisions"
	p.X.Label.Text = "op"
	p.X.Tick.Marker = intTicks{}
	p.Y.Label.Text = "size class (half-octaves of work)"
	p.Y.Tick.Marker = intTicks{}
	p.Legend.Top = true
	m := pd.dmap
	per := make([]plotter.XYs, m.arms)
	for k, c := range m.counts {
		best := 0
		for a := range c {
			if c[a] > c[best] {
				best = a
			}
		}
		x := (float64(k[0]) + 0.5) * float64(m.ops) / mapBins
		per[best] = append(per[best], plotter.XY{X: x, Y: float64(k[1])})
	}
	for a, pts := range per {
		if len(pts) == 0 {
			continue
		}
		sortXY(pts)
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("replay: plot: %w", err)
		}
		s.GlyphStyle.Color = palette[a%len(palette)]
		s.GlyphStyle.Shape = draw.BoxGlyph{}
		s.GlyphStyle.Radius = vg.Points(2)
		p.Add(s)
		p.Legend.Add(pd.arms[a], s)
	}
	return p, nil
}

func log10p1(x float64) float64 { return math.Log10(1 + x) }

// sortXY orders points by x then y, so that a plot of a map (whose
// iteration order is random) is the same file every time.
func sortXY(pts plotter.XYs) {
	slices.SortFunc(pts, func(a, b plotter.XY) int {
		if a.X != b.X {
			if a.X < b.X {
				return -1
			}
			return 1
		}
		if a.Y < b.Y {
			return -1
		} else if a.Y > b.Y {
			return 1
		}
		return 0
	})
}

// symlogTicks labels a symlog axis with the percentages it stands for:
// 0, ±1, ±10, ±100, ...
type symlogTicks struct{}

func (symlogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	add := func(x float64) {
		if y := symlog(x); y >= lo && y <= hi {
			ts = append(ts, plot.Tick{Value: y, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
	}
	add(0)
	for v := 1.0; v <= 1e9; v *= 10 {
		add(v)
		add(-v)
	}
	return ts
}

// intTicks labels op counts without decimals.
type intTicks struct{}

func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', 0, 64)
		}
	}
	return ts
}
