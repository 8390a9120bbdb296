package planner

import (
	"fmt"
	"slices"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// projGraph is an attention block's projections: y_i = MatMul(x, w_i)
// of an FP32 input x [m, k] and constant weights w_i [k, n], for i <
// proj; with dep, also z = MatMul(x, y_0), which reads x too but needs
// y_0 (n == k).
func projGraph(t *testing.T, m, k, n int64, proj int, dep bool) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{m, k})
	names := []string{"q", "k", "v", "o", "p"}
	for _, name := range names[:proj] {
		b.AddInitializer(onnx.NewFloat32("w"+name, []int64{k, n}, make([]float32, k*n)))
		b.AddNode("MatMul", name+"_MatMul", []string{"x", "w" + name}, []string{name})
		b.AddOutput(name, onnx.Float, []int64{m, n})
	}
	if dep {
		b.AddNode("MatMul", "z_MatMul", []string{"x", names[0]}, []string{"z"})
		b.AddOutput("z", onnx.Float, []int64{m, n})
	}
	return canonical(t, b)
}

// castGraph is y_i = MatMul(x, w_i^T) for i < proj, of inputs x [m, k]
// and w_i [n, k] of type in, each operand cast to FP32 after a rounding
// cast to round (FP8 E4M3FNUZ, FP16; 0: in is FP16, cast to FP32 only),
// as PyTorch exports FP8 and FP16 products: x's casts once for all the
// products when shared, else once for each.
func castGraph(t *testing.T, m, k, n int64, proj int, in, round onnx.DataType, shared bool) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(21)
	operand := func(v, as string) string {
		r := v
		if round != 0 {
			r = as + "_r"
			b.AddNode("Cast", r+"_Cast", []string{v}, []string{r}, onnx.IntAttr("to", int64(round)), onnx.IntAttr("saturate", 1))
		}
		f := as + "_f"
		b.AddNode("Cast", f+"_Cast", []string{r}, []string{f}, onnx.IntAttr("to", int64(onnx.Float)))
		return f
	}
	b.AddInput("x", in, []int64{m, k})
	xf := operand("x", "x")
	for i := range proj {
		if !shared && i > 0 {
			xf = operand("x", fmt.Sprintf("x%d", i))
		}
		w, y := fmt.Sprintf("w%d", i), fmt.Sprintf("y%d", i)
		b.AddInput(w, in, []int64{n, k})
		wt := w + "_t"
		b.AddNode("Transpose", wt+"_Transpose", []string{operand(w, w)}, []string{wt}, onnx.IntsAttr("perm", 1, 0))
		b.AddNode("MatMul", y+"_MatMul", []string{xf, wt}, []string{y})
		b.AddOutput(y, onnx.Float, []int64{m, n})
	}
	return canonical(t, b)
}

// Siblings of FP8 and FP16 operands (both operands computed, the cast
// orders and stationary operands of FP8 products kept): grouped, and
// placed side by side only when cheaper, on disjoint tiles. Products
// sharing x's FP8 casts compute in FP32 (x's chain stops at the shared
// FP32 value: see cutAtWidened), the others in FP8.
func TestSideBySideCasts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in, round onnx.DataType
		shared    bool
		m, k, n   int64
		proj      int
		tiles     int
		typ       codegen.AMPType
	}{
		{"fp8", onnx.Float, onnx.Float8E4M3FNUZ, false, 96, 200, 160, 2, 1472, codegen.AMPFP8},
		{"fp8 shared", onnx.Float, onnx.Float8E4M3FNUZ, true, 96, 200, 160, 2, 1472, codegen.AMPFP32},
		{"fp8 three", onnx.Float, onnx.Float8E4M3FNUZ, false, 128, 64, 256, 3, 512, codegen.AMPFP8},
		{"fp8 three shared", onnx.Float, onnx.Float8E4M3FNUZ, true, 128, 64, 256, 3, 512, codegen.AMPFP32},
		{"fp16", onnx.Float16, 0, false, 100, 300, 200, 3, 1000, codegen.AMPFP16},
	} {
		pl, err := newPlanner(castGraph(t, tc.m, tc.k, tc.n, tc.proj, tc.in, tc.round, tc.shared), arch.MustLookup("ipu21"), tc.tiles)
		if err != nil {
			t.Fatal(err)
		}
		if gs := pl.siblingGroups(); len(gs) != 1 || len(gs[0]) != tc.proj {
			t.Fatalf("%s: groups %v, want one of %d", tc.name, gs, tc.proj)
		}
		for _, pr := range pl.products {
			if pr.typ != tc.typ {
				t.Fatalf("%s: %s computes in %s, want %s", tc.name, pr.node.Name, pr.typ, tc.typ)
			}
		}
		pt, r, err := pl.start(pl.wide)
		if err != nil {
			t.Fatal(err)
		}
		got, gr, err := pl.placeSideBySide(pt, r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Logf("%s: start %d cycles, side by side %d: %v", tc.name, r.total, gr.total, got)
		if gr.total > r.total {
			t.Fatalf("%s: side by side %d cycles, the start %d", tc.name, gr.total, r.total)
		}
		if gr.total == r.total {
			continue
		}
		for i := range got {
			if got[i].CastOrder != pt[i].CastOrder || got[i].Stationary != pt[i].Stationary {
				t.Errorf("%s: %s cast order %q stationary %q, the start's %q %q", tc.name, pl.products[i].node.Name, got[i].CastOrder, got[i].Stationary, pt[i].CastOrder, pt[i].Stationary)
			}
			for j := range i {
				a, b := got[i].Tiles, got[j].Tiles
				if a[0] < b[1] && b[0] < a[1] {
					t.Errorf("%s: tiles %v and %v overlap", tc.name, a, b)
				}
			}
		}
	}
}

