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
	ops  int64
	arms int
	// counts[bin][class·arms + arm], grown to the largest class seen: a
	// slice, not a map, since it is counted on every op replayed.
	counts [mapBins][]int64
}

func newDecisionMap(ops int64, arms int) *decisionMap {
	return &decisionMap{ops: max(ops, 1), arms: arms}
}

func (m *decisionMap) add(op int64, class, arm int) {
	bin := min(int(op*mapBins/m.ops), mapBins-1)
	c := &m.counts[bin]
	if i := class*m.arms + arm; i < len(*c) {
		(*c)[i]++
		return
	}
	*c = append(*c, make([]int64, (class+1)*m.arms-len(*c))...)
	(*c)[class*m.arms+arm]++
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

// Text sizes of the picture, readable at its default size (about 1,500
// pixels wide): titles 14 pt, axis labels and legends 12, ticks 11.
const (
	titlePt  = 14
	labelPt  = 12
	tickPt   = 11
	legendPt = 12
)

// writePlot draws cumulative regret over ops for each policy and
// thompson's decision map (size class against time, colour = backend)
// side by side into file, PNG or SVG by its extension, each legend in a
// strip of its own beside its data.
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
	var mleg *legend
	if pd.dmap != nil {
		if dm, mleg, err = mapPlot(pd); err != nil {
			return err
		}
	}
	// Regret | its legend | the decision map | its legend, each legend's
	// strip as wide as its longest entry, so that none is cut off.
	regretW, legendW, mapW, mlegW := 16*vg.Centimeter, leg.width(), vg.Length(0), vg.Length(0)
	if dm != nil {
		mapW, mlegW = 15*vg.Centimeter, mleg.width()
	}
	w, h := regretW+legendW+mapW+mlegW, 13*vg.Centimeter
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
	regret.Draw(draw.Crop(dc, 0, -(legendW + mapW + mlegW), 0, 0))
	leg.Draw(draw.Crop(dc, regretW+vg.Centimeter/4, -(mapW + mlegW), 0, -vg.Centimeter))
	if dm != nil {
		dm.Draw(draw.Crop(dc, regretW+legendW, -mlegW, 0, 0))
		mleg.Draw(draw.Crop(dc, regretW+legendW+mapW+vg.Centimeter/4, 0, 0, -vg.Centimeter))
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

// styled sets a plot's text sizes.
func styled(p *plot.Plot) *plot.Plot {
	p.Title.TextStyle.Font.Size = vg.Points(titlePt)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(labelPt)
		a.Tick.Label.Font.Size = vg.Points(tickPt)
	}
	return p
}

// legend is a legend for a strip of its own, which knows its entries.
type legend struct {
	plot.Legend
	names []string
}

func newLegend() *legend {
	leg := &legend{Legend: plot.NewLegend()}
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(legendPt)
	leg.Padding = vg.Points(2)
	return leg
}

func (l *legend) add(name string, thumbs ...plot.Thumbnailer) {
	l.Add(name, thumbs...)
	l.names = append(l.names, name)
}

// blank is a legend entry's empty thumbnail: a line of text.
type blank struct{}

func (blank) Thumbnail(*draw.Canvas) {}

// width is the strip the legend needs: its longest entry, the thumbnail
// and a margin either side.
func (l *legend) width() vg.Length {
	var w vg.Length
	for _, n := range l.names {
		w = max(w, l.TextStyle.Width(n))
	}
	return w + l.ThumbnailWidth + vg.Centimeter
}

// dashes give policies that share a colour in a long list, or whose
// curves cross, a second visual cue.
var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}

