package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/link"
	"ipu.local/libs/lower"
	"ipu.local/libs/prog"
	"ipu.local/libs/sim"
)

// breakdown is where a row's device cycles go, superstep by superstep
// of the linked program: a compute superstep's cycles are its longest
// tile's (the linker's figure), split by that tile's kernels' costs into
// the products (the AMP and FP32 matrix kernels, which the compute bound
// prices), the k splits' sums of parts (with the bias, scale and
// activation folded into them) and the rest (the other kernels, the
// launches' calls and the supervisor's own cycles); an exchange
// superstep's cycles are its schedule's, next to sched's lower bound on
// the same transfers; the syncs are the simulator's.
type breakdown struct {
	products, sums, other   int64
	exchange, exchangeBound int64
	syncs                   int64
}

// measureBreakdown lowers pl as the linker did (its packs staged when
// the link staged them) and splits the linked supersteps' cycles (st)
// and the simulated syncs (res).
func measureBreakdown(pl *plan.Plan, p *arch.Preset, st *link.Stats, res *sim.RunResult) (breakdown, error) {
	var b breakdown
	g, err := graph.Decode(&pl.Graph)
	if err != nil {
		return b, err
	}
	q := *pl
	if st.StagedPacks {
		q.Packs = plan.StagedPacks
	}
	pr, err := lower.LowerWith(&q, g, p, lower.Options{NoData: true})
	if err != nil {
		return b, err
	}
	if len(pr.Branches) > 0 {
		return b, errors.New("a program with branches: its supersteps are not all on one path")
	}
	if len(pr.Steps) != len(st.Supersteps) || len(res.Phases) != len(st.Supersteps) {
		return b, fmt.Errorf("%d supersteps lowered, %d linked, %d simulated", len(pr.Steps), len(st.Supersteps), len(res.Phases))
	}
	bound, err := cost.ProgramWith(pr, cost.Options{Bound: true})
	if err != nil {
		return b, err
	}
	for i, s := range pr.Steps {
		ls := st.Supersteps[i]
		if s.Kind != ls.Kind {
			return b, fmt.Errorf("superstep %d (%s): lowered as %v, linked as %v", i, s.Name, s.Kind, ls.Kind)
		}
		switch s.Kind {
		case obj.Compute:
			products, sums, err := longestTileParts(s)
			if err != nil {
				return b, fmt.Errorf("superstep %d (%s): %w", i, s.Name, err)
			}
			if products+sums > ls.Cycles {
				return b, fmt.Errorf("superstep %d (%s): its longest tile's products and sums cost %d cycles, the superstep %d linked", i, s.Name, products+sums, ls.Cycles)
			}
			b.products += products
			b.sums += sums
			b.other += ls.Cycles - products - sums
		case obj.Exchange:
			b.exchange += ls.Cycles
			b.exchangeBound += bound.Supersteps[i]
		}
		if s.Kind != obj.HostExchange {
			b.syncs += res.Phases[i].SyncCycles
		}
	}
	return b, nil
}

// longestTileParts returns the cycles of the products' and the sums'
// launches (each with its call: cost.Launches) on the compute
// superstep's longest tile (the lowest such tile on a tie).
func longestTileParts(s *prog.Superstep) (products, sums int64, err error) {
	tiles := make([]int, 0, len(s.Work))
	for t := range s.Work {
		tiles = append(tiles, t)
	}
	slices.Sort(tiles)
	worst := int64(-1)
	for _, t := range tiles {
		cs, end, err := cost.Launches(s, t)
		if err != nil {
			return 0, 0, err
		}
		if end <= worst {
			continue
		}
		worst, products, sums = end, 0, 0
		for i, k := range s.Work[t] {
			switch k.Params.(type) {
			case *codegen.MatMul:
				products += cs[i]
			case *codegen.SumParts:
				sums += cs[i]
			}
		}
	}
	return products, sums, nil
}

// total is the device cycles the breakdown covers: the linked
// final_cycles.
func (b breakdown) total() int64 {
	return b.products + b.sums + b.other + b.exchange + b.syncs
}

// printBreakdown writes one line per measured row: where its device
// cycles go, and the cycles left with the products at the compute bound
// and every exchange at its lower bound, the rest as it is (how far the
// bound alone could take the row).
func printBreakdown(w io.Writer, rows []figures) {
	for _, f := range rows {
		b := f.cycles
		if f.final == 0 || b == nil {
			continue
		}
		floor := f.bound + b.sums + b.other + b.exchangeBound + b.syncs
		fmt.Fprintf(w, "%s: where the device cycles go (linked; compute on each superstep's longest tile): "+
			"products %d%s, k-split sums %d, other compute %d, exchange %d%s, syncs %d; "+
			"with the products at the compute bound and the exchanges at their bound: %d%s\n",
			f.label(), b.products, against(b.products, f.bound, "the compute bound"), b.sums, b.other,
			b.exchange, against(b.exchange, b.exchangeBound, "its lower bound"), b.syncs,
			floor, against(floor, f.bound, "the compute bound"))
	}
}

// against is " (a/b x the bound b)", or nothing when b is 0.
func against(a, b int64, bound string) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.2fx %s %d)", float64(a)/float64(b), bound, b)
}