// Products that read the same value form a group; one that needs
// another member's result does not join it.
func TestSiblingGroups(t *testing.T) {
	for _, tc := range []struct {
		proj int
		dep  bool
		want [][]string
	}{
		{3, false, [][]string{{"q_MatMul", "k_MatMul", "v_MatMul"}}},
		{2, true, [][]string{{"q_MatMul", "k_MatMul"}}},
		{1, true, nil},
		{1, false, nil},
	} {
		pl, err := newPlanner(projGraph(t, 64, 64, 64, tc.proj, tc.dep), arch.MustLookup("ipu21"), 64)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]string
		for _, g := range pl.siblingGroups() {
			var names []string
			for _, i := range g {
				names = append(names, pl.products[i].node.Name)
			}
			got = append(got, names)
		}
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%d projections, dependent %v: groups %v, want %v", tc.proj, tc.dep, got, tc.want)
		}
	}
}

// The start with its sibling groups side by side: when it takes an
// arrangement, the members' tiles are disjoint and the price is below the
// start's without it; either way it is no worse. The cases are priced
// under the device objective (the arrangements move the device's
// cycles; the host link's follow from the operands' copies).
func TestSideBySide(t *testing.T) {
	for _, tc := range []struct {
		m, k, n int64
		proj    int
		tiles   int
		taken   bool
	}{
		{128, 768, 768, 3, 1472, true},
		{100, 300, 500, 2, 1000, true},
		{64, 64, 64, 3, 16, false},
		{256, 1024, 2048, 2, 1472, false},
		{48, 200, 72, 5, 600, true},
	} {
		g := projGraph(t, tc.m, tc.k, tc.n, tc.proj, false)
		pl, err := newPlanner(g, arch.MustLookup("ipu21"), tc.tiles)
		if err != nil {
			t.Fatal(err)
		}
		pl.device = true
		pt, r, err := pl.start(pl.wide)
		if err != nil {
			t.Fatal(err)
		}
		if pl.wide {
			if pt, r, err = pl.refit(pt, r, false); err != nil {
				t.Fatal(err)
			}
		}
		got, gr, err := pl.placeSideBySide(pt, r)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: start %d cycles %v, side by side %d cycles %v", tc, r.total, pt, gr.total, got)
		if gr.total > r.total {
			t.Fatalf("%+v: side by side %d cycles, the start %d", tc, gr.total, r.total)
		}
		taken := gr.total < r.total
		if taken != tc.taken {
			t.Errorf("%+v: taken %v, want %v", tc, taken, tc.taken)
		}
		if !taken {
			continue
		}
		for i := range got {
			for j := range i {
				a, b := got[i].Tiles, got[j].Tiles
				if a[0] < b[1] && b[0] < a[1] {
					t.Errorf("%+v: %s on tiles %v and %s on %v overlap", tc, pl.products[i].node.Name, a, pl.products[j].node.Name, b)
				}
			}
		}
	}
}

