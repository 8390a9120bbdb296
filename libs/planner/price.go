package planner

// Pricing points: a point's plan lowered (with a step cache) and costed,
// the points not priced before on a worker per core.

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/cost"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
	"ipu.local/libs/par"
	"ipu.local/libs/prog"
	"ipu.local/libs/sched"
)

// searchWorkers is the number of points priced at once: one a core, at
// most 4 (each worker's step cache holds lowered programs).
func searchWorkers() int {
	return max(1, min(par.Cores(), 4))
}

// eval prices a point: its plan lowered and costed.
func (pl *planner) eval(pt point) (*result, error) {
	rs, errs := pl.evalAll([]point{pt})
	pl.count(pt)
	return rs[0], errs[0]
}

// count counts pt among the points the search priced, once: evalAll
// may price points (ahead of the walk) that the search then drops.
func (pl *planner) count(pt point) {
	if k := pt.key(); !pl.counted[k] {
		pl.counted[k] = true
		pl.evals++
	}
}

// evalAll prices points, the ones not priced before in parallel, each
// worker with its own step cache (a cache's lowered programs share
// buffers and kernels, which pricing writes to). The results and the
// caller's counts do not depend on the workers: a point's price does
// not depend on what a cache holds. The new points' plans are built
// first, side by side; a point whose plan gives the lowering the program
// of one priced before (program.go) takes that price, with its own
// builder.
func (pl *planner) evalAll(pts []point) ([]*result, []error) {
	rs, errs := make([]*result, len(pts)), make([]error, len(pts))
	todo := pl.uncached(pts, rs)
	built, pcs := pl.buildAll(pts, todo)
	pl.settle(pts, todo, built, pcs, rs, errs)
	return rs, errs
}

// noCeiling is a ceiling no price reaches.
const noCeiling = math.MaxInt64

// evalBelow prices the points of pts that may cost less than their
// ceilings (ceil[i]) and, when running, less than or as much as the
// cheapest fitting point priced so far: a point whose floor (the host
// link's cycles for its fetch, known from its plan before it is
// lowered) is at its ceiling or above that cheapest price is skipped,
// its result and error both nil. The points are priced a round of one
// a worker at a time, in order of their floors, the ones priced before
// or sharing a program priced before first, those at the lowest floor
// all in the first round. The points skipped depend on the workers, the
// prices of the others do not.
func (pl *planner) evalBelow(pts []point, ceil []int64, running bool) ([]*result, []error) {
	rs, errs := make([]*result, len(pts)), make([]error, len(pts))
	todo := pl.uncached(pts, rs)
	built, pcs := pl.buildAll(pts, todo)
	best := int64(noCeiling)
	note := func(is []int) {
		for _, i := range is {
			if running && rs[i] != nil && rs[i].mem == nil {
				best = min(best, rs[i].cost())
			}
		}
	}
	for i := range pts {
		note([]int{i}) // the points priced before
	}
	// The free points (no plan, or a program priced before) settle first.
	var free, rest []int
	floor := make([]int64, len(pts))
	for _, i := range todo {
		if _, ok := pl.programs[built[i].print]; ok || pcs[i].err != nil {
			free = append(free, i)
			continue
		}
		floor[i] = pl.floor(built[i])
		rest = append(rest, i)
	}
	pl.settle(pts, free, built, pcs, rs, errs)
	note(free)
	slices.SortStableFunc(rest, func(a, b int) int { return cmp.Compare(floor[a], floor[b]) })
	// A point at the lowest floor is never skipped for a cheaper one (a
	// price is at least its floor): those go in the first round
	// together, priced side by side as evalAll does (a model whose
	// points all have one floor loses nothing to the rounds).
	lowest := int64(0)
	if len(rest) > 0 {
		lowest = floor[rest[0]]
	}
	for len(rest) > 0 {
		var round []int
		for len(rest) > 0 && (len(round) < len(pl.steps) || floor[rest[0]] <= lowest) {
			i := rest[0]
			rest = rest[1:]
			if floor[i] >= ceil[i] || floor[i] > best {
				continue
			}
			round = append(round, i)
		}
		pl.settle(pts, round, built, pcs, rs, errs)
		note(round)
	}
	return rs, errs
}

