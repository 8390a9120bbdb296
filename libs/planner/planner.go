// Package planner maps a graph onto the tiles and writes the result as a
// plan (formats/plan): every value's tensors (tile mappings) and every
// step of the program, so that the linker only carries them out.
//
// The search decides each matrix product's split (batch, rows, columns,
// k), its tile range, its cast order and its stationary operand; every
// other layout follows from those decisions by the rules of build.go, so
// that each point of the search is a complete program. A point is priced
// by lowering its plan (libs/lower) and costing the program (libs/cost):
// the same program the linker places, so the estimate is the linked
// program's cycles up to the exchanges' placed addresses.
//
// The search is deterministic for a seed: an analytic start (per
// product, the best of its screened splits given the ones before it; a
// wide start also prices its first candidates filled to the tiles, then
// makes refit rounds, fill.go), then MaxAttempts seeded local moves
// (change one split factor, flip the cast order, swap the stationary
// operand), keeping improvements and, with a small seeded probability,
// walking onto a worse point. The state
// (attempts, RNG, current point, incumbent, visited set) goes to a
// plan.State, so two runs of N attempts equal one of 2N.
package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
	"ipu.local/libs/sched"
)

// Options control Plan.
type Options struct {
	Tiles       int    // tiles to use (0: the preset's)
	Seed        uint64 // search seed
	MaxAttempts int    // local moves this call makes
	// Shard of Shards: search shard.go's part Shard of a search split
	// into Shards (0 of 0, or of 1: the whole, unsharded).
	Shard, Shards int
	// State resumes an earlier search (nil: fresh).
	State *plan.State
	// ModelPath and ModelFingerprint go into the plan and state.
	ModelPath, ModelFingerprint string
	// SearchEstimate leaves the plan's cost at the search's own price
	// (every exchange at sched's lower bound) instead of scheduling the
	// incumbent's exchanges: for a caller that links the plan next and
	// takes the exact cycles from there (ipu-plan).
	SearchEstimate bool
	// Objective is what the search minimises: plan.ObjectiveInference
	// ("", the default) or plan.ObjectiveDevice. A resumed search keeps
	// its state's.
	Objective string
	// MemoryReserve is the bytes of every tile the search keeps free
	// beyond its memory checks, which count a tile's bytes and not the
	// free ranges the linker places in: for a plan that did not place.
	// A resumed search keeps its state's.
	MemoryReserve int64
	// MaxVariable, when not 0, is the largest variable (a buffer with
	// no data, not permanent) the search lets a tile hold, in bytes: for
	// a plan whose variable did not place in memory that was free, but
	// in pieces (large variables are what the linker's placement cannot
	// fit between the others' lifetimes). A resumed search keeps its
	// state's.
	MaxVariable int64
	// Progress, when set, is told the attempts made so far out of
	// MaxAttempts and the incumbent's cycles, before each attempt and
	// once at the end (a progress bar; it must not change anything).
	Progress func(done, total int, incumbent int64)
	// StartProgress, when set, is told the products the analytic start
	// has decided so far out of all, before the first and after each
	// (the start may begin again from 0: with halved rows laid out
	// whole, or narrow; a search resumed from a state makes no start and
	// never calls it); like Progress, it must not change anything.
	StartProgress func(decided, products int)
}

// Stats are the figures of the planner's log lines.
type Stats struct {
	Attempts  int  // attempts of this call
	Resuming  bool // the call continued a saved state
	Evaluated int  // points costed
	// Exchange geometry of the incumbent (geometry.go): its largest
	// tile's exchange code expanded, the same by the heuristic of 5
	// instructions a fragment, its most fragments on one tile, and the
	// limit candidates were screened against; the search's time
	// expanding geometries, and that plus checking footprints.
	EstimatedRowBytes                int64
	HeuristicRowBytes                int64
	GeometryFragmentsPerTile         int
	FragmentLimit                    int
	Expansion, ExpansionAndFootprint time.Duration
	// PaddingClearsRemoved counts the plan's FP8 casts whose padding is
	// never read, whose clears the lowering's padding-clear pass removed
	// (prog.Program.PadClearsRemoved of the plan's program).
	PaddingClearsRemoved int
	Transfers            int // transfers of every exchange phase of the incumbent
	// Rewrites are the graph passes' changes.
	Rewrites []graph.Rewrite
	// SideBySide are the sibling groups the start placed side by side
	// (siblings.go), by signature; none when the search resumed.
	SideBySide []SideBySide
}

