package planner

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/lower"
	"ipu.local/libs/prog"
)

// TestProgramPrintFields fails when a plan type gains a field that
// printOf does not know about: the field must be hashed (the lowering
// may read it) or, like a step's CastOrder and Stationary, shown not to
// reach the lowering.
func TestProgramPrintFields(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{plan.Tensor{}, []string{"ID", "Value", "Name", "DType", "Shape", "Transposed", "Layout", "Pad", "Source", "Pieces"}},
		{plan.Piece{}, []string{"Tile", "Region"}},
		{plan.Step{}, []string{"Node", "Name", "Kernel", "Inputs", "Outputs", "CastOrder", "Stationary", "Split", "Tiles"}},
		{plan.Split{}, []string{"B", "M", "N", "K", "Align", "NAlign", "Order", "Parts", "Rest"}},
		{plan.Rest{}, []string{"Axis", "At", "M", "N"}},
	} {
		typ := reflect.TypeOf(c.v)
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s has fields %v, printOf knows %v", typ.Name(), got, c.want)
		}
	}
}

// TestSameProgramSamePrice: the decisions of qk-early's product that
// differ only in the stationary operand with the cast after the
// exchange plan one program (one print), and the prices evalAll gives
// them are the ones each gets priced alone; other decisions print
// differently.
func TestSameProgramSamePrice(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "qk-early"))
	p := arch.MustLookup("ipu21")
	pl, err := newPlanner(g, p, 64)
	if err != nil {
		t.Fatal(err)
	}
	pr := pl.products[0]
	if !pr.castable() {
		t.Fatal("qk-early's product is not castable")
	}
	grids, _, _ := pl.candidates(pr, pl.wide)
	s := grids[0]
	var pts []point
	for _, o := range []string{plan.AfterExchange, plan.BeforeExchange} {
		for _, st := range []string{"a", "b", ""} {
			pt := point{decision(pr.idx, s, o, st)}
			pl.placeRange(pt, 0)
			pts = append(pts, pt)
		}
	}
	prints := map[programPrint][]int{}
	for i, pt := range pts {
		bp, err := pl.buildPoint(pt)
		if err != nil {
			t.Fatal(err)
		}
		prints[bp.print] = append(prints[bp.print], i)
	}
	if got := prints[mustPrint(t, pl, pts[0])]; !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("after the exchange, the stationary operands' points %v share a print, want [0 1 2]", got)
	}
	if len(prints) < 2 {
		t.Errorf("%d distinct prints, want the cast order to matter", len(prints))
	}
	rs, errs := pl.evalAll(pts)
	for i, pt := range pts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		bp, err := pl.buildPoint(pt)
		if err != nil {
			t.Fatal(err)
		}
		alone := pl.price(bp, lower.NewStepCache())
		if alone.err != nil {
			t.Fatal(alone.err)
		}
		a, r := alone.r, rs[i]
		if r.total != a.total || r.exchange != a.exchange || r.transfers != a.transfers || r.geo != a.geo || (r.mem == nil) != (a.mem == nil) {
			t.Errorf("point %d: evalAll priced %+v, alone %+v", i, *r, *a)
		}
	}
}

func mustPrint(t *testing.T, pl *planner, pt point) programPrint {
	t.Helper()
	bp, err := pl.buildPoint(pt)
	if err != nil {
		t.Fatal(err)
	}
	return bp.print
}

// TestCachedPriceIsExact: a step cache replays steps lowered for other
// points, whose kernels read the buffers those points' producers wrote;
// compaction and liveness must still see each dependency (lower's replay
// aliases), so a point priced with a cache warmed on other points costs
// what it costs lowered afresh, superstep for superstep, and its memory
// check sees the same peaks, also after the cache dropped the fragments
// the walk left behind.
func TestCachedPriceIsExact(t *testing.T) {
	// torch_attention, whose walk outlives fragments, and qk-early, whose
	// FP8 casts run the padding-clear pass.
	t.Run("torch_attention", func(t *testing.T) { cachedPriceIsExact(t, "shared/torch_attention/model", 64, true) })
	t.Run("qk-early", func(t *testing.T) { cachedPriceIsExact(t, "qk-early", 64, false) })
	// On 3 tiles qk-early's A operand is its FP8 cast's output, which
	// the cast's fragment holds: a product replayed or lowered afresh
	// over it binds it to non-interleaved memory in this program only.
	t.Run("qk-early@3", func(t *testing.T) { cachedPriceIsExact(t, "qk-early", 3, false) })
	// Packs whose k padding copies from the program's constant zeros,
	// a buffer every step asking for it shares.
	t.Run("torch_mlp_ln", func(t *testing.T) { cachedPriceIsExact(t, "shared/torch_mlp_ln/model", 64, false) })
	t.Run("gpt2_s129_block_fp16@13", func(t *testing.T) {
		cachedPriceIsExact(t, "transformers-odd/gpt2_s129_block_fp16/model", 13, false)
	})
}

