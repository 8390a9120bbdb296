package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"ipu.local/formats/profile"
)

// Plot size: 1200 x 500 pixels at the PNG writer's 96 dpi.
const (
	plotW = 1200 * vg.Inch / 96
	plotH = 500 * vg.Inch / 96
)

var (
	colCode     = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colConst    = color.RGBA{0x9a, 0x6f, 0xd0, 0xff}
	colVars     = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	colProfile  = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	colExchCode = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	colStacks   = color.RGBA{0x8c, 0x56, 0x4b, 0xff}
	colFree     = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	colCompute  = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colExchange = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	colHost     = color.RGBA{0x8c, 0x56, 0x4b, 0xff}
	colSync     = color.RGBA{0x7f, 0x7f, 0x7f, 0xff}
)

func encodePNG(p *plot.Plot, name string) ([]byte, error) {
	w, err := p.WriterTo(plotW, plotH, "png")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b.Bytes(), nil
}

// barWidth is the width of one of n bars across the plot.
func barWidth(n int) vg.Length {
	return max(vg.Length(0.5), (plotW-1*vg.Inch)/vg.Length(max(n, 1))*0.8)
}

// stack adds bar charts of vals stacked in order, with legend entries.
func stack(p *plot.Plot, n int, series []struct {
	name string
	col  color.Color
	vals plotter.Values
}) error {
	var below *plotter.BarChart
	for _, s := range series {
		b, err := plotter.NewBarChart(s.vals, barWidth(n))
		if err != nil {
			return err
		}
		b.Color = s.col
		b.LineStyle.Width = 0
		if below != nil {
			b.StackOn(below)
		}
		p.Add(b)
		p.Legend.Add(s.name, b)
		below = b
	}
	p.Legend.Top = true
	return nil
}

type series = struct {
	name string
	col  color.Color
	vals plotter.Values
}

// memoryPlot is bytes per tile by category, stacked up to the usable
// memory with what is free, the worst tiles labelled.
func (r *report) memoryPlot() ([]byte, error) {
	n := 0
	for _, m := range r.memory {
		n = max(n, m.Tile+1)
	}
	vals := make([]plotter.Values, 7)
	for i := range vals {
		vals[i] = make(plotter.Values, n)
	}
	for _, m := range r.memory {
		vals[0][m.Tile] = float64(m.Code)
		vals[1][m.Tile] = float64(m.ExchangeCode)
		vals[2][m.Tile] = float64(m.Constants)
		vals[3][m.Tile] = float64(m.Variables)
		vals[4][m.Tile] = float64(m.Stacks)
		vals[5][m.Tile] = float64(m.Profile)
		vals[6][m.Tile] = float64(max(r.usable-m.Used(), 0))
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Memory per tile (%d tiles with a program, %s usable bytes per tile)", len(r.memory), group(r.usable))
	p.X.Label.Text = "tile"
	p.Y.Label.Text = "bytes"
	if err := stack(p, n, []series{
		{"code", colCode, vals[0]}, {"exchange code and tables", colExchCode, vals[1]},
		{"constants", colConst, vals[2]}, {"variables", colVars, vals[3]}, {"stacks (none)", colStacks, vals[4]},
		{"profile", colProfile, vals[5]}, {"free", colFree, vals[6]},
	}); err != nil {
		return nil, fmt.Errorf("memory.png: %w", err)
	}
	capLine, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: float64(r.usable)}, {X: float64(n) - 0.5, Y: float64(r.usable)}})
	if err != nil {
		return nil, fmt.Errorf("memory.png: %w", err)
	}
	capLine.Color = color.Black
	capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(capLine)
	p.Legend.Add("usable", capLine)
	var lab plotter.XYLabels
	for i, m := range r.worstMemory()[:min(5, len(r.memory))] {
		// Staggered, so that neighbouring worst tiles stay readable.
		lab.XYs = append(lab.XYs, plotter.XY{X: float64(m.Tile), Y: float64(m.Used()) + float64(r.usable)*(0.02+0.07*float64(i))})
		lab.Labels = append(lab.Labels, fmt.Sprintf("tile %d: %s", m.Tile, group(m.Used())))
	}
	if len(lab.XYs) > 0 {
		l, err := plotter.NewLabels(lab)
		if err != nil {
			return nil, fmt.Errorf("memory.png: %w", err)
		}
		p.Add(l)
	}
	p.Y.Min = 0
	p.Y.Max = float64(r.usable) * 1.15
	return encodePNG(p, "memory.png")
}

// phaseLabels are the supersteps' names for a nominal axis, thinned to
// at most 40 labels.
func phaseLabels(phases []phaseRow) []string {
	step := (len(phases) + 39) / 40
	out := make([]string, len(phases))
	for i, ph := range phases {
		if i%step != 0 {
			continue
		}
		name := ph.Node
		if len(name) > 18 {
			name = name[:17] + "~"
		}
		out[i] = fmt.Sprintf("%d %s", ph.Index, name)
	}
	return out
}