// acceptWorse is the probability of walking onto a worse point.
const acceptWorse = 0.05

// planner holds one Plan call.
type planner struct {
	// device: the search minimises final_cycles alone
	// (plan.ObjectiveDevice), not with the host link's cycles.
	device   bool
	g        *graph.Graph
	p        *arch.Preset
	tiles    int
	products []*product
	prod     map[int]*product    // by node index
	folded   map[int]*graph.Node // chain node -> its product node
	prefs    *prefs
	encoded  plan.Graph         // the graph as plans carry it (shared, never changed)
	cache    map[string]*result // evaluated points by key
	// programs are the prices of the programs priced, by print
	// (program.go): a point with the same program takes its price.
	programs map[programPrint]pricing
	steps    []*lower.StepCache // lowered steps, across points: one per worker
	// memos are the plan tensors of each worker's last plans (tensorMemo).
	memos []tensorMemo
	// sideBySide records the start's sibling groups side by side.
	sideBySide []SideBySide
	padRemoved int             // FP8 cast padding clears the plan's lowering removed (finish)
	evals      int             // points priced
	counted    map[string]bool // the points evals counts
	// expansion and footprint are the time the search spent expanding
	// exchange geometry, and checking memory footprints.
	expansion, footprint time.Duration
	// usable is the tile memory the search fills: the preset's usable
	// memory less Options.MemoryReserve.
	usable int64
	// maxVariable is Options.MaxVariable: 0, or the largest variable a
	// point may put on a tile.
	maxVariable int64
	// constN and weights are the products reading constants, plus one,
	// and their constant operands' bytes, once each (constShare, wide).
	constN, weights int64
	// keep is how many splits per product the start prices in full
	// (startKeep, deepKeep).
	keep int
	// constShare is the constant bytes per tile one product may take:
	// the usable memory shared by the products reading constants.
	constShare int64
	// wide: the start prices splits that copy constants further (see
	// wideWeights).
	wide bool
	// whole are the row operators' inputs that keep the row alignment
	// their readers want (rowLayout): halved, their code did not fit.
	whole map[int]bool
	// starting is set while startFitting makes the start: a candidate
	// refused for the code of a tile holding halved row layouts then
	// ends the start (cheapest), which is made again with them whole.
	starting bool
	// siblingsBefore are each product's earlier siblings (placeRange).
	siblingsBefore [][]int
	// blocks holds the products' block pieces by split (blocks.go).
	blocks pieceMemo
	// startProgress is Options.StartProgress (nil: none).
	startProgress func(decided, products int)
}

func newPlanner(g *graph.Graph, p *arch.Preset, tiles int) (*planner, error) {
	pl := &planner{g: g, p: p, tiles: tiles, prod: map[int]*product{}, folded: map[int]*graph.Node{}, cache: map[string]*result{}, programs: map[programPrint]pricing{}, counted: map[string]bool{}, whole: map[int]bool{}, encoded: graph.Encode(g)}
	for range searchWorkers() {
		pl.steps = append(pl.steps, lower.NewStepCache())
		pl.memos = append(pl.memos, tensorMemo{})
	}
	uses := map[*graph.Value]int{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			if v != nil {
				uses[v]++
			}
		}
	}
	for _, v := range g.Outputs {
		uses[v]++
	}
	for _, n := range g.Nodes {
		if n.Op != "MatMul" && n.Op != "Gemm" {
			continue
		}
		pr := &product{node: n, idx: n.Index, a: trace(n.Inputs[0], uses), b: trace(n.Inputs[1], uses), out: n.Outputs[0]}
		if err := pr.resolve(); err != nil {
			return nil, &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: err.Error()}
		}
		if oc := outputCast(g, n, uses); oc != nil {
			pr.ocast, pr.out = oc, oc.Outputs[0]
			pl.folded[oc.Index] = n
		} else if ob := lower.OutputBias(g, n); ob != nil {
			pr.obias, pr.out = ob, ob.Outputs[0]
			pl.folded[ob.Index] = n
		} else if os := lower.OutputScale(g, n); os != nil {
			pr.oscale, pr.out = os, os.Outputs[0]
			pl.folded[os.Index] = n
		}
		if oa := lower.OutputAct(g, n); oa != nil {
			pr.oact, pr.out = oa, oa.Outputs[0]
			pl.folded[oa.Index] = n
		}
		for _, o := range []operand{pr.a, pr.b} {
			for _, c := range o.nodes {
				pl.folded[c.Index] = n
			}
		}
		pl.products = append(pl.products, pr)
		pl.prod[n.Index] = pr
	}
	pl.computePrefs()
	n := int64(1)
	var weights int64 // the products' constant operands, once each
	for _, pr := range pl.products {
		if isConst(pr.a.w) || isConst(pr.b.w) {
			n++
		}
		for _, o := range []operand{pr.a, pr.b} {
			if isConst(o.w) {
				weights += int64(layout.Full(shapeOf(o.w)).Volume()) * int64(lower.DeviceSize(o.w.DType))
			}
		}
	}
	pl.constN, pl.weights = n, weights
	pl.reserve(0)
	pl.keep = startKeep
	return pl, nil
}

