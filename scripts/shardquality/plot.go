package main

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var colours = map[string]color.RGBA{sameTotal: {31, 119, 180, 255}, samePerShard: {255, 127, 14, 255}}

// plotRows draws each regime's mean merged cycles against the shard
// count (log2 axis), with bars from the best to the worst seed.
func plotRows(c config, rows []row) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("merged plan vs shards: %d tiles, %d attempts, %d seeds (mean, best..worst)", c.tiles, c.attempts, c.seeds)
	p.X.Label.Text = "shards"
	p.Y.Label.Text = "merged plan's " + measured(c.objective)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(shardTicks(c.shards))
	for ri, reg := range regimes {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, r := range rows {
			if r.regime != reg {
				continue
			}
			mean, lo, hi := stats(r.cycles)
			// Side by side: the two regimes' points a little apart.
			x := float64(r.shards) * (1 + 0.03*float64(2*ri-1))
			pts = append(pts, plotter.XY{X: x, Y: mean})
			errs = append(errs, struct{ Low, High float64 }{mean - float64(lo), float64(hi) - mean})
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = colours[reg], colours[reg]
		points.Shape = draw.CircleGlyph{}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{pts, errs})
		if err != nil {
			return nil, err
		}
		bars.Color = colours[reg]
		p.Add(line, points, bars)
		p.Legend.Add(reg, line, points)
	}
	// Room above the highest bar for the legend.
	lo, hi := int64(-1), int64(0)
	for _, r := range rows {
		_, l, h := stats(r.cycles)
		if lo < 0 || l < lo {
			lo = l
		}
		hi = max(hi, h)
	}
	p.Y.Min, p.Y.Max = float64(lo)-0.05*float64(hi-lo+1), float64(hi)+0.25*float64(hi-lo+1)
	p.Legend.Top = true
	c2 := vgimg.New(720, 480)
	p.Draw(draw.New(c2))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c2}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func shardTicks(ns []int) []plot.Tick {
	var ts []plot.Tick
	for _, n := range ns {
		ts = append(ts, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	return ts
}
