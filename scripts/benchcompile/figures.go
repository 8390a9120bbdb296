package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"ipu.local/libs/sim"
)

// figures are one row's in-process measurements.
type figures struct {
	row
	err error // the stage that failed; the figures before it are valid

	estimate  int64 // the cost model's final_cycles for the plan
	bound     int64 // the plan's compute bound
	final     int64 // the linker's final_cycles
	simulated int64 // device supersteps' cycles and syncs on the simulator
	// numbers is the output check: worst |error| / tolerance over the
	// outputs (ok when <= 1), and the output that set it.
	worstRatio  float64
	worstOutput string

	plan, link, sim, ref time.Duration // wall times
}

// measureFigures plans, links and simulates one row.
func measureFigures(cfg config, r row) figures {
	f := figures{row: r}
	f.err = f.measure(cfg)
	return f
}

func (f *figures) measure(cfg config) error {
	progress := func(format string, args ...any) {
		fmt.Fprintf(cfg.progress, "benchcompile: %s: %s\n", f.label(), fmt.Sprintf(format, args...))
	}
	data, err := os.ReadFile(f.model)
	if err != nil {
		return fmt.Errorf("read model: %w", err)
	}
	m, err := onnx.ReadModel(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.model, err)
	}
	g, err := graph.Build(m)
	if err != nil {
		return fmt.Errorf("%s: %w", f.model, err)
	}

	progress("planning (seed %d, %d attempts)", seed, attempts)
	start := time.Now()
	pl, _, _, err := planner.Plan(g, cfg.arch, planner.Options{
		Tiles: f.tiles, Seed: seed, MaxAttempts: attempts,
		ModelPath: filepath.ToSlash(filepath.Clean(f.model)), ModelFingerprint: onnx.Fingerprint(data),
	})
	f.plan = time.Since(start)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if !pl.Cost.Estimated {
		return fmt.Errorf("plan: cost is not the cost model's estimate")
	}
	f.estimate, f.bound = pl.Cost.FinalCycles, pl.Cost.ComputeBound
	encoded, err := plan.Marshal(pl)
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}

	progress("linking (plan %s)", seconds(f.plan))
	start = time.Now()
	o, st, err := link.Link(pl, plan.Fingerprint(encoded), link.Options{})
	f.link = time.Since(start)
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	f.final = st.FinalCycles

	ins := hostref.GenerateInputs(g, 1)
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	progress("simulating %d tiles (link %s)", st.Tiles, seconds(f.link))
	start = time.Now()
	outs, res, err := link.Simulate(o, raw, sim.Options{})
	f.sim = time.Since(start)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if len(res.Phases) != len(st.Supersteps) {
		return fmt.Errorf("simulate: ran %d supersteps, the linker costed %d", len(res.Phases), len(st.Supersteps))
	}
	for i, ph := range res.Phases {
		if st.Supersteps[i].Kind != obj.HostExchange {
			f.simulated += ph.Cycles + ph.SyncCycles
		}
	}

	progress("host reference (simulation %s)", seconds(f.sim))
	start = time.Now()
	want, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: runtime.NumCPU()})
	f.ref = time.Since(start)
	if err != nil {
		return fmt.Errorf("host reference: %w", err)
	}
	if err := f.compare(o, want, outs); err != nil {
		return fmt.Errorf("compare outputs: %w", err)
	}
	progress("done (host reference %s)", seconds(f.ref))
	return nil
}