// reserve keeps bytes of every tile free from the search: the memory it
// fills and what follows from it.
func (pl *planner) reserve(bytes int64) {
	pl.usable = int64(pl.p.UsableMemory().Size()) - bytes
	pl.constShare = pl.usable / pl.constN
	pl.wide = pl.weights <= int64(pl.tiles)*pl.usable/wideWeights
}

// wideWeights: the start prices splits that copy constants more than
// startCopies times (a wide start) only when one copy of the products'
// constants takes at most 1/wideWeights of the tiles' memory. The
// planner does not know the code's size, which grows with the steps a
// tile runs: a deep model's weights and code fill the tiles without
// more copies.
const wideWeights = 16

// point is one assignment of decisions, by product.
type point []plan.Decision

func (pt point) key() string {
	var b strings.Builder
	for _, d := range pt {
		fmt.Fprintf(&b, "%d:%d,%d,%d,%d,%s,%s,%d-%d,%s", d.Node, d.Split.B, d.Split.M, d.Split.N, d.Split.K, d.CastOrder, d.Stationary, d.Tiles[0], d.Tiles[1], d.Split.Parts)
		if r := d.Split.Rest; r != nil {
			fmt.Fprintf(&b, ",%s%d:%d,%d", r.Axis, r.At, r.M, r.N)
		}
		b.WriteByte(';')
	}
	return b.String()
}

func (pt point) clone() point { return append(point(nil), pt...) }

// result is a costed point.
type result struct {
	total, exchange int64
	// host is the cycles the host link takes to move the fetch's and
	// the result's bytes; obj what the search ranks points by (cost):
	// total plus host, the cycles of an inference end to end, or total
	// alone under plan.ObjectiveDevice.
	host, obj int64
	transfers int
	geo       geometry
	mem       error // the point does not fit the tiles
	// il is what the point's interleaved buffers need beyond that
	// region, when their bytes fit the tiles (fits).
	il overflow
}

// cost is what the search minimises: by default the device's cycles and
// the host link's, since a layout the host must deliver copies of (a
// replicated operand block) costs an inference its bytes over the link.
// A point whose interleaved buffers overflow that region cannot link:
// it costs more than every point that can, and less the less it
// overflows, so that a walk from such a start descends to one that fits.
func (r *result) cost() int64 {
	if r.il.Bytes == 0 {
		return r.obj
	}
	return overflowCost + min(r.il.Bytes, maxOverflow)<<32 + min(r.obj, 1<<32-1)
}

// overflowCost is the least cost of a point that overflows interleaved
// memory, and maxOverflow the most bytes its cost tells apart: the sum
// stays below 2^63.
const (
	overflowCost = int64(1) << 61
	maxOverflow  = int64(1) << 28
)

// ComputeBound is the graph's matrix work at the product rate on every
// tile: the sum over products of MACs / (rate x tiles), rounded up.
func (pl *planner) computeBound() int64 {
	var cy float64
	for _, pr := range pl.products {
		rate := pl.p.MACsFP16
		switch pr.typ {
		case codegen.AMPFP8:
			if pl.p.MACsFP8 > 0 {
				rate = pl.p.MACsFP8
			}
		case codegen.AMPFP32:
			rate = pl.p.MACsFP32
		}
		macs := float64(pr.mm.Batches()) * float64(pr.mm.M) * float64(pr.mm.K) * float64(pr.mm.N)
		cy += macs / float64(rate*pl.tiles)
	}
	b := int64(cy)
	if float64(b) < cy {
		b++
	}
	return b
}