// regretPlot draws each policy's cumulative regret against the oracle,
// which is the reference: a dashed line at 0, its legend saying what it
// is (the best backend per bucket in hindsight on the durations every
// policy is charged) and that a learner can go below it. Policies whose
// curves agree within sameCurve at every point (everything on the GPU,
// and a rule that always picks it) share one line and one legend entry,
// "a ≈ b", so that no curve hides another unnamed.
func regretPlot(rep *Report, pd *plotData) (*plot.Plot, *legend, error) {
	p := styled(plot.New())
	leg := newLegend()
	p.Title.Text = "cumulative regret, " + rep.Input
	p.X.Label.Text = "op"
	p.X.Tick.Marker = intTicks{}
	p.Y.Label.Text = "regret, % of the oracle"
	p.Y.Tick.Marker = symlogTicks{}
	type curve struct {
		names []string
		pts   plotter.XYs
	}
	var curves []*curve
	var lastOp float64
	for _, run := range pd.runs {
		if run.name == "oracle" {
			continue
		}
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
		lastOp = max(lastOp, pts[len(pts)-1].X)
		same := slices.IndexFunc(curves, func(c *curve) bool { return closeCurves(c.pts, pts) })
		if same >= 0 {
			curves[same].names = append(curves[same].names, run.name)
			continue
		}
		curves = append(curves, &curve{names: []string{run.name}, pts: pts})
	}
	ref, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: lastOp, Y: 0}})
	if err != nil {
		return nil, leg, fmt.Errorf("replay: plot: %w", err)
	}
	ref.Color, ref.Width, ref.Dashes = color.Gray{Y: 90}, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(plotter.NewGrid(), ref)
	leg.add("oracle = 0: the best backend per bucket", ref)
	for _, l := range []string{"in hindsight, on the durations every", "policy is charged; no fixed policy is",
		"below it, a learner can be (it may split", "a bucket's shapes or follow drift)"} {
		leg.add(l, blank{})
	}
	for i, c := range curves {
		l, err := plotter.NewLine(c.pts)
		if err != nil {
			return nil, leg, fmt.Errorf("replay: plot: %w", err)
		}
		// Earlier curves are drawn wider, so that a later one that runs
		// close by stays visible inside it.
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5 + 0.3*float64(len(curves)-1-i))
		l.Dashes = dashes[i/len(palette)%len(dashes)]
		p.Add(l)
		leg.add(strings.Join(c.names, " ≈ "), l)
	}
	return p, leg, nil
}

// sameCurve is how close, on the plot's symlog axis, two regret curves
// must be at every point to be drawn as one: 0.02 is about 5% of a regret
// above 10%, 0.05 points near 0, and about a pixel at the default size.
const sameCurve = 0.02

// closeCurves reports whether a and b, sampled at the same ops, agree
// within sameCurve everywhere.
func closeCurves(a, b plotter.XYs) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].X != b[i].X || math.Abs(a[i].Y-b[i].Y) > sameCurve {
			return false
		}
	}
	return true
}

// symlog compresses regret, which spans -1% to 40,000%, onto one axis:
// sign(x)·log10(1 + |x|).
func symlog(x float64) float64 {
	if x < 0 {
		return -log10p1(-x)
	}
	return log10p1(x)
}

// mapPlot draws thompson's decision map and returns its legend (which
// backend each colour is) for a strip of its own.
func mapPlot(pd *plotData) (*plot.Plot, *legend, error) {
	p := styled(plot.New())
	leg := newLegend()
	p.Title.Text = "thompson's decisions: the majority backend per cell"
	p.X.Label.Text = "op"
	p.X.Tick.Marker = intTicks{}
	p.Y.Label.Text = "size class (half-octaves of work)"
	p.Y.Tick.Marker = intTicks{}
	m := pd.dmap
	per := make([]plotter.XYs, m.arms)
	for bin, cells := range m.counts {
		for class := range len(cells) / m.arms {
			c := cells[class*m.arms : (class+1)*m.arms]
			best := 0
			for a := range c {
				if c[a] > c[best] {
					best = a
				}
			}
			if c[best] == 0 {
				continue
			}
			x := (float64(bin) + 0.5) * float64(m.ops) / mapBins
			per[best] = append(per[best], plotter.XY{X: x, Y: float64(class)})
		}
	}
	for a, pts := range per {
		if len(pts) == 0 {
			continue
		}
		sortXY(pts)
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, leg, fmt.Errorf("replay: plot: %w", err)
		}
		s.GlyphStyle.Color = palette[a%len(palette)]
		s.GlyphStyle.Shape = draw.BoxGlyph{}
		s.GlyphStyle.Radius = vg.Points(2)
		p.Add(s)
		leg.add(pd.arms[a], s)
	}
	return p, leg, nil
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