// timelinePlot is the supersteps' cycles stacked compute, exchange, host
// and sync.
func (r *report) timelinePlot() ([]byte, error) {
	// The device's supersteps: the host transfers, often far longer,
	// would flatten them (their cycles go in the title).
	var shown []phaseRow
	var host int64
	for _, ph := range r.phases {
		if ph.Kind == profile.KindHost {
			host += ph.Cycles + ph.SyncCycles
			continue
		}
		shown = append(shown, ph)
	}
	if len(shown) == 0 {
		shown, host = r.phases, 0
	}
	n := len(shown)
	vals := make([]plotter.Values, 4)
	for i := range vals {
		vals[i] = make(plotter.Values, n)
	}
	for i, ph := range shown {
		switch ph.Kind {
		case profile.KindExchange:
			vals[1][i] = float64(ph.Cycles)
		case profile.KindHost:
			vals[2][i] = float64(ph.Cycles)
		default:
			vals[0][i] = float64(ph.Cycles)
		}
		vals[3][i] = float64(ph.SyncCycles)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("BSP supersteps on the device (%d, %s cycles; host supersteps %s cycles, not drawn)", n, group(r.totalCycles()-host), group(host))
	p.Y.Label.Text = "cycles"
	if err := stack(p, n, []series{
		{"compute", colCompute, vals[0]}, {"exchange", colExchange, vals[1]},
		{"host", colHost, vals[2]}, {"sync", colSync, vals[3]},
	}); err != nil {
		return nil, fmt.Errorf("timeline.png: %w", err)
	}
	p.NominalX(phaseLabels(shown)...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YTop
	p.Y.Min = 0
	return encodePNG(p, "timeline.png")
}

// tileGrid is each tile's cycles on the chip's grid: column t/rows, row
// t%rows.
type tileGrid struct {
	cols, rows int
	z          []float64
}

func (g tileGrid) Dims() (c, r int)   { return g.cols, g.rows }
func (g tileGrid) Z(c, r int) float64 { return g.z[c*g.rows+r] }
func (g tileGrid) X(c int) float64    { return float64(c) }
func (g tileGrid) Y(r int) float64    { return float64(r) }

// tileCycles is each tile's cycles over all supersteps.
func (r *report) tileCycles() []int64 {
	out := make([]int64, r.in.prof.Tiles)
	for _, ph := range r.phases {
		for t, c := range ph.TileCycles {
			out[t] += c
		}
	}
	return out
}

// tilesPlot is the heat map of cycles per tile on the tile grid.
func (r *report) tilesPlot() ([]byte, error) {
	rows := max(r.in.preset.TilesPerColumn, 1)
	cols := (r.in.prof.Tiles + rows - 1) / rows
	g := tileGrid{cols: cols, rows: rows, z: make([]float64, cols*rows)}
	for i := range g.z {
		g.z[i] = math.NaN() // idle, or no tile
	}
	var lo, hi int64 = math.MaxInt64, 0
	for t, c := range r.tileCycles() {
		if c == 0 {
			continue
		}
		g.z[t] = float64(c)
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi == 0 {
		lo = 0
	}
	cm := moreland.SmoothBlueRed()
	cm.SetMin(0)
	cm.SetMax(1)
	h := plotter.NewHeatMap(g, cm.Palette(64))
	h.Min, h.Max = float64(lo), float64(max(hi, lo+1))
	h.NaN = colFree
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Cycles per tile, all supersteps: blue %s to red %s, idle tiles grey (%d columns of %d tiles)", group(lo), group(hi), cols, rows)
	p.X.Label.Text = "column (tile / " + fmt.Sprint(rows) + ")"
	p.Y.Label.Text = "row (tile % " + fmt.Sprint(rows) + ")"
	p.Add(h)
	return encodePNG(p, "tiles.png")
}

// livenessPlot is the live bytes at each step on the worst tile and on
// average.
func (r *report) livenessPlot() ([]byte, error) {
	lv := r.live
	worst, avg := make(plotter.XYs, len(lv.Worst)), make(plotter.XYs, len(lv.Average))
	for i := range lv.Worst {
		worst[i] = plotter.XY{X: float64(i), Y: lv.Worst[i]}
		avg[i] = plotter.XY{X: float64(i), Y: lv.Average[i]}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Live tensor bytes over the program (peak %s on tile %d)", group(lv.Peak), lv.WorstTile)
	p.Y.Label.Text = "bytes"
	for _, s := range []struct {
		name string
		xys  plotter.XYs
		col  color.Color
	}{{fmt.Sprintf("worst tile (%d)", lv.WorstTile), worst, colProfile}, {"average tile holding data", avg, colCode}} {
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, fmt.Errorf("liveness.png: %w", err)
		}
		l.Color, pts.Color = s.col, s.col
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	p.Legend.Top = true
	labels := make([]string, len(lv.Steps))
	step := (len(lv.Steps) + 39) / 40
	for i, s := range lv.Steps {
		if i%step == 0 {
			if len(s) > 18 {
				s = s[:17] + "~"
			}
			labels[i] = s
		}
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YTop
	p.Y.Min = 0
	return encodePNG(p, "liveness.png")
}

// group writes n with thousands separators: 1,234,567.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}