// ceilings returns n ceilings of c.
func ceilings(n int, c int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// floor is a lower bound of a built point's price: the host link's
// cycles for its fetch (hostCycles), none under the device objective.
func (pl *planner) floor(bp builtPoint) int64 {
	if pl.device {
		return 0
	}
	return fetchCycles(pl.p, bp.b.tensors)
}

// uncached returns the indices of pts not priced before and sets the
// others' results.
func (pl *planner) uncached(pts []point, rs []*result) []int {
	var todo []int
	for i, pt := range pts {
		if r, ok := pl.cache[pt.key()]; ok {
			rs[i] = r
			continue
		}
		todo = append(todo, i)
	}
	return todo
}

// buildAll builds the plans of pts[todo] side by side; a plan's error
// is its pricing's.
func (pl *planner) buildAll(pts []point, todo []int) ([]builtPoint, []pricing) {
	pcs := make([]pricing, len(pts))
	built := make([]builtPoint, len(pts))
	par.For(len(todo), len(pl.steps), func(w, j int) {
		i := todo[j]
		built[i], pcs[i].err = pl.buildPointWith(pts[i], pl.memos[w])
	})
	return built, pcs
}

// settle prices the built points pts[todo], each program once (the
// first point of each new print is priced, the others copy its price),
// and sets their results and errors.
func (pl *planner) settle(pts []point, todo []int, built []builtPoint, pcs []pricing, rs []*result, errs []error) {
	var priced []int
	rep := make(map[int]bool) // the point priced for its program
	first := map[programPrint]bool{}
	for _, i := range todo {
		if pcs[i].err != nil {
			continue
		}
		if _, ok := pl.programs[built[i].print]; ok || first[built[i].print] {
			continue
		}
		first[built[i].print], rep[i] = true, true
		priced = append(priced, i)
	}
	par.For(len(priced), len(pl.steps), func(w, j int) {
		i := priced[j]
		pcs[i] = pl.price(built[i], pl.steps[w])
	})
	for _, i := range priced {
		pl.programs[built[i].print] = pcs[i]
	}
	for _, i := range todo {
		pc := pcs[i]
		if pc.err == nil && !rep[i] {
			pc = pl.programs[built[i].print].shared()
		}
		pl.expansion += pc.expansion
		pl.footprint += pc.footprint
		if pc.err != nil {
			errs[i] = pc.err
			continue
		}
		if r, ok := pl.cache[pts[i].key()]; ok {
			rs[i] = r // the same point twice in pts
			continue
		}
		pl.cache[pts[i].key()] = pc.r
		rs[i] = pc.r
	}
}

// builtPoint is a point, its builder, plan and the plan's print.
type builtPoint struct {
	pt    point
	b     *builder
	plan  *plan.Plan
	print programPrint
}

// buildPoint builds pt's plan.
func (pl *planner) buildPoint(pt point) (builtPoint, error) { return pl.buildPointWith(pt, nil) }

// buildPointWith builds pt's plan with a worker's tensor memo.
func (pl *planner) buildPointWith(pt point, memo tensorMemo) (builtPoint, error) {
	b, err := pl.build(pt)
	if err != nil {
		return builtPoint{}, err
	}
	p := b.plan(pl, pt, memo)
	return builtPoint{pt: pt, b: b, plan: p, print: printOf(p)}, nil
}

// shared is the pricing of another point with the same program: the
// same price and error, no time spent.
func (pc pricing) shared() pricing {
	out := pricing{err: pc.err}
	if pc.r != nil {
		r := *pc.r
		out.r = &r
	}
	return out
}

// pricing is one point's price and the time its parts took.
type pricing struct {
	r                    *result
	err                  error
	expansion, footprint time.Duration
}

// price lowers and costs a built point with a step cache that no other
// goroutine uses.
func (pl *planner) price(bp builtPoint, steps *lower.StepCache) (pc pricing) {
	b := bp.b
	r := &result{}
	pr, err := lower.LowerWith(bp.plan, pl.g, pl.p, lower.Options{NoData: true, Cache: steps})
	if err != nil {
		var pe *lower.PlanError
		if errors.As(err, &pe) {
			if verr := b.check(); verr != nil {
				err = verr
			}
			if n := bp.pt.cutNode(pl.g); n != nil {
				// A layout the rest of the plan cannot take from a split
				// cut in two: no candidate (the grids always are).
				err = &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: "a split cut in two: " + err.Error()}
			}
		}
		pc.err = err
		return pc
	}
	t0 := time.Now()
	var exch []int64
	var syn func(prog.Ref) uint32 // made on first use: expandGeometry may need no address
	r.geo, exch = expandGeometry(pl.p, pr, func(x prog.Ref) uint32 {
		if syn == nil {
			syn = cost.Synthetic(pl.p, pr.Buffers)
		}
		return syn(x)
	})
	t1 := time.Now()
	pc.expansion = t1.Sub(t0)
	err = r.geo.check(sched.FragmentLimit(pl.p))
	if err == nil {
		r.il, err = fits(pl.p, pl.tiles, pl.usable, pr)
	}
	if err == nil && pl.maxVariable > 0 {
		err = fitsLargest(pl.p, pl.tiles, pl.maxVariable, pr)
	}
	pc.footprint = time.Since(t1)
	if err != nil {
		r.mem = err
		pc.r = r
		return pc
	}
	c, err := cost.ProgramWith(pr, cost.Options{Bound: true})
	if err != nil {
		pc.err = err
		return pc
	}
	if err := fitsCode(pl.p, pr, exch, b.halved); err != nil {
		var ce *CodeError
		if !errors.As(err, &ce) {
			pc.err = err
			return pc
		}
		r.mem = err
		pc.r = r
		return pc
	}
	r.total, r.exchange, r.transfers = c.FinalCycles, c.FinalExchange, c.Transfers
	r.host = hostCycles(pl.p, b.tensors, pr)
	r.obj = r.total + r.host
	if pl.device {
		r.obj = r.total
	}
	pc.r = r
	return pc
}

