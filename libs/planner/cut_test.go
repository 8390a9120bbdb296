package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
)

// productGraph is y = MatMul(Cast(a), Cast(b)) of FP16 inputs [m, k] and
// [k, n] (an FP16 product with an FP32 result).
func productGraph(t *testing.T, m, k, n int64) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(21)
	b.AddNode("Cast", "af_Cast", []string{"a"}, []string{"af"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Cast", "bf_Cast", []string{"b"}, []string{"bf"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("MatMul", "y_MatMul", []string{"af", "bf"}, []string{"y"})
	b.AddInput("a", onnx.Float16, []int64{m, k})
	b.AddInput("b", onnx.Float16, []int64{k, n})
	b.AddOutput("y", onnx.Float, []int64{m, n})
	return canonical(t, b)
}

// TestCutCandidates: on shapes no grid of the tiles divides well, the
// screen's cut split fits the product and the tiles, scores below every
// grid, and its blocks cover the product.
func TestCutCandidates(t *testing.T) {
	for _, tc := range []struct {
		m, k, n int64
		tiles   int
	}{
		{2048, 2048, 2048, 1472},
		{1000, 700, 3000, 1472},
		{2047, 1024, 513, 1472},
		{300, 50, 700, 61},
	} {
		g := productGraph(t, tc.m, tc.k, tc.n)
		pl, err := newPlanner(g, arch.MustLookup("ipu21"), tc.tiles)
		if err != nil {
			t.Fatal(err)
		}
		pr := pl.products[0]
		_, best := pl.screenN(pr, tc.tiles, 0, startCopies)
		s, ok := pl.cut(pr, tc.tiles, best)
		t.Logf("%dx%dx%d on %d tiles: best grid %d, cut %v (%v)", tc.m, tc.k, tc.n, tc.tiles, best, s, ok)
		if !ok {
			continue
		}
		if !s.Cut() || !s.Fits(pr.mm) || s.Tiles() > tc.tiles {
			t.Fatalf("cut %v: cut %v fits %v tiles %d of %d", s, s.Cut(), s.Fits(pr.mm), s.Tiles(), tc.tiles)
		}
		items := 0
		for _, tb := range s.Blocks(pr.mm, 0) {
			items += layout.Units(tb.M1-tb.M0, layout.AGroup) * layout.Units(tb.N1-tb.N0, layout.BGroup)
		}
		if want := layout.Units(int(tc.m), layout.AGroup) * layout.Units(int(tc.n), layout.BGroup); items != want {
			t.Fatalf("cut %v: blocks of %d items, the product has %d", s, items, want)
		}
	}
}

// TestCutChosen: under the device objective, the start prices the cut
// split of the 2048^3 FP16 product on 1472 tiles and takes it (45 items
// on the busiest tile instead of a 43 x 32 grid's 48). (Under the
// default objective the host link's cycles for the operands' copies
// decide instead.)
func TestCutChosen(t *testing.T) {
	g := productGraph(t, 2048, 2048, 2048)
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pl.device = true
	pt, r, err := pl.start(pl.wide)
	if err != nil {
		t.Fatal(err)
	}
	if pt[0].Split.Rest == nil {
		t.Fatalf("start took %+v (%d cycles), not a cut split", pt[0].Split, r.total)
	}
	grid := decision(pl.products[0].idx, withOrder(layout.Split{GB: 1, GM: 43, GN: 32, GK: 1, Align: 4}), "", "b")
	rg, err := pl.eval(point{grid})
	if err != nil {
		t.Fatal(err)
	}
	if r.total >= rg.total {
		t.Fatalf("cut %+v costs %d cycles, the 43 x 32 grid %d", pt[0].Split, r.total, rg.total)
	}
}

// canonical reads the model b builds, builds its graph and canonicalizes
// it, failing the test on an error.
func canonical(t *testing.T, b *onnx.ModelBuilder) *graph.Graph {
	t.Helper()
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	g, _ = graph.Canonicalize(g)
	return g
}
