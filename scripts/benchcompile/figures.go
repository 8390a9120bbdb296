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
	"ipu.local/libs/verdict"
)

// figures are one row's in-process measurements.
type figures struct {
	row
	err error // the stage that failed; the figures before it are valid

	search    int64 // the search's price of its incumbent (exchanges at sched's bound)
	estimate  int64 // the cost model's final_cycles for the plan (exchanges scheduled)
	bound     int64 // the plan's compute bound
	final     int64 // the linker's final_cycles
	simulated int64 // device supersteps' cycles and syncs on the simulator
	host      int64 // the host link's cycles (the linker's host_link_cycles)
	inference int64 // every superstep's cycles and syncs on the simulator, the host's included
	// numbers is the output check: worst |error| / tolerance over the
	// outputs (ok when <= 1), and the output that set it.
	worstRatio  float64
	worstOutput string
	// peak is the largest tile's memory (code, exchange code, constants
	// and variables at their peak); capacity the usable bytes per tile.
	peak, capacity int64
	cycles         *breakdown // where the final_cycles go (nil: not measured)

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
		Tiles: f.tiles, Seed: seed, MaxAttempts: attempts, Objective: f.objective,
		ModelPath: filepath.ToSlash(filepath.Clean(f.model)), ModelFingerprint: onnx.Fingerprint(data),
	})
	f.plan = time.Since(start)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if !pl.Cost.Estimated {
		return fmt.Errorf("plan: cost is not the cost model's estimate")
	}
	f.search, f.estimate, f.bound = pl.Search.IncumbentCycles, pl.Cost.FinalCycles, pl.Cost.ComputeBound
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
	f.final, f.host = st.FinalCycles, st.HostLinkCycles(cfg.arch)
	for _, m := range st.Memory {
		f.peak = max(f.peak, m.Total())
	}
	f.capacity = int64(cfg.arch.UsableMemory().Size())

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
		f.inference += ph.Cycles + ph.SyncCycles
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
	b, err := measureBreakdown(pl, cfg.arch, st, res)
	if err != nil {
		return fmt.Errorf("breakdown: %w", err)
	}
	if b.total() != f.final {
		return fmt.Errorf("breakdown: its parts add up to %d cycles, final_cycles is %d", b.total(), f.final)
	}
	f.cycles = &b
	progress("done (host reference %s)", seconds(f.ref))
	return nil
}

// compare sets the worst error-to-tolerance ratio of the outputs, with
// ipu-check's tolerances (libs/verdict: from the output's element type
// and its accumulation length).
func (f *figures) compare(o *obj.Object, want []*onnx.Tensor, outs [][]byte) error {
	if len(want) != len(outs) || len(outs) != len(o.Host.Outputs) {
		return fmt.Errorf("%d outputs simulated, %d in the reference", len(outs), len(want))
	}
	f.worstRatio, f.worstOutput = 0, ""
	for i, w := range want {
		out := o.Host.Outputs[i]
		r, err := verdict.Compare(out.Name, out.DType, out.Accumulate, outs[i], w.Raw)
		if err != nil {
			return err
		}
		ratio := 0.0
		switch {
		case !r.Pass:
			ratio = math.Inf(1)
			if r.Tolerance.Abs > 0 {
				ratio = max(1.001, r.MaxAbsError/r.Tolerance.Abs)
			}
		case r.Tolerance.Abs > 0:
			ratio = r.MaxAbsError / r.Tolerance.Abs
		}
		if f.worstOutput == "" || ratio > f.worstRatio {
			f.worstRatio, f.worstOutput = ratio, out.Name
		}
	}
	return nil
}

// printFigures writes the figures table and, under it, each failed row's
// error.
func printFigures(w io.Writer, cfg config, rows []figures) {
	fmt.Fprintf(w, "compiler figures, in process (arch %s, seed %d, %d attempts; estimate: the plan's cost model; "+
		"simulated: device supersteps with their syncs; bound: MACs at the AMP rate over the plan's tiles; "+
		"search: the search's price, exchanges at their lower bound; host: the host link's cycles; "+
		"inference: every superstep simulated, the host's included; peak: the fullest tile's bytes)\n",
		cfg.arch.Name, seed, attempts)
	tw := table(w)
	fmt.Fprintln(tw, "model\ttiles\tobjective\tsearch\testimate\tfinal_cycles\tsimulated\tbound\tfinal/bound\test_err\tratio_target\testimate_target\thost\tinference\tnumbers\tpeak\tplan\tlink\tsim\tref\t")
	var errs []string
	for _, f := range rows {
		cells := []string{modelName(f.model), fmt.Sprint(f.tiles), f.objective}
		num := func(v int64, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprint(v)
		}
		planned := f.estimate > 0 || f.bound > 0
		linked := f.final > 0
		simulated := f.simulated > 0
		cells = append(cells, num(f.search, planned), num(f.estimate, planned), num(f.final, linked), num(f.simulated, simulated), num(f.bound, planned))

		ratio, ratioTarget := "-", "-"
		if linked && f.bound > 0 {
			rt := float64(f.final) / float64(f.bound)
			ratio = fmt.Sprintf("%.2f", rt)
			if lim, ok := targetOf(ratioTargets, f.row); ok {
				ratioTarget = fmt.Sprintf("%s (<=%g)", passMiss(rt <= lim), lim)
			}
		}
		estErr, estTarget := "-", "-"
		if planned && simulated {
			e := float64(f.estimate-f.simulated) / float64(f.simulated)
			estErr = fmt.Sprintf("%+.1f%%", 100*e)
			estTarget = fmt.Sprintf("%s (<=%.0f%%)", passMiss(math.Abs(e) <= estimateTarget), 100*estimateTarget)
		}
		numbers := "-"
		if f.err == nil {
			numbers = "ok"
			if !(f.worstRatio <= 1) {
				numbers = "mismatch"
			}
		}
		peak := "-"
		if f.peak > 0 {
			peak = fmt.Sprintf("%d/%d", f.peak, f.capacity)
		}
		cells = append(cells, ratio, estErr, ratioTarget, estTarget, num(f.host, linked), num(f.inference, simulated), numbers, peak)
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
	printObjectives(w, rows)
	printBreakdown(w, rows)
}

// printObjectives compares, for each model and tile count planned under
// both objectives, the simulated inference cycles (host included) and
// the final_cycles of the two plans.
func printObjectives(w io.Writer, rows []figures) {
	for _, d := range rows {
		if d.objective != plan.ObjectiveDevice || d.inference == 0 {
			continue
		}
		for _, f := range rows {
			if f.objective != plan.ObjectiveInference || f.model != d.model || f.tiles != d.tiles || f.inference == 0 {
				continue
			}
			fmt.Fprintf(w, "%s: inference objective against device objective: inference cycles %d against %d (%.2fx fewer), final_cycles %d against %d (%+.1f%%)\n",
				f.label(), f.inference, d.inference, float64(d.inference)/float64(f.inference), f.final, d.final, 100*float64(f.final-d.final)/float64(d.final))
		}
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
