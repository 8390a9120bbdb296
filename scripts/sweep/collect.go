package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// csvHeader are results.csv's columns.
var csvHeader = []string{"id", "model", "options", "final_cycles", "compute_bound", "ratio", "estimate",
	"plan_seconds", "link_seconds", "verdict", "error", "host_link_cycles", "inference_cycles"}

// collect writes DIR/results.csv, DIR/results.png and DIR/best.json
// from the results, in the order of the configurations.
func collect(out string, results []Result) error {
	b, err := resultsCSV(results)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(out, "results.csv"), b); err != nil {
		return err
	}
	best := bestOf(results)
	bj, err := json.MarshalIndent(best, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(out, "best.json"), append(bj, '\n')); err != nil {
		return err
	}
	png, err := plotResults(results, best)
	if err != nil {
		return fmt.Errorf("results.png: %s", oneLine(err.Error()))
	}
	return writeAtomic(filepath.Join(out, "results.png"), png)
}

func num(v int64) string {
	if v <= 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

func resultsCSV(results []Result) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(csvHeader); err != nil {
		return nil, err
	}
	for _, r := range results {
		ratio := ""
		if r.FinalCycles > 0 && r.ComputeBound > 0 {
			ratio = strconv.FormatFloat(float64(r.FinalCycles)/float64(r.ComputeBound), 'f', 3, 64)
		}
		row := []string{r.ID, r.Model, r.Options, num(r.FinalCycles), num(r.ComputeBound), ratio, num(r.Estimate),
			strconv.FormatFloat(r.PlanSeconds, 'f', 3, 64), strconv.FormatFloat(r.LinkSeconds, 'f', 3, 64),
			r.Verdict, r.Error, num(r.HostLinkCycles), num(r.inference())}
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// Best is a model's best configuration: the passing one with the
// fewest inference cycles (final_cycles plus the host link's), the first
// in the sweep's order on a tie.
type Best struct {
	Model           string `json:"model"`
	ID              string `json:"id,omitempty"`
	Options         string `json:"options,omitempty"`
	FinalCycles     int64  `json:"final_cycles,omitempty"`
	InferenceCycles int64  `json:"inference_cycles,omitempty"`
	ComputeBound    int64  `json:"compute_bound,omitempty"`
	Configs         int    `json:"configurations"`
	Passed          int    `json:"passed"`
}

// bestOf returns each model's best, in the order the models first
// appear.
func bestOf(results []Result) []Best {
	var best []Best
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.Model]
		if !ok {
			i = len(best)
			index[r.Model] = i
			best = append(best, Best{Model: r.Model})
		}
		b := &best[i]
		b.Configs++
		if r.Verdict != "PASS" || r.FinalCycles <= 0 {
			continue
		}
		b.Passed++
		if b.ID == "" || r.inference() < b.InferenceCycles {
			b.ID, b.Options, b.FinalCycles, b.InferenceCycles, b.ComputeBound = r.ID, r.Options, r.FinalCycles, r.inference(), r.ComputeBound
		}
	}
	return best
}

// lighter is c halfway to white: a model's host link bars.
func lighter(c color.RGBA) color.RGBA {
	return color.RGBA{c.R/2 + 128, c.G/2 + 128, c.B/2 + 128, 255}
}

// palette colours the models' bars.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
}

// plotResults draws each configuration's inference cycles, a bar each:
// its final_cycles in its model's colour with the host link's cycles
// stacked on top in a lighter shade, the models' configurations side by
// side, each model's best (fewest inference cycles, as best.json) marked
// with a triangle; a configuration without final_cycles has no bar.
func plotResults(results []Result, best []Best) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "inference cycles per configuration: final_cycles, host link on top (triangle: each model's best passing configuration)"
	p.Y.Label.Text = "cycles"
	p.X.Label.Text = "configuration"
	var labels []string
	bestIDs := map[string]bool{}
	for _, b := range best {
		if b.ID != "" {
			bestIDs[b.ID] = true
		}
	}
	var marks plotter.XYs
	x, top := 0, int64(1)
	for mi, b := range best {
		var device, host plotter.Values
		start := x
		for _, r := range results {
			if r.Model != b.Model {
				continue
			}
			device = append(device, float64(max(r.FinalCycles, 0)))
			host = append(host, float64(r.inference()-max(r.FinalCycles, 0)))
			top = max(top, r.inference())
			labels = append(labels, r.Options)
			if bestIDs[r.ID] {
				marks = append(marks, plotter.XY{X: float64(x), Y: float64(r.inference())})
			}
			x++
		}
		colour := palette[mi%len(palette)]
		bars, err := plotter.NewBarChart(device, vg.Points(10))
		if err != nil {
			return nil, err
		}
		bars.XMin = float64(start)
		bars.Color = colour
		bars.LineStyle.Width = 0
		link, err := plotter.NewBarChart(host, vg.Points(10))
		if err != nil {
			return nil, err
		}
		link.XMin = float64(start)
		link.Color = lighter(colour)
		link.LineStyle.Width = 0
		link.StackOn(bars)
		p.Add(bars, link)
		p.Legend.Add(b.Model, bars)
		p.Legend.Add(b.Model+": host link", link)
	}
	if len(marks) > 0 {
		s, err := plotter.NewScatter(marks)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Shape = draw.PyramidGlyph{}
		s.GlyphStyle.Radius = vg.Points(5)
		s.GlyphStyle.Color = color.Black
		p.Add(s)
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 1.2
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Y.Min, p.Y.Max = 0, 1.2*float64(top) // room for the legend
	p.Legend.Top = true
	width := vg.Length(max(640, 24*len(labels)+160))
	c := vgimg.New(width, 480+vg.Length(4*maxLen(labels)))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func maxLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n = max(n, len(s))
	}
	return n
}
