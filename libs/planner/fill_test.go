package planner

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
)

// weightGraph is y = MatMul(x, w) of an FP32 input x [m, k] and constant
// weights w [k, n], or MatMul(w, x) of w [m, k] and x [k, n] when
// constA.
func weightGraph(t *testing.T, m, k, n int64, constA bool) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(21)
	xd, wd, ins := []int64{m, k}, []int64{k, n}, []string{"x", "w"}
	if constA {
		xd, wd, ins = []int64{k, n}, []int64{m, k}, []string{"w", "x"}
	}
	b.AddNode("MatMul", "y_MatMul", ins, []string{"y"})
	b.AddInput("x", onnx.Float, xd)
	b.AddInitializer(onnx.NewFloat32("w", wd, make([]float32, wd[0]*wd[1])))
	b.AddOutput("y", onnx.Float, []int64{m, n})
	return canonical(t, b)
}

// TestFilledCandidates: on shapes and tile counts of every kind, with
// the constant operand on either side, each split addFilled adds to the
// screen's best splits of a smaller budget (which leave tiles idle)
// raises the block count of the axis that copies the constant in one of
// the first fillKeep of them, fits the tiles, shortens that axis's
// longest block, and is the fewest blocks for that length; and some
// split of every case gets one.
func TestFilledCandidates(t *testing.T) {
	for _, tc := range []struct {
		m, k, n int64
		tiles   int
	}{
		{128, 3072, 768, 1472},
		{128, 768, 3072, 1472},
		{100, 1000, 300, 1472},
		{33, 517, 65, 61},
		{300, 700, 1000, 1472},
		{512, 64, 4096, 97},
		{64, 2, 4000, 1000},
		{4000, 2, 64, 1000},
	} {
		for _, constA := range []bool{false, true} {
			g := weightGraph(t, tc.m, tc.k, tc.n, constA)
			pl, err := newPlanner(g, arch.MustLookup("ipu21"), tc.tiles)
			if err != nil {
				t.Fatal(err)
			}
			pr := pl.products[0]
			mu, nu := layout.Units(int(tc.m), layout.AGroup), layout.Units(int(tc.n), layout.BGroup)
			fills := 0
			for _, budget := range pl.budgets()[1:] {
				seen := map[layout.Split]bool{}
				base, _ := pl.screenN(pr, budget, 0, startCopies)
				for _, s := range base {
					seen[s] = true
				}
				grids := pl.addFilled(pr, append([]layout.Split(nil), base...), seen)
				added := grids[len(base):]
				fills += len(added)
				for _, v := range added {
					if v.Cut() || v.Tiles() > tc.tiles {
						t.Fatalf("filled %v: cut %v, %d tiles of %d", v, v.Cut(), v.Tiles(), tc.tiles)
					}
					if !fromOne(v, base[:min(fillKeep, len(base))], mu, nu, constA) {
						t.Fatalf("%dx%dx%d const A %v: filled %v: not one shorter axis of %v", tc.m, tc.k, tc.n, constA, v, base[:min(fillKeep, len(base))])
					}
				}
			}
			t.Logf("%dx%dx%d on %d tiles, const A %v: %d filled", tc.m, tc.k, tc.n, tc.tiles, constA, fills)
			if fills == 0 {
				t.Errorf("%dx%dx%d on %d tiles, const A %v: no filled split", tc.m, tc.k, tc.n, tc.tiles, constA)
			}
		}
	}
}

// fromOne reports whether v is one of srcs with the block count of the
// axis copying the constant (columns when constA, else rows) raised so
// that its longest block is shorter, the fewest blocks giving that
// length.
func fromOne(v layout.Split, srcs []layout.Split, mu, nu int, constA bool) bool {
	for _, s := range srcs {
		if v.GB != s.GB || v.GK != s.GK {
			continue
		}
		fv, fs, u := v.GM, s.GM, mu
		if constA {
			if v.GM != s.GM {
				continue
			}
			fv, fs, u = v.GN, s.GN, nu
		} else if v.GN != s.GN {
			continue
		}
		l := (u + fv - 1) / fv
		if fv > fs && l < (u+fs-1)/fs && (u+fv-2)/(fv-1) > l {
			return true
		}
	}
	return false
}

