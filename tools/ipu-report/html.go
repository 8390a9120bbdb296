package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"path/filepath"

	"ipu.local/formats/profile"
)

// file is one file of the report.
type file struct {
	name string
	data []byte
}

// render draws every file the inputs allow.
func (r *report) render() ([]file, error) {
	var files []file
	type plotFn struct {
		name, title string
		fn          func() ([]byte, error)
		ok          bool
	}
	var plots []figure
	for _, pf := range []plotFn{
		{"memory.png", "Memory per tile by category", r.memoryPlot, r.in.obj != nil && len(r.memory) > 0},
		{"timeline.png", "BSP timeline", r.timelinePlot, len(r.phases) > 0},
		{"tiles.png", "Cycles per tile on the tile grid", r.tilesPlot, len(r.phases) > 0},
		{"liveness.png", "Live bytes over the program", r.livenessPlot, r.live != nil},
	} {
		if !pf.ok {
			continue
		}
		data, err := pf.fn()
		if err != nil {
			return nil, err
		}
		files = append(files, file{pf.name, data})
		plots = append(plots, figure{Title: pf.title, File: pf.name,
			URI: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(data))})
	}
	if r.in.prof != nil {
		data, err := r.traceJSON()
		if err != nil {
			return nil, err
		}
		files = append(files, file{"trace.json", data})
	}
	page, err := r.html(plots)
	if err != nil {
		return nil, err
	}
	files = append(files, file{"index.html", page})
	return files, nil
}

type figure struct {
	Title, File string
	URI         template.URL
}

type kv struct{ K, V string }

type memRow struct {
	Tile                                     int
	Code, ExchangeCode, Constants, Variables string
	Stacks, Profile, Used                    string
	Free, Percent                            string
}

func (r *report) summary() (rows, verdicts []kv) {
	add := func(k, v string) { rows = append(rows, kv{k, v}) }
	in := r.in
	if in.plan != nil {
		add("model", fmt.Sprintf("%s (%s)", filepath.Base(in.plan.Model.Path), in.plan.Graph.Name))
	}
	add("architecture", fmt.Sprintf("%s, %d tiles, %.0f MHz", in.preset.Name, in.preset.Tiles, in.preset.ClockHz/1e6))
	if in.plan != nil {
		add("tiles", fmt.Sprint(in.plan.Tiles))
		c := in.plan.Cost
		add("final_cycles", group(c.FinalCycles))
		add("final_exchange", group(c.FinalExchange))
		add("compute_bound", group(c.ComputeBound))
		if c.ComputeBound > 0 {
			add("ratio", fmt.Sprintf("%.2f (final_cycles / compute_bound)", float64(c.FinalCycles)/float64(c.ComputeBound)))
		}
		if c.HostLinkCycles > 0 {
			add("host_link_cycles", group(c.HostLinkCycles)+" (the fetch's and the result's bytes over the host link)")
		}
		search := fmt.Sprintf("%d attempts, incumbent %s cycles", in.plan.Search.Attempts, group(in.plan.Search.IncumbentCycles))
		if o := in.plan.Search.Objective; o != "" {
			search += ", objective " + o
		}
		add("search", search)
	} else if in.obj != nil {
		add("tiles", fmt.Sprint(len(in.obj.Tiles)))
	}
	if len(r.phases) > 0 {
		add("profiled cycles", fmt.Sprintf("%s in %d supersteps (%s on the device, %.1f us)", group(r.totalCycles()), len(r.phases),
			group(r.deviceCycles()), float64(r.totalCycles())*1e6/in.preset.ClockHz))
		add("host bytes", group(r.hostBytes()))
	}
	if len(r.memory) > 0 {
		w := r.worstMemory()[0]
		add("largest tile", fmt.Sprintf("tile %d: %s of %s bytes (%.1f%%)", w.Tile, group(w.Used()), group(r.usable), 100*float64(w.Used())/float64(r.usable)))
	}
	if in.prof != nil {
		if in.plan != nil {
			v := "PASS: the profile's device cycles equal the plan's final_cycles"
			if d := r.deviceCycles() - in.plan.Cost.FinalCycles; d != 0 {
				v = fmt.Sprintf("DIFFER: the profile's device cycles %s, the plan's final_cycles %s", group(r.deviceCycles()), group(in.plan.Cost.FinalCycles))
			}
			verdicts = append(verdicts, kv{"cycles", v})
		}
		if len(r.memory) > 0 {
			v := "PASS: every tile fits its usable memory"
			if r.worstMemory()[0].Used() > r.usable {
				v = "FAIL: a tile is over its usable memory"
			}
			verdicts = append(verdicts, kv{"memory", v})
		}
		for _, b := range in.prof.Branches {
			side := "else"
			if b.ThenRan {
				side = "then"
			}
			verdicts = append(verdicts, kv{"branch " + b.If, fmt.Sprintf("%s side ran, %s cycles", side, group(b.Cycles))})
		}
		host := 0
		for _, ph := range in.prof.Phases {
			if ph.Kind == profile.KindHost {
				host++
			}
		}
		verdicts = append(verdicts, kv{"profile", fmt.Sprintf("%d inference(s), %d supersteps (%d host), package %.12s", in.prof.Inferences, len(in.prof.Phases), host, in.prof.Fingerprint)})
	}
	return rows, verdicts
}