func cachedPriceIsExact(t *testing.T, model string, tiles int, evicts bool) {
	g, _ := graph.Canonicalize(load(t, model))
	p := arch.MustLookup("ipu21")
	pl, err := newPlanner(g, p, tiles)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := pl.start(pl.wide)
	if err != nil {
		t.Fatal(err)
	}
	steps := lower.NewStepCache()
	rng := rand.New(rand.NewPCG(3, 5))
	priced, cleared := 0, 0
	for range 12 {
		nb := pl.move(pt, rng)
		bp, err := pl.buildPoint(nb)
		if err != nil {
			continue
		}
		// Every other point's steps in order (chooseOrder lowers the
		// incumbent so through the search's cache).
		if priced%2 == 1 {
			q := *bp.plan
			q.Supersteps = ""
			bp.plan = &q
		}
		cached, err := lower.LowerWith(bp.plan, pl.g, pl.p, lower.Options{NoData: true, Cache: steps})
		if err != nil {
			continue
		}
		fresh, err := lower.LowerWith(bp.plan, pl.g, pl.p, lower.Options{NoData: true})
		if err != nil {
			t.Fatal(err)
		}
		a, err := cost.ProgramWith(cached, cost.Options{Bound: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := cost.ProgramWith(fresh, cost.Options{Bound: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Supersteps, b.Supersteps) {
			t.Fatalf("cached lowering prices %v, fresh %v", a.Supersteps, b.Supersteps)
		}
		if cached.PadClearsRemoved != fresh.PadClearsRemoved {
			t.Fatalf("point %d: the cached lowering removes %d padding clears, the fresh one %d", priced, cached.PadClearsRemoved, fresh.PadClearsRemoved)
		}
		cleared += fresh.PadClearsRemoved
		// The memory check's peaks too: a replayed step's kernels read
		// the buffers its producers wrote when it was cached, which stand
		// for this program's (prog.Program.Alias).
		cached.Liveness()
		fresh.Liveness()
		if a, b := livePeaks(cached, pl.p.Tiles, liveChunk, nil), livePeaks(fresh, pl.p.Tiles, liveChunk, nil); !slices.Equal(a, b) {
			t.Fatalf("point %d: the cached lowering's live peaks differ from the fresh one's", priced)
		}
		// And the regions the kernels bind buffers to: a replayed product
		// reads its B operand, a constant this program made, from
		// interleaved memory as the fresh one does.
		for _, r := range []prog.Region{prog.Interleaved, prog.NonInterleaved} {
			if a, b := regionBytes(cached, r), regionBytes(fresh, r); !slices.Equal(a, b) {
				t.Fatalf("point %d: region %d holds %v bytes by tile in the cached lowering, %v in the fresh one", priced, r, a, b)
			}
		}
		// And the constants' bytes by tile: the program's zeros are one
		// buffer, whichever steps were replayed.
		if a, b := constBytes(cached), constBytes(fresh); !slices.Equal(a, b) {
			t.Fatalf("point %d: constants of %v bytes by tile in the cached lowering, %v in the fresh one", priced, a, b)
		}
		priced++
		pt = nb
	}
	if priced < 6 || steps.Hits == 0 || evicts && steps.Evicted == 0 {
		t.Fatalf("%d points priced, %d cache hits, %d fragments evicted", priced, steps.Hits, steps.Evicted)
	}
	t.Logf("%d points priced, %d cache hits, %d fragments evicted, %d padding clears removed", priced, steps.Hits, steps.Evicted, cleared)
}

// regionBytes returns, by tile, the bytes of pr's buffers bound to
// region r.
func regionBytes(pr *prog.Program, r prog.Region) []int64 {
	return bytesByTile(pr, func(b *prog.Buffer) bool { return b.Region == r })
}

// bytesByTile returns, by tile, the bytes of pr's buffers keep picks.
func bytesByTile(pr *prog.Program, keep func(*prog.Buffer) bool) []int64 {
	var out []int64
	for _, b := range pr.Buffers {
		if !keep(b) {
			continue
		}
		for _, t := range b.Tiles {
			for len(out) <= t {
				out = append(out, 0)
			}
			out[t] += int64(b.Size)
		}
	}
	return out
}

// constBytes returns, by tile, the bytes of pr's constants (buffers
// with data, or permanent).
func constBytes(pr *prog.Program) []int64 {
	return bytesByTile(pr, func(b *prog.Buffer) bool { return b.Data != nil || b.Permanent })
}

// TestTensorMemoPlans: a plan built with a worker's tensor memo, warmed
// on the points before it, encodes byte for byte as the one built
// afresh, and takes the tensors that did not change from the memo.
func TestTensorMemoPlans(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "shared/torch_attention/model"))
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 64)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := pl.start(pl.wide)
	if err != nil {
		t.Fatal(err)
	}
	memo := tensorMemo{}
	rng := rand.New(rand.NewPCG(7, 11))
	built, taken := 0, 0
	for range 12 {
		nb := pl.move(pt, rng)
		before := maps.Clone(memo)
		bp, err := pl.buildPointWith(nb, memo)
		if err != nil {
			continue
		}
		fresh, err := pl.planOf(nb)
		if err != nil {
			t.Fatal(err)
		}
		a, err := plan.Marshal(bp.plan)
		if err != nil {
			t.Fatal(err)
		}
		b, err := plan.Marshal(fresh)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("point %d: the plan built with the memo differs from the one built afresh", built)
		}
		for _, tn := range bp.plan.Tensors {
			if prev, ok := before[tn.ID]; ok && len(tn.Pieces) > 0 && &prev.Pieces[0] == &tn.Pieces[0] {
				taken++
			}
		}
		built++
		pt = nb
	}
	if built < 6 || taken == 0 {
		t.Fatalf("%d plans built, %d tensors taken from the memo", built, taken)
	}
}