// TestFilledAxes: a split leaving most tiles idle gets the filled
// variant of the axis that copies the constant, the fewest blocks for
// the shortest block the tiles allow.
func TestFilledAxes(t *testing.T) {
	for _, tc := range []struct {
		constA bool
		want   layout.Split
	}{
		{false, layout.Split{GB: 1, GM: 16, GN: 24, GK: 2}}, // 30 room, 32 row groups: blocks of 2, as 16 give
		{true, layout.Split{GB: 1, GM: 8, GN: 64, GK: 2}},   // 92 room, 192 panels: blocks of 3, as 64 give
	} {
		pl, err := newPlanner(weightGraph(t, 128, 768, 3072, tc.constA), arch.MustLookup("ipu21"), 1472)
		if err != nil {
			t.Fatal(err)
		}
		src := withOrder(layout.Split{GB: 1, GM: 8, GN: 24, GK: 2})
		got := pl.addFilled(pl.products[0], []layout.Split{src}, map[layout.Split]bool{src: true})[1:]
		if want := withOrder(tc.want); len(got) != 1 || got[0] != want {
			t.Errorf("const A %v: filled %v, want [%v]", tc.constA, got, want)
		}
	}
}

// ffnGraph is a transformer's feed-forward pair of FP16 products, y =
// MatMul(MatMul(x, w1), w2) of x [rows, width], w1 [width, hidden] and
// w2 [hidden, width], the weights FP32 constants cast to FP16.
func ffnGraph(t *testing.T, rows, width, hidden int64) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(17)
	for i, d := range [][2]int64{{width, hidden}, {hidden, width}} {
		name := fmt.Sprintf("w%d", i+1)
		w := make([]float32, d[0]*d[1])
		for j := range w {
			w[j] = float32(j%13-6) / 64
		}
		b.AddInitializer(onnx.NewFloat32(name+"f", d[:], w))
		b.AddNode("Cast", name+"_Cast", []string{name + "f"}, []string{name}, onnx.IntAttr("to", int64(onnx.Float16)))
	}
	b.AddNode("MatMul", "h_MatMul", []string{"x", "w1"}, []string{"h"})
	b.AddNode("MatMul", "y_MatMul", []string{"h", "w2"}, []string{"y"})
	b.AddInput("x", onnx.Float16, []int64{rows, width})
	b.AddOutput("y", onnx.Float16, []int64{rows, width})
	return canonical(t, b)
}

// ffnCase is a feed-forward pair (ffnGraph) on a count of ipu21's tiles.
type ffnCase struct {
	rows, width, hidden int64
	tiles               int
}

// planner returns a planner of the pair, with reserve bytes of every
// tile kept free.
func (c ffnCase) planner(t *testing.T, reserve int64) *planner {
	t.Helper()
	pl, err := newPlanner(ffnGraph(t, c.rows, c.width, c.hidden), arch.MustLookup("ipu21"), c.tiles)
	if err != nil {
		t.Fatal(err)
	}
	pl.reserve(reserve)
	return pl
}