// plan converts a builder's tensors and steps into a plan, taking the
// tensors that read as the same layouts from memo (nil: none).
func (b *builder) plan(pl *planner, pt point, memo tensorMemo) *plan.Plan {
	out := &plan.Plan{Format: plan.Format, Arch: pl.p.Name, Tiles: pl.tiles, Graph: pl.encoded, Tensors: make([]plan.Tensor, 0, len(b.tensors)),
		Supersteps: plan.Compact, Packs: plan.StagedPacks}
	for _, t := range b.tensors {
		if prev, ok := memo[t.ID]; ok && lower.ReadsAs(prev, t) {
			out.Tensors = append(out.Tensors, prev)
			continue
		}
		pt := planTensor(pl, t)
		if memo != nil {
			memo[t.ID] = pt
		}
		out.Tensors = append(out.Tensors, pt)
	}
	out.Steps = append(out.Steps, b.steps...)
	return out
}

// tensorMemo holds, by ID, the plan tensors of a worker's last plans.
// The search's points share most of their tensors: a plan takes the
// ones that read as its own layouts again, their arrays shared (plans
// never change them), instead of a copy of every piece, which was a
// tenth of the BERT-base layer search's allocations.
type tensorMemo map[int]plan.Tensor

// planTensor is layout t as a plan tensor.
func planTensor(pl *planner, t *layout.Tensor) plan.Tensor {
	pt := plan.Tensor{ID: t.ID, Value: t.Value, Name: t.Name, DType: pl.g.Values[t.Value].DType.String(), Transposed: t.Transposed,
		Layout: t.Kind.String(), Pad: t.Pad, Source: t.Source.String()}
	if len(t.Shape) > 0 {
		pt.Shape = make([]int64, len(t.Shape))
	}
	for i, d := range t.Shape {
		pt.Shape[i] = int64(d)
	}
	// The pieces' regions share one array.
	n := 0
	for _, p := range t.Pieces {
		n += len(p.Box)
	}
	regs := make([][2]int64, n)
	if len(t.Pieces) > 0 {
		pt.Pieces = make([]plan.Piece, len(t.Pieces))
	}
	for k, p := range t.Pieces {
		reg := regs[:len(p.Box):len(p.Box)]
		regs = regs[len(p.Box):]
		for i, r := range p.Box {
			reg[i] = [2]int64{int64(r.Lo), int64(r.Hi)}
		}
		pt.Pieces[k] = plan.Piece{Tile: p.Tile, Region: reg}
	}
	return pt
}

// Plan maps g onto p's tiles. It returns the plan, the search state to
// save, and the figures of the planner's log lines.
func Plan(g *graph.Graph, p *arch.Preset, opt Options) (*plan.Plan, *plan.State, *Stats, error) {
	tiles, err := checkOptions(p, &opt)
	if err != nil {
		return nil, nil, nil, err
	}
	objective := plan.ObjectiveOf(opt.Objective)
	g, rewrites := graph.Canonicalize(g)
	pl, err := newPlanner(g, p, tiles)
	if err != nil {
		return nil, nil, nil, err
	}
	pl.device = objective == plan.ObjectiveDevice
	resuming := opt.State != nil && opt.State.Attempts+len(opt.State.Incumbent.Decisions) > 0
	if resuming {
		opt.MemoryReserve = opt.State.Reserve // a resumed search keeps its reserve
		opt.MaxVariable = opt.State.MaxVariable
	}
	if opt.MaxVariable < 0 {
		return nil, nil, nil, fmt.Errorf("largest variable %d bytes: negative", opt.MaxVariable)
	}
	pl.maxVariable = opt.MaxVariable
	if opt.MemoryReserve < 0 || opt.MemoryReserve >= int64(p.UsableMemory().Size()) {
		return nil, nil, nil, fmt.Errorf("memory reserve %d out of range [0, %d)", opt.MemoryReserve, p.UsableMemory().Size())
	}
	pl.reserve(opt.MemoryReserve)
	st := &Stats{FragmentLimit: sched.FragmentLimit(p), Rewrites: rewrites}
	var s *plan.State
	var w walk
	if resuming {
		s = opt.State
		if w, err = pl.resume(s, opt, objective); err != nil {
			return nil, nil, nil, err
		}
		st.Resuming = true
	} else {
		if s, err = newState(opt, p.Name, tiles); err != nil {
			return nil, nil, nil, fmt.Errorf("search state rng: %w", err)
		}
		pl.startProgress = opt.StartProgress
		if w.cur, w.curR, err = pl.startFitting(); err != nil {
			return nil, nil, nil, err
		}
		w.inc, w.incR = w.cur.clone(), w.curR
		s.Visited = []string{w.cur.key()}
		st.Evaluated++
	}
	if w.pcg, err = s.PCG(); err != nil {
		return nil, nil, nil, fmt.Errorf("search state rng: %w", err)
	}
	w.rng = rand.New(w.pcg)
	w.visited = map[string]bool{}
	for _, k := range s.Visited {
		w.visited[k] = true
	}
	for a := 0; a < opt.MaxAttempts; {
		n, err := pl.attempts(&w, a, opt, st)
		if err != nil {
			return nil, nil, nil, err
		}
		a += n
	}
	if opt.Progress != nil {
		opt.Progress(opt.MaxAttempts, opt.MaxAttempts, w.incR.total)
	}
	st.Attempts = opt.MaxAttempts
	s.Attempts += opt.MaxAttempts
	if w.incR.il.Err != nil {
		// No point the search visited fits the interleaved region.
		return nil, nil, nil, w.incR.il.Err
	}
	pl.saveWalk(s, &w)
	out, err := pl.finish(w.inc, w.incR, opt, s.Attempts, objective)
	if err != nil {
		return nil, nil, nil, err
	}
	pl.stats(w.incR, st)
	st.Evaluated = pl.evals
	return out, s, st, nil
}