// hostCycles is the host link's cycles for a point: the fetch moves its
// host tensors' bytes (every piece's storage, copies included; the
// lowering for pricing leaves the fetch's transfers out), the result
// superstep the program's output transfers, each over the chip's link
// (the simulator charges a host superstep at least that,
// arch.Preset.HostBytesPerCycle).
func hostCycles(p *arch.Preset, tensors []*layout.Tensor, pr *prog.Program) int64 {
	per := int64(p.HostBytesPerCycle)
	if per <= 0 {
		return 0
	}
	bytes := fetchBytes(tensors)
	for _, s := range pr.Steps {
		if s.Kind != obj.HostExchange || s.Name == "fetch" {
			continue
		}
		for _, ops := range s.Host {
			for _, op := range ops {
				bytes += int64(op.Bytes)
			}
		}
	}
	return (bytes + per - 1) / per // as link.Stats.HostLinkCycles
}

// fetchBytes is the bytes the fetch moves: every piece's storage of the
// host tensors, copies included.
func fetchBytes(tensors []*layout.Tensor) int64 {
	var fetch int64
	for _, t := range tensors {
		if t.Source != layout.FromHost {
			continue
		}
		for i := range t.Pieces {
			fetch += int64(t.Geometry(i).Bytes())
		}
	}
	return fetch
}

// fetchCycles is the host link's cycles for the fetch alone, at most
// hostCycles.
func fetchCycles(p *arch.Preset, tensors []*layout.Tensor) int64 {
	per := int64(p.HostBytesPerCycle)
	if per <= 0 {
		return 0
	}
	return (fetchBytes(tensors) + per - 1) / per
}