// compare sets the worst error-to-tolerance ratio of the outputs. The
// tolerance is libs/link's test's: the bound of a chain of Accumulate
// FP32 additions plus two roundings, relative to the largest reference
// magnitude.
func (f *figures) compare(o *obj.Object, want []*onnx.Tensor, outs [][]byte) error {
	if len(want) != len(outs) || len(outs) != len(o.Host.Outputs) {
		return fmt.Errorf("%d outputs simulated, %d in the reference", len(outs), len(want))
	}
	f.worstRatio, f.worstOutput = 0, ""
	for i, w := range want {
		name := o.Host.Outputs[i].Name
		wv, err := graph.DecodeFloats(w)
		if err != nil {
			return fmt.Errorf("reference %q: %w", name, err)
		}
		gv, err := graph.DecodeFloats(&onnx.Tensor{DType: w.DType, Dims: w.Dims, Raw: outs[i]})
		if err != nil {
			return fmt.Errorf("output %q: %w", name, err)
		}
		if len(gv) != len(wv) {
			return fmt.Errorf("output %q: %d elements, the reference has %d", name, len(gv), len(wv))
		}
		var worst, maxw float64
		for k := range wv {
			d := math.Abs(gv[k] - wv[k])
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			worst = max(worst, d)
			maxw = max(maxw, math.Abs(wv[k]))
		}
		k := float64(o.Host.Outputs[i].Accumulate)
		tol := (k*0x1p-24/(1-k*0x1p-24) + 2*0x1p-24) * maxw
		ratio := math.Inf(1)
		switch {
		case worst == 0:
			ratio = 0
		case tol > 0:
			ratio = worst / tol
		}
		if f.worstOutput == "" || ratio > f.worstRatio {
			f.worstRatio, f.worstOutput = ratio, name
		}
	}
	return nil
}

// printFigures writes the figures table and, under it, each failed row's
// error.
func printFigures(w io.Writer, cfg config, rows []figures) {
	fmt.Fprintf(w, "compiler figures, in process (arch %s, seed %d, %d attempts; estimate: the plan's cost model; "+
		"simulated: device supersteps with their syncs; bound: MACs at the AMP rate over the plan's tiles)\n",
		cfg.arch.Name, seed, attempts)
	tw := table(w)
	fmt.Fprintln(tw, "model\ttiles\testimate\tfinal_cycles\tsimulated\tbound\tfinal/bound\test_err\tratio_target\testimate_target\tnumbers\tplan\tlink\tsim\tref\t")
	var errs []string
	for _, f := range rows {
		cells := []string{filepath.Base(f.model), fmt.Sprint(f.tiles)}
		num := func(v int64, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprint(v)
		}
		planned := f.estimate > 0 || f.bound > 0
		linked := f.final > 0
		simulated := f.simulated > 0
		cells = append(cells, num(f.estimate, planned), num(f.final, linked), num(f.simulated, simulated), num(f.bound, planned))

		ratio, ratioTarget := "-", "-"
		if linked && f.bound > 0 {
			rt := float64(f.final) / float64(f.bound)
			ratio = fmt.Sprintf("%.2f", rt)
			if lim, ok := ratioTargets[filepath.Base(f.model)]; ok {
				ratioTarget = fmt.Sprintf("%s (<=%.1f)", verdict(rt <= lim), lim)
			}
		}
		estErr, estTarget := "-", "-"
		if planned && simulated {
			e := float64(f.estimate-f.simulated) / float64(f.simulated)
			estErr = fmt.Sprintf("%+.1f%%", 100*e)
			estTarget = fmt.Sprintf("%s (<=%.0f%%)", verdict(math.Abs(e) <= estimateTarget), 100*estimateTarget)
		}
		numbers := "-"
		if f.err == nil {
			numbers = "ok"
			if !(f.worstRatio <= 1) {
				numbers = "mismatch"
			}
		}
		cells = append(cells, ratio, estErr, ratioTarget, estTarget, numbers)
		for _, d := range []time.Duration{f.plan, f.link, f.sim, f.ref} {
			if d == 0 {
				cells = append(cells, "-")
			} else {
				cells = append(cells, seconds(d))
			}
		}
		fmt.Fprintln(tw, joinCells(cells))
		if f.err != nil {
			errs = append(errs, fmt.Sprintf("%s: error: %v", f.label(), f.err))
		} else {
			errs = append(errs, fmt.Sprintf("%s: numbers: worst |error| / tolerance %.3g (output %q), linked final_cycles %s simulated", f.label(), f.worstRatio, f.worstOutput, sameOrNot(f.final == f.simulated)))
		}
	}
	tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
}

func sameOrNot(same bool) string {
	if same {
		return "=="
	}
	return "!="
}

// joinCells is one tabwriter line (a trailing tab ends the last cell so
// that it aligns too).
func joinCells(cells []string) string {
	s := ""
	for _, c := range cells {
		s += c + "\t"
	}
	return s
}
