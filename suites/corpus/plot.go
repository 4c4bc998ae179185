package corpus

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot file names written by Plots.
const (
	PlotDecode  = "decode_vs_concurrency.png"
	PlotLatency = "latency_vs_concurrency.png"
)

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
)

// Plots writes the report's PNG plots into dir and returns their paths:
// decode tok/s against concurrency (corpus decode, and steady decode where
// the server measured it), and the client's TTFT and E2E p50/p99 against
// concurrency. Acceptance per
// position needs a speculating server's per-position counts, which the
// OpenAI API does not carry; it is not plotted.
func Plots(r *Report, dir string) ([]string, error) {
	if len(r.Points) == 0 {
		return nil, nil
	}
	var paths []string
	p, err := decodePlot(r)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, PlotDecode)
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return nil, err
	}
	paths = append(paths, path)
	p, err = latencyPlot(r)
	if err != nil {
		return nil, err
	}
	path = filepath.Join(dir, PlotLatency)
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return nil, err
	}
	return append(paths, path), nil
}

func concTicks(r *Report) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for _, p := range r.Points {
		ts = append(ts, plot.Tick{Value: float64(p.Concurrency), Label: fmt.Sprint(p.Concurrency)})
	}
	return ts
}

// line adds a line with points to p.
func line(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, s.Color, s.Shape = c, c, draw.CircleGlyph{}
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		s.Radius = 0
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

func decodePlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Decode throughput vs concurrency — " + r.Model
	p.X.Label.Text = "concurrency C (persistent workers)"
	p.Y.Label.Text = "decode tok/s"
	p.X.Tick.Marker = concTicks(r)
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	var corpus, steady plotter.XYs
	for _, pt := range r.Points {
		c := float64(pt.Concurrency)
		corpus = append(corpus, plotter.XY{X: c, Y: pt.CorpusDecodeTPS})
		if pt.SteadyDecodeTPS != nil {
			steady = append(steady, plotter.XY{X: c, Y: *pt.SteadyDecodeTPS})
		}
	}
	if err := line(p, "corpus decode (decode tokens / makespan)", corpus, blue, false); err != nil {
		return nil, err
	}
	if len(steady) > 0 {
		if err := line(p, "steady decode (server intervals)", steady, orange, false); err != nil {
			return nil, err
		}
	}
	top := 0.0
	for _, xy := range append(corpus, steady...) {
		top = max(top, xy.Y)
	}
	frame(p, top)
	return p, nil
}

func latencyPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Client latency vs concurrency — " + r.Model
	p.X.Label.Text = "concurrency C (persistent workers)"
	p.Y.Label.Text = "milliseconds"
	p.X.Tick.Marker = concTicks(r)
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	series := []struct {
		name   string
		c      color.Color
		dashed bool
		get    func(Point) float64
	}{
		{"TTFT p50", blue, false, func(pt Point) float64 { return pt.TTFT.P50 }},
		{"TTFT p99", blue, true, func(pt Point) float64 { return pt.TTFT.P99 }},
		{"E2E p50", green, false, func(pt Point) float64 { return pt.E2E.P50 }},
		{"E2E p99", green, true, func(pt Point) float64 { return pt.E2E.P99 }},
	}
	top := 0.0
	for _, s := range series {
		var xys plotter.XYs
		for _, pt := range r.Points {
			xys = append(xys, plotter.XY{X: float64(pt.Concurrency), Y: s.get(pt)})
			top = max(top, s.get(pt))
		}
		if err := line(p, s.name, xys, s.c, s.dashed); err != nil {
			return nil, err
		}
	}
	frame(p, top)
	return p, nil
}

// frame leaves room above the data for the legend and labels the y axis
// with plain numbers.
func frame(p *plot.Plot, top float64) {
	p.Y.Max = max(top*1.45, 1)
	p.Y.Tick.Marker = plainTicks{}
	p.Title.Padding = vg.Points(8)
}

// plainTicks are gonum's default ticks labelled without trailing zeros.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
