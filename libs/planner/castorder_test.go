package planner

import (
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
)

// qk-early casts both operands of its product from FP32 to FP8, and on
// the full chip each block is copied to many tiles (the B blocks to 64):
// casting the copies after the exchange would cast every block 64
// times. The search casts both before the exchange, spread over the
// product's tiles, and moves the FP8 blocks in one re-layout.
func TestCastBeforeExchangeBoth(t *testing.T) {
	if testing.Short() {
		t.Skip("full-chip planning is slow; run without -short")
	}
	pl, _, _ := planModel(t, "qk-early", 1472)
	var mm, move *plan.Step
	casts := map[string]int{} // cast name -> tiles of its input
	for i, st := range pl.Steps {
		switch st.Kernel {
		case "amp-fp8":
			mm = &pl.Steps[i]
		case "relayout":
			move = &pl.Steps[i]
		case "cast":
			casts[st.Name] = len(pl.Tensors[st.Inputs[0]].Pieces)
		}
	}
	if mm == nil || mm.CastOrder != plan.BeforeExchange || mm.Stationary != "" {
		t.Fatalf("product step %+v: want both operands cast before the exchange", mm)
	}
	if move == nil || len(move.Inputs) != 2 || move.Name != "relayout:q8+k8" {
		t.Fatalf("re-layout step %+v: want one for q8 and k8", move)
	}
	for name, n := range casts {
		if n < 64 {
			t.Errorf("%s casts on %d tiles, want the work spread over many", name, n)
		}
	}
}

// The operands' cast tiles: both before the exchange, A and B share
// the product's tiles by size and do not overlap; one before, it has
// them all.
func TestCastTiles(t *testing.T) {
	g := load(t, "qk-early")
	g, _ = graph.Canonicalize(g)
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pr := pl.products[0]
	d := plan.Decision{CastOrder: plan.BeforeExchange, Tiles: [2]int{8, 1032}}
	alo, an := castTiles(pr, d, true)
	blo, bn := castTiles(pr, d, false)
	if alo != 8 || an != 512 || blo != 520 || bn != 512 {
		t.Errorf("both: A [%d,+%d) B [%d,+%d), want [8,+512) [520,+512)", alo, an, blo, bn)
	}
	d.Stationary = "a"
	if lo, n := castTiles(pr, d, false); lo != 8 || n != 1024 {
		t.Errorf("B alone: [%d,+%d), want [8,+1024)", lo, n)
	}
	for _, isA := range []bool{true, false} {
		lo, n := castTiles(pr, plan.Decision{Tiles: [2]int{0, 1024}}, isA)
		ps := panelSourcePieces(pr, isA, lo, n)
		for _, p := range ps {
			if v := p.Box.Volume(); v < minCastPiece {
				t.Errorf("A %v: piece %v of %d elements, below %d", isA, p.Box, v, minCastPiece)
			}
		}
		if len(ps) < 256 {
			t.Errorf("A %v: %d pieces, want at least 256", isA, len(ps))
		}
	}
}

// The pieces cast before the exchange lie on tiles that hold no block
// they overlap (else a local copy kernel would follow the exchange), on
// the full chip and on 64 tiles.
func TestCastPiecesApart(t *testing.T) {
	g := load(t, "qk-early")
	for _, tc := range []struct{ tiles, m, n int }{{1472, 64, 16}, {64, 8, 8}, {64, 4, 16}} {
		d := plan.Decision{Node: -1, Split: plan.Split{B: 1, M: tc.m, N: tc.n, K: 1}, CastOrder: plan.BeforeExchange, Tiles: [2]int{0, tc.m * tc.n}}
		for i, n := range g.Nodes {
			if n.Op == "MatMul" {
				d.Node = i
			}
		}
		pl, err := Build(g, arch.MustLookup("ipu21"), tc.tiles, []plan.Decision{d})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range pl.Steps {
			if st.Kernel != "relayout" {
				continue
			}
			for k := range st.Inputs {
				src, dst := pl.Tensors[st.Inputs[k]], pl.Tensors[st.Outputs[k]]
				held := map[int][][][2]int64{}
				for _, p := range dst.Pieces {
					held[p.Tile] = append(held[p.Tile], p.Region)
				}
				for _, p := range src.Pieces {
					for _, r := range held[p.Tile] {
						if overlap(p.Region, r) {
							t.Errorf("%d tiles %dx%d: %s piece %v on tile %d, which holds block %v", tc.tiles, tc.m, tc.n, src.Name, p.Region, p.Tile, r)
						}
					}
				}
			}
		}
	}
}

func overlap(a, b [][2]int64) bool {
	for i := range a {
		if max(a[i][0], b[i][0]) >= min(a[i][1], b[i][1]) {
			return false
		}
	}
	return true
}

// Where the cast range has at least two tiles per piece, the pieces
// cast before the exchange sit one per supertile, so that no two
// senders share a bus and each can use send2: on the full chip (1024
// tiles of the product, 256 pieces of each operand) no supertile holds
// two pieces; on 64 tiles (more pieces than supertiles) they stay one
// per tile.
func TestCastPiecesOnePerSupertile(t *testing.T) {
	g := load(t, "qk-early")
	p := arch.MustLookup("ipu21")
	for _, tc := range []struct {
		tiles, m, n int
		apart       bool
	}{{1472, 64, 16, true}, {64, 8, 8, false}} {
		d := plan.Decision{Node: -1, Split: plan.Split{B: 1, M: tc.m, N: tc.n, K: 1}, CastOrder: plan.BeforeExchange, Tiles: [2]int{0, tc.m * tc.n}}
		for i, n := range g.Nodes {
			if n.Op == "MatMul" {
				d.Node = i
			}
		}
		pl, err := Build(g, p, tc.tiles, []plan.Decision{d})
		if err != nil {
			t.Fatal(err)
		}
		shared := 0
		senders := map[int]int{} // supertile -> pieces
		for _, st := range pl.Steps {
			if st.Kernel != "cast" {
				continue
			}
			for _, pc := range pl.Tensors[st.Outputs[0]].Pieces {
				if senders[pc.Tile/p.SupertileSize]++; senders[pc.Tile/p.SupertileSize] == 2 {
					shared++
				}
			}
		}
		if tc.apart && shared != 0 {
			t.Errorf("%d tiles %dx%d: %d supertiles hold two cast pieces, want none", tc.tiles, tc.m, tc.n, shared)
		}
		if !tc.apart && shared == 0 {
			t.Errorf("%d tiles %dx%d: no supertile holds two cast pieces, want them one per tile", tc.tiles, tc.m, tc.n)
		}
	}
}