// layeredGraph is layers of projections: q, k, v = MatMul(x_l, w) of
// FP32 [m, k] inputs and constant [k, k] weights, x_{l+1} = q + k + v.
func layeredGraph(t *testing.T, m, k int64, layers int) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(21)
	b.AddInput("x0", onnx.Float, []int64{m, k})
	x := "x0"
	for l := range layers {
		var outs []string
		for _, name := range []string{"q", "k", "v"} {
			w, y := fmt.Sprintf("w%s%d", name, l), fmt.Sprintf("%s%d", name, l)
			b.AddInitializer(onnx.NewFloat32(w, []int64{k, k}, make([]float32, k*k)))
			b.AddNode("MatMul", y+"_MatMul", []string{x, w}, []string{y})
			outs = append(outs, y)
		}
		s, next := fmt.Sprintf("s%d", l), fmt.Sprintf("x%d", l+1)
		b.AddNode("Add", s+"_Add", outs[:2], []string{s})
		b.AddNode("Add", next+"_Add", []string{s, outs[2]}, []string{next})
		x = next
	}
	b.AddOutput(x, onnx.Float, []int64{m, k})
	return canonical(t, b)
}

// In a deep model the groups of one signature (every layer's but the
// first, whose input comes from the host) take one arrangement: the
// members of each group it takes are on disjoint tiles with the splits
// of the first group's.
func TestSideBySideLayers(t *testing.T) {
	pl, err := newPlanner(layeredGraph(t, 128, 256, 3), arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	gs := pl.siblingGroups()
	if len(gs) != 3 || pl.signature(gs[1]) != pl.signature(gs[2]) || pl.signature(gs[0]) == pl.signature(gs[1]) {
		t.Fatalf("groups %v: want 3, the last two of one signature", gs)
	}
	pt, r, err := pl.startFitting()
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for _, g := range gs[1:] {
		disjoint := true
		for a, i := range g {
			for _, j := range g[:a] {
				if pt[i].Tiles[0] < pt[j].Tiles[1] && pt[j].Tiles[0] < pt[i].Tiles[1] {
					disjoint = false
				}
			}
		}
		if !disjoint {
			continue
		}
		taken++
		for k, i := range g {
			if s := pt[gs[1][k]].Split; pt[i].Split != s {
				t.Errorf("%s: split %+v, the first group's %+v", pl.products[i].node.Name, pt[i].Split, s)
			}
		}
	}
	t.Logf("%d cycles; %d of 2 groups side by side: %v", r.total, taken, pt)
	if taken == 0 {
		t.Errorf("no group of the last two side by side")
	}
}

func TestShares(t *testing.T) {
	for n, want := range map[int][]int{1: {1}, 2: {2, 1}, 3: {3, 2}, 4: {4, 3, 2}, 11: {11, 10, 9, 7, 6}, 12: {12, 11, 9, 8, 6}} {
		if got := shares(n); !slices.Equal(got, want) {
			t.Errorf("shares(%d) = %v, want %v", n, got, want)
		}
	}
}

// placeRange puts a product's range apart from its earlier siblings'
// where a range allows, whatever the constants weigh: the copies of a
// repeated layer's decision, placed one product at a time, ran their Q,
// K and V projections on the same tiles when the weights tied.
func TestPlaceRangeApartFromSiblings(t *testing.T) {
	pl, err := newPlanner(layeredGraph(t, 128, 256, 3), arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	gs := pl.siblingGroups()
	pt, _, err := pl.startFitting()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		for n := range []int{0, 1} {
			// Every member on the first tiles, a third of the chip each,
			// then half of it (where the third cannot be apart and falls
			// back to the least loaded range).
			w := pl.tiles / (3 - n)
			for _, i := range g {
				pt[i].Tiles = [2]int{0, w}
			}
			apartAt := func(k, lo, hi int) bool {
				for _, j := range g[:k] {
					if q := pt[j].Tiles; lo < q[1] && q[0] < hi {
						return false
					}
				}
				return true
			}
			for k, i := range g {
				room := false // some range of w tiles is apart from the earlier siblings
				for lo := 0; lo+w <= pl.tiles && !room; lo++ {
					room = apartAt(k, lo, lo+w)
				}
				pl.placeRange(pt, i)
				if r := pt[i].Tiles; room && !apartAt(k, r[0], r[1]) {
					t.Errorf("width %d: %s on %v overlaps an earlier sibling (%v)", w, pl.products[i].node.Name, r, pt)
				}
			}
		}
	}
}
