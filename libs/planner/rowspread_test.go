package planner

import (
	"testing"

	"ipu.local/libs/graph"
)

// A layer normalization whose rows are few against the tiles spreads
// each row over a group of tiles, in column blocks of whole quads: the
// pieces a partition of the input, one per tile, a group's tiles
// contiguous. Rows that fill half the tiles stay whole. A wide model's
// rows take up to wideSpreadBlocks blocks, a narrow one's up to
// maxSpreadBlocks.
func TestSpreadPieces(t *testing.T) {
	for _, tc := range []struct {
		rows, k, tiles int
		narrow         bool
		blocks, width  int // 0: not spread
	}{
		{128, 768, 1472, false, 8, 96},
		{128, 768, 1472, true, 4, 192},
		{128, 768, 400, false, 3, 256},
		{128, 768, 512, false, 4, 192},
		{8, 300, 1472, false, 4, 76}, // the last block 72 columns
		{8, 300, 1472, true, 4, 76},
		{8, 127, 1472, false, 0, 0}, // blocks of 64 columns at least
		{1000, 768, 1472, false, 0, 0},
	} {
		pl, g := lnProduct(t, tc.rows, tc.k, 64, tc.tiles)
		if !pl.wide {
			t.Fatalf("%v: the model is not wide", tc)
		}
		pl.wide = !tc.narrow
		var ln *graph.Node
		for _, n := range g.Nodes {
			if n.Op == "LayerNormalization" {
				ln = n
			}
		}
		ps := pl.spreadPieces(ln, 1, 3)
		if tc.blocks == 0 {
			if ps != nil {
				t.Errorf("%v: %d pieces, want none (whole rows)", tc, len(ps))
			}
			continue
		}
		if len(ps) != tc.rows*tc.blocks {
			t.Fatalf("%v: %d pieces, want %d", tc, len(ps), tc.rows*tc.blocks)
		}
		seen := map[int]bool{}
		vol := 0
		for i, p := range ps {
			row, blk := i/tc.blocks, i%tc.blocks
			lo, hi := blk*tc.width, min(tc.k, (blk+1)*tc.width)
			if p.Box[0].Lo != row || p.Box[0].Hi != row+1 || p.Box[1].Lo != lo || p.Box[1].Hi != hi {
				t.Errorf("%v: piece %d is %v, want row %d, columns [%d, %d)", tc, i, p.Box, row, lo, hi)
			}
			if seen[p.Tile] || p.Tile != ps[0].Tile+i || p.Tile >= tc.tiles {
				t.Errorf("%v: piece %d on tile %d (twice, out of order or off the tiles)", tc, i, p.Tile)
			}
			seen[p.Tile] = true
			vol += p.Box.Volume()
		}
		if vol != tc.rows*tc.k {
			t.Errorf("%v: pieces of %d elements, want %d", tc, vol, tc.rows*tc.k)
		}
	}
}

// Rows too many for one a group, whose reader packs them in groups of
// 3 (an alignment rowPieces cannot halve, so that whole rows leave most
// tiles idle): groups of rows, more than one, on contiguous tiles.
func TestSpreadPiecesGroups(t *testing.T) {
	pl, g := lnProduct(t, 1536, 768, 64, 1472)
	var ln *graph.Node
	for _, n := range g.Nodes {
		if n.Op == "LayerNormalization" {
			ln = n
		}
	}
	pl.prefs.alignOf(ln.Inputs[0])[0] = 3
	ps := pl.spreadPieces(ln, 1, 0)
	if len(ps) == 0 {
		t.Fatal("not spread")
	}
	if rows := ps[0].Box[0].Len(); rows < 2 {
		t.Errorf("groups of %d rows, want more", rows)
	}
	vol := 0
	for i, p := range ps {
		vol += p.Box.Volume()
		if p.Tile != ps[0].Tile+i {
			t.Errorf("piece %d on tile %d, want %d", i, p.Tile, ps[0].Tile+i)
		}
	}
	if vol != 1536*768 || ps[len(ps)-1].Tile >= 1472 {
		t.Errorf("%d pieces of %d elements up to tile %d, want a partition of %d on 1472 tiles", len(ps), vol, ps[len(ps)-1].Tile, 1536*768)
	}
}

// Whole rows whose reader wants blocks of 4 rows (a product's A operand)
// take blocks of 2 when that is fewer rows a tile: 1536 rows on 1472
// tiles, 768 tiles of 2 rows rather than 384 of 4.
func TestRowPiecesHalved(t *testing.T) {
	pl, g := lnProduct(t, 1536, 768, 64, 1472)
	x := g.Nodes[0].Inputs[0]
	if a := pl.prefs.alignOf(x)[0]; a != 4 {
		t.Fatalf("rows aligned on %d, want 4", a)
	}
	ps := pl.rowPieces(x, 1, 0)
	if len(ps) != 768 || largestPiece(ps) != 2*768 {
		t.Errorf("%d pieces of at most %d elements, want 768 of 2 rows", len(ps), largestPiece(ps))
	}
}