func (r *report) memRows() []memRow {
	var out []memRow
	for _, m := range r.worstMemory()[:min(len(r.memory), 16)] {
		free := group(r.usable - m.Used())
		out = append(out, memRow{Tile: m.Tile, Code: group(m.Code), ExchangeCode: group(m.ExchangeCode), Constants: group(m.Constants),
			Variables: group(m.Variables), Stacks: group(m.Stacks), Profile: group(m.Profile), Used: group(m.Used()), Free: free, Percent: fmt.Sprintf("%.1f%%", 100*float64(m.Used())/float64(r.usable))})
	}
	return out
}

type nodeView struct {
	Name, Op, Kernel, Cycles, Bytes string
	Tiles, Supersteps               int
}

func (r *report) nodeViews() []nodeView {
	var out []nodeView
	for _, n := range r.nodes {
		v := nodeView{Name: n.Name, Op: n.Op, Kernel: n.Kernel, Tiles: n.Tiles, Supersteps: n.Supersteps, Bytes: group(n.Bytes), Cycles: "-"}
		if r.in.prof != nil {
			v.Cycles = group(n.Cycles)
		}
		out = append(out, v)
	}
	return out
}

func (r *report) html(plots []figure) ([]byte, error) {
	rows, verdicts := r.summary()
	title := "ipu-report"
	if r.in.plan != nil {
		title = "ipu-report: " + filepath.Base(r.in.plan.Model.Path)
	}
	var inputs []kv
	for _, f := range []kv{{"plan", r.in.planPath}, {"object", r.in.objPath}, {"profile", r.in.profPath}} {
		if f.V != "" {
			inputs = append(inputs, kv{f.K, filepath.Base(f.V)})
		}
	}
	var b bytes.Buffer
	err := page.Execute(&b, map[string]any{
		"Title": title, "Summary": rows, "Verdicts": verdicts, "Plots": plots,
		"Nodes": r.nodeViews(), "Memory": r.memRows(), "Inputs": inputs,
		"Trace": r.in.prof != nil, "Usable": group(r.usable),
	})
	if err != nil {
		return nil, fmt.Errorf("index.html: %w", err)
	}
	return b.Bytes(), nil
}

var page = template.Must(template.New("index.html").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 15px/1.4 system-ui, sans-serif; margin: 0 auto; padding: 16px; max-width: 1240px; color: #222; }
h1 { font-size: 24px; margin: 8px 0; }
h2 { font-size: 19px; margin: 24px 0 8px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0; }
figure img { width: 100%; max-width: 1200px; height: auto; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 13px; }
.pass { color: #1a7f37; } .fail { color: #b00020; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>From {{range $i, $f := .Inputs}}{{if $i}}, {{end}}{{$f.K}} <code>{{$f.V}}</code>{{end}}.
{{if .Trace}}The trace of the profile is <a href="trace.json">trace.json</a>: open it in ui.perfetto.dev with "Open trace file".{{end}}</p>
<h2 id="summary">Summary</h2>
<table class="summary">
{{range .Summary}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>
{{end}}</table>
{{if .Verdicts}}<h2 id="verdicts">Verdicts</h2>
<table class="verdicts">
{{range .Verdicts}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>
{{end}}</table>{{end}}
{{if .Plots}}<h2 id="plots">Plots</h2>
{{range .Plots}}<figure><img src="{{.URI}}" alt="{{.Title}}" width="1200" height="500"><figcaption>{{.Title}} (<a href="{{.File}}">{{.File}}</a>)</figcaption></figure>
{{end}}{{end}}
{{if .Nodes}}<h2 id="nodes">Nodes</h2>
<table class="nodes">
<tr><th>node</th><th>op</th><th>kernel</th><th class="n">cycles</th><th class="n">supersteps</th><th class="n">tiles</th><th class="n">output bytes</th></tr>
{{range .Nodes}}<tr><td>{{.Name}}</td><td>{{.Op}}</td><td>{{.Kernel}}</td><td class="n">{{.Cycles}}</td><td class="n">{{.Supersteps}}</td><td class="n">{{.Tiles}}</td><td class="n">{{.Bytes}}</td></tr>
{{end}}</table>{{end}}
{{if .Memory}}<h2 id="memory">Worst tiles' memory</h2>
<p>Bytes of the tiles using the most memory, of {{.Usable}} usable bytes per tile.</p>
<table class="memory">
<tr><th class="n">tile</th><th class="n">code</th><th class="n">exchange code and tables</th><th class="n">constants</th><th class="n">variables</th><th class="n">stacks</th><th class="n">profile</th><th class="n">used</th><th class="n">free</th><th class="n">used %</th></tr>
{{range .Memory}}<tr><td class="n">{{.Tile}}</td><td class="n">{{.Code}}</td><td class="n">{{.ExchangeCode}}</td><td class="n">{{.Constants}}</td><td class="n">{{.Variables}}</td><td class="n">{{.Stacks}}</td><td class="n">{{.Profile}}</td><td class="n">{{.Used}}</td><td class="n">{{.Free}}</td><td class="n">{{.Percent}}</td></tr>
{{end}}</table>{{end}}
</body>
</html>
`))
