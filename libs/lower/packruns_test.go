package lower

import (
	"math/rand/v2"
	"slices"
	"testing"

	"ipu.local/libs/layout"
)

// TestPanelRuns checks the kept runs against runs computed afresh for
// every block of y a source panel meets, on B panels replicated over
// tiles in runs of copies (the case the memo serves), interleaved with
// other boxes, an earlier box coming back after another one.
func TestPanelRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for trial := range 200 {
		k, n := 16*(1+r.IntN(4)), 16*(1+r.IntN(4))
		y := &layout.Tensor{Size: 2, Shape: []int{k, n}, Kind: layout.BPanel}
		for tile := 0; tile < 40; {
			k0 := r.IntN(k/16) * 16
			n0 := r.IntN(n/16) * 16
			box := layout.Box{{Lo: k0, Hi: min(k, k0+16*(1+r.IntN(2)))}, {Lo: n0, Hi: min(n, n0+16*(1+r.IntN(2)))}}
			for range 1 + r.IntN(5) { // copies of one box on consecutive tiles
				y.Pieces = append(y.Pieces, layout.Piece{Tile: tile, Box: box})
				tile++
			}
		}
		src := layout.Box{{Lo: 0, Hi: k}, {Lo: 0, Hi: n}}
		sg := y.GeometryOf(src)
		var memo panelRuns
		memo.reset()
		for j, p := range y.Pieces {
			inter, ok := layout.Intersect(src, p.Box)
			if !ok {
				continue
			}
			want := layout.AppendPanelRuns(nil, sg, y.Geometry(j), inter)
			if got := memo.runs(sg, y, j, inter); !slices.Equal(got, want) {
				t.Fatalf("trial %d, piece %d %s: runs %v, want %v", trial, j, p.Box, got, want)
			}
		}
	}
}
