package layout

import (
	"math/rand"
	"slices"
	"testing"
)

// panelRunsPlain is PanelRuns computed for every destination piece
// afresh, copies of a block included.
func panelRunsPlain(src, dst *Tensor) []Run {
	ix := newBoxIndex(src)
	var out []Run
	for di, dp := range dst.Pieces {
		dg := dst.Geometry(di)
		ix.each(dp.Box, func(k int, inter Box) {
			si := holder(ix.holders[k], src, dp.Tile)
			out = appendPanelRuns(out, src.Geometry(si), dg, inter, si, di)
		})
	}
	return out
}

// TestPanelRunsCopies: the runs of a replicated destination block, taken
// from its previous copy's, are those computed afresh, each copy reading
// the holder nearest its tile; sources replicated too, so that copies
// read different holders, on random splits of A and B panels.
func TestPanelRunsCopies(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	copies := 0
	for trial := 0; trial < 200; trial++ {
		mm := MatMul{M: 4 * (1 + rng.Intn(12)), K: 1 + rng.Intn(40), N: 16 * (1 + rng.Intn(6))}
		a := rng.Intn(2) == 0
		kind, shape := APanel, []int{mm.M, mm.K}
		if !a {
			kind, shape = BPanel, []int{mm.K, mm.N}
		}
		split := func() Split {
			return Split{GB: 1, GM: 1 + rng.Intn(4), GN: 1 + rng.Intn(4), GK: 1 + rng.Intn(3)}
		}
		ds, ss := split(), split()
		dst := &Tensor{Name: "op", Size: 2, Shape: shape, Kind: kind, Pieces: ds.OperandPieces(mm, rng.Intn(8), a)}
		src := &Tensor{Name: "op", Size: 2, Shape: shape, Kind: kind, Pieces: ss.OperandPieces(mm, rng.Intn(8), a)}
		dst.SortPieces()
		src.SortPieces()
		if dst.Validate(128) != nil || src.Validate(128) != nil {
			continue
		}
		got, err := PanelRuns(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		if want := panelRunsPlain(src, dst); !slices.Equal(got, want) {
			t.Fatalf("trial %d: src %v dst %v:\n got %v\nwant %v", trial, ss, ds, got, want)
		}
		for i := 1; i < len(dst.Pieces); i++ {
			if dst.Pieces[i].Box.Equal(dst.Pieces[i-1].Box) {
				copies++
			}
		}
	}
	if copies == 0 {
		t.Fatal("no destination block had copies")
	}
}
