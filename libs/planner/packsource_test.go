package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
)

// lnProduct builds a transformer's sublayer, h = LayerNormalization(x)
// [rows, k], y = h x w (a constant [k, n] weight) and, when n is k,
// LayerNormalization(h + y) (whose rows the residual h keeps whole),
// and returns its planner on tiles.
func lnProduct(t *testing.T, rows, k, n, tiles int) (*planner, *graph.Graph) {
	t.Helper()
	b := onnx.NewModel(17)
	ones := make([]float32, k)
	for i := range ones {
		ones[i] = 1
	}
	b.AddInitializer(onnx.NewFloat32("s", []int64{int64(k)}, ones))
	b.AddInitializer(onnx.NewFloat32("w", []int64{int64(k), int64(n)}, make([]float32, k*n)))
	b.AddNode("LayerNormalization", "ln", []string{"x", "s"}, []string{"h"}, onnx.IntAttr("axis", -1))
	b.AddNode("MatMul", "mm", []string{"h", "w"}, []string{"y"})
	b.AddInput("x", onnx.Float, []int64{int64(rows), int64(k)})
	out := "y"
	if n == k {
		b.AddNode("Add", "res", []string{"h", "y"}, []string{"r"})
		b.AddNode("LayerNormalization", "ln2", []string{"r", "s"}, []string{"z"}, onnx.IntAttr("axis", -1))
		out = "z"
	}
	b.AddOutput(out, onnx.Float, []int64{int64(rows), int64(n)})
	g := canonical(t, b)
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), tiles)
	if err != nil {
		t.Fatal(err)
	}
	return pl, g
}

// A pack's source pieces: a value whose rows its readers keep whole
// (the residual of a layer normalization), re-laid out in whole groups
// of rows, leaves most tiles idle (one tile packs each group's whole k
// extent); packSourcePieces splits k as well, every piece on a group
// boundary, its k range on whole words and at least packPiece elements
// (widePackPiece for a wide model, minPackPiece for a deep one), the
// pieces a partition of the value. A value the aligned layout already
// spreads keeps it.
func TestPackSourcePieces(t *testing.T) {
	for _, tc := range []struct {
		rows, k, n, tiles int
		narrow, split     bool
		least             int // the fewest elements of a piece when split (all of them when the tiles allow)
	}{
		{128, 768, 768, 1472, false, true, 128},
		{128, 768, 768, 1472, true, true, 256},
		{128, 768, 768, 64, false, true, 128},
		{128, 768, 64, 1472, false, false, 0}, // no residual: k split already
		{8, 64, 64, 1472, false, true, 128},
		{8, 64, 64, 1472, true, false, 0}, // 512 elements: no piece to gain
		{8, 32, 32, 1472, false, false, 0},
	} {
		pl, g := lnProduct(t, tc.rows, tc.k, tc.n, tc.tiles)
		if !pl.wide {
			t.Fatalf("%v: the model is not wide", tc)
		}
		pl.wide = !tc.narrow
		h := g.Values[pl.products[0].a.root.Index]
		aligned := pl.alignedPieces(h, 0, layout.AGroup, 0)
		ps := pl.packSourcePieces(h, 0, layout.AGroup, 0)
		if got := len(ps) > len(aligned); got != tc.split {
			t.Errorf("%v: %d pieces, %d aligned: split %v, want %v", tc, len(ps), len(aligned), got, tc.split)
		}
		if !tc.split && !samePieces(ps, aligned) {
			t.Errorf("%v: pieces differ from the aligned layout's", tc)
		}
		if len(ps) > tc.tiles {
			t.Errorf("%v: %d pieces on %d tiles", tc, len(ps), tc.tiles)
		}
		seen := map[int]bool{}
		vol, smallest := 0, 0
		for _, p := range ps {
			if v := p.Box.Volume(); smallest == 0 || v < smallest {
				smallest = v
			}
			if seen[p.Tile] || p.Tile < 0 || p.Tile >= tc.tiles {
				t.Errorf("%v: piece %v on tile %d (twice, or off the tiles)", tc, p.Box, p.Tile)
			}
			seen[p.Tile] = true
			vol += p.Box.Volume()
			if p.Box[0].Lo%layout.AGroup != 0 || p.Box[1].Lo%2 != 0 {
				t.Errorf("%v: piece %v starts off a group or a word", tc, p.Box)
			}
			if tc.split && p.Box.Volume() < tc.least {
				t.Errorf("%v: piece %v of %d elements, below %d", tc, p.Box, p.Box.Volume(), tc.least)
			}
		}
		if tc.split && tc.rows*tc.k/tc.least <= tc.tiles && smallest >= 2*tc.least {
			t.Errorf("%v: the smallest piece holds %d elements: not split down to %d", tc, smallest, tc.least)
		}
		if vol != tc.rows*tc.k {
			t.Errorf("%v: pieces hold %d elements, want %d", tc, vol, tc.rows*tc.k)
		}
	}
}