// checkOptions checks opt's tiles, attempts, shard and objective, sets
// its shard to the one searched, and returns the tiles planned on.
func checkOptions(p *arch.Preset, opt *Options) (int, error) {
	tiles := opt.Tiles
	if tiles == 0 {
		tiles = p.Tiles
	}
	if tiles < 1 || tiles > p.Tiles {
		return 0, fmt.Errorf("tiles %d out of range [1, %d] of %s", tiles, p.Tiles, p.Name)
	}
	if opt.MaxAttempts < 0 {
		return 0, fmt.Errorf("max attempts %d is negative", opt.MaxAttempts)
	}
	if err := checkShard(opt.Shard, opt.Shards); err != nil {
		return 0, err
	}
	opt.Shard, opt.Shards = shardOf(opt.Shard, opt.Shards)
	if err := plan.CheckObjective(opt.Objective); err != nil {
		return 0, err
	}
	return tiles, nil
}

// resume checks a saved search state against this search and returns
// its walk's current point and incumbent, priced.
func (pl *planner) resume(s *plan.State, opt Options, objective string) (walk, error) {
	var w walk
	if s.Model != opt.ModelFingerprint || s.Arch != pl.p.Name || s.Tiles != pl.tiles || s.Seed != opt.Seed {
		return w, fmt.Errorf("search state is for model %.12s arch %s tiles %d seed %d, not model %.12s arch %s tiles %d seed %d",
			s.Model, s.Arch, s.Tiles, s.Seed, opt.ModelFingerprint, pl.p.Name, pl.tiles, opt.Seed)
	}
	if s.Shard != opt.Shard || s.Shards != opt.Shards {
		return w, fmt.Errorf("search state is for shard %d/%d, not %d/%d", s.Shard, s.Shards, opt.Shard, opt.Shards)
	}
	if plan.ObjectiveOf(s.Objective) != objective {
		return w, fmt.Errorf("search state is for objective %s, not %s (resume it with --objective %[1]s)", plan.ObjectiveOf(s.Objective), objective)
	}
	for _, v := range s.Whole {
		if v >= len(pl.g.Values) {
			return w, fmt.Errorf("search state whole_rows: value %d is not one of the model's %d values", v, len(pl.g.Values))
		}
		pl.whole[v] = true
	}
	w.cur, w.inc = point(s.Current.Decisions).clone(), point(s.Incumbent.Decisions).clone()
	if err := pl.checkPoint(w.cur); err != nil {
		return w, fmt.Errorf("search state current: %w", err)
	}
	if err := pl.checkPoint(w.inc); err != nil {
		return w, fmt.Errorf("search state incumbent: %w", err)
	}
	var err error
	if w.curR, err = pl.evalFit(w.cur); err != nil {
		return w, fmt.Errorf("search state current: %w", err)
	}
	if w.incR, err = pl.evalFit(w.inc); err != nil {
		return w, fmt.Errorf("search state incumbent: %w", err)
	}
	return w, nil
}