// TestRefitImproves: on feed-forward pairs of several shapes, from the
// start's point with the second product's split halved along k (half
// the tiles idle), the refit pass takes a cheaper point whose splits fit
// their tile ranges; from the start's own point it never returns a
// dearer one.
func TestRefitImproves(t *testing.T) {
	for _, tc := range []ffnCase{
		{128, 768, 3072, 1472},
		{96, 512, 2048, 1472},
		{200, 320, 1280, 736},
	} {
		pl := tc.planner(t, 0)
		if !pl.wide {
			t.Fatalf("%+v: not a wide start", tc)
		}
		pt, r, err := pl.start(true)
		if err != nil {
			t.Fatal(err)
		}
		if got, gr, err := pl.refit(pt, r, false); err != nil || gr.total > r.total {
			t.Fatalf("%+v: refit of the start: %d cycles from %d (%v)", tc, gr.total, r.total, err)
		} else {
			t.Logf("%+v: start %d cycles %v, refit %d %v", tc, r.total, splits(pt), gr.total, splits(got))
		}
		poor := pt.clone()
		d := poor[1]
		d.Split.K = max(1, d.Split.K/2)
		d.Split.Parts = pl.products[1].defaultParts(d.Split.K)
		d.Tiles = [2]int{0, d.Split.M * d.Split.N * d.Split.K}
		pl.decide(poor, 1, d)
		pr, err := pl.eval(poor)
		if err != nil || pr.mem != nil {
			t.Fatalf("%+v: halved point: %v %v", tc, err, pr.mem)
		}
		got, gr, err := pl.refit(poor, pr, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: halved %d cycles %v, refit %d %v", tc, pr.total, splits(poor), gr.total, splits(got))
		if gr.total >= pr.total || gr.mem != nil {
			t.Fatalf("%+v: refit %d cycles (memory %v) from the halved point's %d", tc, gr.total, gr.mem, pr.total)
		}
		for i := range got {
			if n := max(got[i].Split.B, 1) * got[i].Split.M * got[i].Split.N * got[i].Split.K; got[i].Tiles[1]-got[i].Tiles[0] != n || got[i].Tiles[1] > tc.tiles {
				t.Fatalf("%+v: product %d: split %+v on tiles %v", tc, i, got[i].Split, got[i].Tiles)
			}
		}
	}
}

func splits(pt point) []string {
	var out []string
	for _, d := range pt {
		out = append(out, fmt.Sprintf("%dx%dx%d", d.Split.M, d.Split.N, d.Split.K))
	}
	return out
}

// TestRefits: each refit of a split (batched too) doubles one block
// count (within its axis) and cuts k, or doubles k and cuts the rows or
// the columns, to the most the tiles leave room for; it fits the tiles,
// keeps the batch blocks and alignment, numbers its blocks as withOrder
// would, and a k split that ends or starts gets the default parts.
func TestRefits(t *testing.T) {
	g := weightGraph(t, 128, 3072, 768, false)
	for _, tiles := range []int{1472, 1000, 97} {
		pl, err := newPlanner(g, arch.MustLookup("ipu21"), tiles)
		if err != nil {
			t.Fatal(err)
		}
		pr := pl.products[0]
		lim := [3]int{32, 48, 3072}
		for _, s := range []plan.Split{{B: 1, M: 16, N: 8, K: 8}, {B: 1, M: 32, N: 8, K: 1}, {B: 1, M: 2, N: 48, K: 4}, {B: 1, M: 1, N: 1, K: 1},
			{B: 3, M: 8, N: 6, K: 4, Align: 8}} {
			if s.B*s.M*s.N*s.K > tiles {
				continue
			}
			got := refits(pr, s, tiles, false)
			want := map[[3]int]bool{} // the refits' blocks, each once
			for a := range 3 {
				for b := range 3 {
					f := [3]int{s.M, s.N, s.K}
					c := 3 - a - b
					if a != b && (a == 2 || b == 2) && f[a] < lim[a] && s.B*min(2*f[a], lim[a])*f[c] <= tiles {
						f[a] = min(2*f[a], lim[a])
						f[b] = min(tiles/(s.B*f[a]*f[c]), lim[b], f[b])
						want[f] = true
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d tiles: refits of %+v: %d, want %d: %+v", tiles, s, len(got), len(want), got)
			}
			// A deep model's refits are those that do not double k.
			var copying []plan.Split
			for _, v := range got {
				if v.K <= max(s.K, 1) {
					copying = append(copying, v)
				}
			}
			if deep := refits(pr, s, tiles, true); !slices.Equal(deep, copying) {
				t.Fatalf("%d tiles: deep refits of %+v: %+v, want %+v", tiles, s, deep, copying)
			}
			for _, v := range got {
				f, w := [3]int{s.M, s.N, s.K}, [3]int{v.M, v.N, v.K}
				ok := false
				for a := range 3 {
					for b := range 3 {
						c := 3 - a - b
						if a == b || a != 2 && b != 2 || w[c] != f[c] || w[a] != min(2*f[a], lim[a]) || w[a] == f[a] {
							continue
						}
						// b cut to the most that fits: one more block would not.
						ok = ok || w[b] == min(tiles/(s.B*w[a]*w[c]), lim[b], f[b])
					}
				}
				if !ok || v.B != s.B || v.Align != s.Align || s.B*w[0]*w[1]*w[2] > tiles {
					t.Fatalf("%d tiles: refit %+v of %+v", tiles, v, s)
				}
				if (v.K > 1) != (s.K > 1) && v.Parts != pr.defaultParts(v.K) {
					t.Fatalf("refit %+v of %+v: parts %q", v, s, v.Parts)
				}
				if (v.Order == "b") != (v.M > v.N) {
					t.Fatalf("refit %+v of %+v: order %q", v, s, v.Order)
				}
			}
		}
	}
}

// TestRefitSecondRound: a refit round after the first prices the refits
// of the product the first round moved and, of the other products, only
// the refits that beat the start's point in the first round: the others
// are never priced. The two-round model is a transformer block whose
// refit takes two steps.
func TestRefitSecondRound(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "shared/gpt2_block_fp16/model"))
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pt, r, err := pl.start(true)
	if err != nil {
		t.Fatal(err)
	}
	// The first round, as refit builds it, priced here (the prices are
	// cached: refit prices these points again for nothing).
	type cand struct {
		i  int
		pt point
	}
	round := func(pt point) []cand {
		var cs []cand
		classes := map[string]bool{}
		for i, pr := range pl.products {
			if classes[pr.class()] {
				continue
			}
			classes[pr.class()] = true
			for _, s := range refits(pr, pt[i].Split, pl.tiles, false) {
				d := pt[i]
				d.Split = s
				d.Tiles = [2]int{0, max(s.B, 1) * s.M * s.N * s.K}
				nb := pt.clone()
				pl.decide(nb, i, d)
				cs = append(cs, cand{i, nb})
			}
		}
		return cs
	}
	first := round(pt)
	best, paid := -1, map[string]bool{}
	var bestR *result
	for j, c := range first {
		cr, err := pl.eval(c.pt)
		if err != nil || cr.mem != nil || cr.cost() >= r.cost() {
			continue
		}
		paid[fmt.Sprint(c.i, c.pt[c.i].Split)] = true
		if best < 0 || cr.cost() < bestR.cost() {
			best, bestR = j, cr
		}
	}
	if best < 0 {
		t.Fatal("no refit beats the start: the model no longer tests a second round")
	}
	moved := first[best].i
	var skipped []point
	for _, c := range round(first[best].pt) {
		if c.i != moved && !paid[fmt.Sprint(c.i, c.pt[c.i].Split)] {
			if _, ok := pl.cache[c.pt.key()]; !ok {
				skipped = append(skipped, c.pt)
			}
		}
	}
	if len(skipped) == 0 {
		t.Fatal("the second round has no refit that did not pay in the first: nothing to test")
	}
	if _, _, err := pl.refit(pt, r, false); err != nil {
		t.Fatal(err)
	}
	for _, s := range skipped {
		if _, ok := pl.cache[s.key()]; ok {
			t.Errorf("refit priced %v in its second round: its refit did not pay in the first", splits(s))
		}
	}
	t.Logf("product %d moved first; %d refits of the others left out of the second round", moved, len(skipped))
}

// TestDeepRefit: a deep model (its weights too many for a wide start)
// refits its narrow start too: never dearer, by moves that add copies
// and never split k further, to a point whose estimated code leaves
// room on every tile; the search's start is the refitted point or a
// cheaper one.
func TestDeepRefit(t *testing.T) {
	for _, tc := range []ffnCase{
		{128, 768, 3072, 128},
		{96, 512, 2048, 64},
		{200, 320, 1280, 24},
	} {
		pl := tc.planner(t, 0)
		if pl.wide {
			t.Fatalf("%+v: a wide start", tc)
		}
		pt, r, err := pl.start(false)
		if err != nil {
			t.Fatal(err)
		}
		got, gr, err := pl.refit(pt, r, true)
		if err != nil || gr.cost() > r.cost() {
			t.Fatalf("%+v: refit of the start: %d cycles from %d (%v)", tc, gr.cost(), r.cost(), err)
		}
		t.Logf("%+v: start %d cycles %v, refit %d %v", tc, r.total, splits(pt), gr.total, splits(got))
		for i := range got {
			if got[i].Split.K > max(pt[i].Split.K, 1) {
				t.Fatalf("%+v: product %d: k split %d from %d", tc, i, got[i].Split.K, pt[i].Split.K)
			}
		}
		if room, err := pl.codeRoom(got); err != nil || room < 0 {
			t.Fatalf("%+v: the refit leaves %d bytes (%v)", tc, room, err)
		}
		// The search's start is refitted.
		if _, sr, err := pl.startFitting(); err != nil || sr.cost() > gr.cost() {
			t.Fatalf("%+v: the search's start costs %d, the refit %d (%v)", tc, sr.cost(), gr.cost(), err)
		}
	}
}

// TestDeepKeepRetry: a deep start that keeps too few splits a product
// starts again with all of them. A feed-forward pair on 48 tiles whose
// start keeping 2 splits a product overflows the interleaved region
// (and keeping 3 does not) is planned with deepKeep 2 as a model of
// many products: startFitting starts again keeping startKeep, and its
// point fits and costs no more than that start's. (Without the retry,
// the spread after the start happens to reach the same cost here: what
// fails then is the keep.)
func TestDeepKeepRetry(t *testing.T) {
	keep, many := deepKeep, manyProducts
	defer func() { deepKeep, manyProducts = keep, many }()
	deepKeep, manyProducts = 2, 0
	pair := ffnCase{128, 768, 3072, 48}
	planAt := func(keep int) *result {
		pl := pair.planner(t, 0)
		if pl.wide {
			t.Fatal("a wide start")
		}
		pl.keep = keep
		_, r, err := pl.start(false)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := planAt(deepKeep); r.il.Bytes == 0 {
		t.Fatalf("the start keeping %d splits fits (%d cycles): the test needs one that does not", deepKeep, r.total)
	}
	all := planAt(startKeep)
	if all.il.Bytes > 0 {
		t.Fatalf("the start keeping %d splits overflows the interleaved region by %d bytes", startKeep, all.il.Bytes)
	}
	pl := pair.planner(t, 0)
	_, r, err := pl.startFitting()
	if err != nil {
		t.Fatal(err)
	}
	if pl.keep != startKeep || r.il.Bytes > 0 || r.cost() > all.cost() {
		t.Fatalf("startFitting kept %d splits a product: %d cycles, %d bytes over the interleaved region; want %d, at most %d cycles, 0 bytes",
			pl.keep, r.cost(), r.il.Bytes, startKeep, all.cost())
	}
}

// TestStartFirstSplits: a start whose products each took the cheapest of
// several splits can leave a later product no room where every
// product's first split leaves it some. A feed-forward pair on 48 tiles
// with 100,000 bytes a tile kept free runs out of memory keeping 6
// splits a product and fits keeping 1: startFitting starts again with
// those, and its point fits.
func TestStartFirstSplits(t *testing.T) {
	pair := ffnCase{128, 768, 3072, 48}
	pl := pair.planner(t, 100000)
	var me *MemoryError
	if _, _, err := pl.start(false); !errors.As(err, &me) {
		t.Fatalf("the start keeping %d splits: %v; the test needs one out of memory", pl.keep, err)
	}
	pl = pair.planner(t, 100000)
	pl.keep = 1
	_, first, err := pl.start(false)
	if err != nil || first.il.Bytes > 0 {
		t.Fatalf("the start keeping 1 split: %v; the test needs one that fits", err)
	}
	pl = pair.planner(t, 100000)
	_, r, err := pl.startFitting()
	if err != nil {
		t.Fatal(err)
	}
	if r.mem != nil || r.il.Bytes > 0 || r.cost() > first.cost() {
		t.Fatalf("startFitting: %d cycles, %v, %d bytes over the interleaved region; want at most %d cycles, fitting", r.cost(), r.mem, r.il.Bytes, first.cost())
	}
}

// TestRepairRoom: feed-forward pairs whose every start runs out of
// memory (keeping each product's first split too) on a tile count
// between two that plan: startFitting's repair finds a point that fits
// (repairRoom), from a start whose products were decided again after
// the first's.
func TestRepairRoom(t *testing.T) {
	for _, tc := range []ffnCase{
		{96, 1024, 4096, 56},
		{200, 640, 2560, 40},
	} {
		for _, keep := range []int{startKeep, 1} {
			pl := tc.planner(t, 0)
			pl.keep = keep
			var me *MemoryError
			if _, _, err := pl.start(false); !errors.As(err, &me) {
				t.Fatalf("%+v: the start keeping %d splits: %v; the test needs one out of memory", tc, keep, err)
			}
		}
		pl := tc.planner(t, 0)
		pt, r, err := pl.startFitting()
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if r.mem != nil || r.il.Bytes > 0 {
			t.Fatalf("%+v: startFitting's point %v does not fit: %v, %d bytes over the interleaved region", tc, splits(pt), r.mem, r.il.Bytes)
		}
	}
}