// TestChooseOrder: the incumbent keeps its compacted supersteps unless
// its steps in order price lower, and then the plan says so and carries
// their price.
func TestChooseOrder(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "shared/torch_attention/model"))
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 64)
	if err != nil {
		t.Fatal(err)
	}
	pt, r, err := pl.start(pl.wide)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pl.planOf(pt)
	if err != nil {
		t.Fatal(err)
	}
	if out.Supersteps != plan.Compact {
		t.Fatalf("the planner's plans are %q", out.Supersteps)
	}
	if err := pl.chooseOrder(out, 0); err != nil || out.Supersteps != plan.Compact {
		t.Fatalf("a compacted price of 0 cycles: %q, %v", out.Supersteps, err)
	}
	if err := pl.chooseOrder(out, r.total); err != nil || out.Supersteps != plan.Compact {
		t.Fatalf("torch attention's compacted price %d: %q, %v", r.total, out.Supersteps, err)
	}
	if err := pl.chooseOrder(out, 1<<62); err != nil || out.Supersteps != "" {
		t.Fatalf("a compacted price of 2^62 cycles: %q, %v", out.Supersteps, err)
	}
	if out.Cost.FinalCycles <= r.total {
		t.Errorf("in order %d cycles, compacted %d: want more", out.Cost.FinalCycles, r.total)
	}
}

// TestBoundPrice: a plan priced from its file alone costs what the
// search priced it (Options.SearchEstimate), compacted or in order.
func TestBoundPrice(t *testing.T) {
	g := load(t, "shared/torch_attention/model")
	p := arch.MustLookup("ipu21")
	out, _, _, err := Plan(g, p, Options{Tiles: 64, Seed: 1, MaxAttempts: 4, SearchEstimate: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := BoundPrice(out, p)
	if err != nil {
		t.Fatal(err)
	}
	if c.FinalCycles != out.Cost.FinalCycles {
		t.Fatalf("priced %d cycles from the plan, the search %d", c.FinalCycles, out.Cost.FinalCycles)
	}
	inOrder := *out
	inOrder.Supersteps = ""
	if c2, err := BoundPrice(&inOrder, p); err != nil || c2.FinalCycles <= c.FinalCycles {
		t.Fatalf("in order: %v, %v; compacted %d", c2, err, c.FinalCycles)
	}
	inOrder.Graph.Nodes = nil
	if _, err := BoundPrice(&inOrder, p); err == nil {
		t.Fatal("a plan without its graph's nodes priced")
	}
}