// saveWalk records the walk in state s: its generator, current point,
// incumbent and visited points (at most plan.MaxVisited), and the row
// layouts kept whole.
func (pl *planner) saveWalk(s *plan.State, w *walk) {
	s.Validated = 0 // the caller's validation link sets it
	s.SetPCG(w.pcg)
	s.Current = plan.Point{Cycles: w.curR.total, Decisions: w.cur.clone()}
	s.Incumbent = plan.Point{Cycles: w.incR.total, Decisions: w.inc.clone()}
	s.Whole = s.Whole[:0]
	for v, whole := range pl.whole {
		if whole {
			s.Whole = append(s.Whole, v)
		}
	}
	slices.Sort(s.Whole)
	if len(s.Whole) == 0 {
		s.Whole = nil
	}
	s.Visited = s.Visited[:0]
	for k := range w.visited {
		s.Visited = append(s.Visited, k)
	}
	sort.Strings(s.Visited)
	if len(s.Visited) > plan.MaxVisited {
		s.Visited = s.Visited[:plan.MaxVisited]
	}
}

// finish writes point pt's plan, priced r, after a search of attempts
// moves under objective.
func (pl *planner) finish(pt point, r *result, opt Options, attempts int, objective string) (*plan.Plan, error) {
	out, err := pl.planOf(pt)
	if err != nil {
		return nil, fmt.Errorf("internal error: rebuilding the incumbent: %w", err)
	}
	out.Model = plan.Model{Path: opt.ModelPath, Fingerprint: opt.ModelFingerprint}
	out.Seed = opt.Seed
	// The estimate: the incumbent's program with every exchange
	// scheduled (the search ranks points by sched's faster bound), unless
	// the caller links it anyway.
	out.Cost = plan.Cost{FinalCycles: r.total, FinalExchange: r.exchange, ComputeBound: pl.computeBound(), Estimated: true, HostLinkCycles: r.host}
	if err := pl.chooseOrder(out, r.total); err != nil {
		return nil, err
	}
	// The search prices every pack staged (plan.StagedPacks): a piece
	// packed into its own operand block makes the block live from the
	// pack on, and the search's memory check counts bytes, not the free
	// ranges the linker places in. The plan packs in place where a piece
	// allows (its estimate is that program's); the linker stages them
	// all again when that does not fit (libs/link Link).
	out.Packs = ""
	// The padding-clear pass's count is the plan's own program's (packs
	// in place, supersteps in the order chosen), not the search's price's.
	if !opt.SearchEstimate {
		est, removed, err := pl.estimate(out)
		if err != nil {
			return nil, err
		}
		out.Cost.FinalCycles, out.Cost.FinalExchange = est.FinalCycles, est.FinalExchange
		pl.padRemoved = removed
	} else {
		pr, err := lower.LowerWith(out, pl.g, pl.p, lower.Options{NoData: true, Cache: pl.steps[0]})
		if err != nil {
			return nil, err
		}
		pl.padRemoved = pr.PadClearsRemoved
	}
	out.Search = plan.Search{Attempts: attempts, IncumbentCycles: r.total, Objective: objective}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("internal error: planned %w", err)
	}
	return out, nil
}

// planOf builds pt's plan again. Results keep no builder: a builder
// holds every tensor's pieces on every tile (28 s into the 12-layer
// encoder's search, builders had allocated 0.36 GB of its 2.1 GB live
// heap; without them in results, 0.15 GB of 1.4 GB, the points in
// flight).
func (pl *planner) planOf(pt point) (*plan.Plan, error) {
	b, err := pl.build(pt)
	if err != nil {
		return nil, err
	}
	return b.plan(pl, pt, nil), nil
}

