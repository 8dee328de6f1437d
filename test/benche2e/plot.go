package benche2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws pods per second against bound pods, a line per
// configuration measured, each point labelled with its rate, and saves it
// to path; the extension (.png or .svg) picks the format.
func WritePlot(path string, points []PointResult) error {
	p, err := Plot(points)
	if err != nil {
		return err
	}
	if err := p.Save(18*vg.Centimeter, 11*vg.Centimeter, path); err != nil {
		return fmt.Errorf("writing the picture %s: %w", path, err)
	}
	return nil
}

// Plot builds the picture WritePlot saves.
func Plot(points []PointResult) (*plot.Plot, error) {
	if len(points) == 0 {
		return nil, errors.New("picture: no points")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Scheduling throughput, %s pods (first created to last bound)", thousands(points[0].Pods))
	p.X.Label.Text = "pods already bound (and nodes)"
	p.Y.Label.Text = "pods bound per second"
	p.Y.Min = 0
	p.Legend.Top = true

	var ticks []plot.Tick
	maxX, maxY := 0.0, 0.0
	for _, pt := range points {
		ticks = append(ticks, plot.Tick{Value: float64(pt.Bound), Label: fmt.Sprintf("%s bound\n%s nodes", thousands(pt.Bound), thousands(pt.Nodes))})
		maxX = max(maxX, float64(pt.Bound))
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)

	lines := 0
	for i, m := range append(slices.Clone(Modes), ModeNullExtender, ModeRegoschedPrioritize) {
		var xys plotter.XYs
		var labels []string
		for _, pt := range points {
			if r, ok := pt.Rate(m); ok {
				xys = append(xys, plotter.XY{X: float64(pt.Bound), Y: r})
				labels = append(labels, fmt.Sprintf("%.0f/s", r))
				maxY = max(maxY, r)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("picture: %s: %w", m.Name(), err)
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(m.Name(), l, s)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, fmt.Errorf("picture: %s: %w", m.Name(), err)
		}
		lab.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(2)}
		p.Add(lab)
		lines++
	}
	if lines == 0 {
		return nil, errors.New("picture: no configuration measured")
	}
	// Room for the labels right of the last point, and for the legend above
	// the highest.
	p.X.Min, p.X.Max = -0.08*max(maxX, 1), 1.15*max(maxX, 1)
	p.Y.Max = 1.4 * maxY
	p.Add(plotter.NewGrid())
	return p, nil
}

// thousands writes n with commas: 10000 is 10,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// CheckPlotPath refuses a picture path whose format WritePlot is not
// meant to write, before an hour of measuring.
func CheckPlotPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext == ".png" || ext == ".svg" {
		return nil
	}
	return fmt.Errorf("picture %s: want a .png or .svg file", path)
}