// chooseOrder keeps the incumbent's supersteps compacted (the search
// priced them so: total) unless its steps in order price lower:
// compaction moves a step's work to the earliest superstep its data
// allows, which lengthens that superstep when their tiles overlap and may
// leave the one it left as long. The steps in order are priced as the
// search prices (exchange bounds, a step cache); the plan records the
// order (plan.Supersteps).
func (pl *planner) chooseOrder(out *plan.Plan, total int64) error {
	if out.Supersteps != plan.Compact {
		return nil
	}
	alt := *out
	alt.Supersteps = ""
	pr, err := lower.LowerWith(&alt, pl.g, pl.p, lower.Options{NoData: true, Cache: pl.steps[0]})
	if err != nil {
		return err
	}
	c, err := cost.ProgramWith(pr, cost.Options{Bound: true})
	if err != nil {
		return err
	}
	if c.FinalCycles < total {
		out.Supersteps = ""
		out.Cost.FinalCycles, out.Cost.FinalExchange = c.FinalCycles, c.FinalExchange
	}
	return nil
}

// BoundPrice prices plan p as the search prices a point: its program
// lowered, each exchange at sched's lower bound (the figure a plan's
// estimated cycles are, with Options.SearchEstimate).
func BoundPrice(p *plan.Plan, preset *arch.Preset) (*cost.Result, error) {
	g, err := graph.Decode(&p.Graph)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	q := *p
	q.Packs = plan.StagedPacks // as the search prices every pack
	pr, err := lower.LowerWith(&q, g, preset, lower.Options{NoData: true})
	if err != nil {
		return nil, err
	}
	return cost.ProgramWith(pr, cost.Options{Bound: true})
}

// estimate prices a plan's program exactly but for placement, and
// returns the FP8 padding clears its lowering removed.
func (pl *planner) estimate(p *plan.Plan) (*cost.Result, int, error) {
	pr, err := lower.LowerWith(p, pl.g, pl.p, lower.Options{NoData: true})
	if err != nil {
		return nil, 0, err
	}
	c, err := cost.Program(pr)
	return c, pr.PadClearsRemoved, err
}

// evalFit is eval for a point that must fit memory.
func (pl *planner) evalFit(pt point) (*result, error) {
	r, err := pl.eval(pt)
	if err != nil {
		return nil, err
	}
	if r.mem != nil {
		return nil, r.mem
	}
	return r, nil
}

// checkPoint validates a saved point against this graph's products.
func (pl *planner) checkPoint(pt point) error {
	if len(pt) != len(pl.products) {
		return fmt.Errorf("%d decisions for %d products", len(pt), len(pl.products))
	}
	for i, d := range pt {
		pr := pl.products[i]
		if d.Node != pr.idx {
			return fmt.Errorf("decision %d is for node %d, want %d", i, d.Node, pr.idx)
		}
		s := pr.split(d)
		if d.Split.M < 1 || d.Split.N < 1 || d.Split.K < 1 || d.Split.B < 0 || !s.Fits(pr.mm) || d.Tiles[0] < 0 || d.Tiles[1] > pl.tiles || d.Tiles[1]-d.Tiles[0] < s.Tiles() {
			return fmt.Errorf("decision %d: split %+v over tiles %v does not fit", i, d.Split, d.Tiles)
		}
	}
	return nil
}

// stats fills the log figures from the incumbent.
func (pl *planner) stats(r *result, st *Stats) {
	st.Transfers = r.transfers
	st.PaddingClearsRemoved = pl.padRemoved
	st.EstimatedRowBytes, st.HeuristicRowBytes = r.geo.rowBytes, r.geo.heuristic
	st.GeometryFragmentsPerTile = r.geo.fragments
	st.Expansion, st.ExpansionAndFootprint = pl.expansion, pl.expansion+pl.footprint
	st.SideBySide = pl.sideBySide
}

// layoutOK is used by tests: a built plan's tensors validate.
func (b *builder) validate(tiles int) error {
	for _, t := range b.tensors {
		if err := t.Validate(tiles); err != nil {
			return err
		}
	}
	return nil
}

var _ = layout.RowMajor

// Build returns the plan of the given decisions (one per product, in
// node order) without searching: for tests and tools that pin a split.
func Build(g *graph.Graph, p *arch.Preset, tiles int, decisions []plan.Decision) (*plan.Plan, error) {
	g, _ = graph.Canonicalize(g)
	pl, err := newPlanner(g, p, tiles)
	if err != nil {
		return nil, err
	}
	pt := point(decisions)
	if err := pl.checkPoint(pt); err != nil {
		return nil, err
	}
	b, err := pl.build(pt)
	if err != nil {
		return nil, err
	}
	out := b.plan(pl, pt, nil)
	out.Cost.ComputeBound = pl.computeBound()
	out.Cost.Estimated = true
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("internal error: planned %w", err)
	}
	return out, nil
}
