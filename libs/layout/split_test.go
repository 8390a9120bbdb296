package layout

import "testing"

// TestSplitCover checks that every split's blocks cover each batch
// index's result exactly once per k block, that Coords and Tile are
// inverses over the split's tiles, and that the result pieces partition
// the result.
func TestSplitCover(t *testing.T) {
	mm := MatMul{Batch: []int{3}, ABatch: []int{3}, BBatch: []int{1}, M: 70, K: 21, N: 150}
	splits := []Split{
		{GB: 1, GM: 2, GN: 3, GK: 1},
		{GB: 3, GM: 3, GN: 2, GK: 2, BOrder: true},
		{GB: 1, GM: 4, GN: 2, GK: 1, Rest: Rest{Cols: true, At: 96, GM: 2, GN: 1}},
		{GB: 2, GM: 3, GN: 3, GK: 2, Rest: Rest{Cols: true, At: 128, GM: 5, GN: 1}, BOrder: true},
		{GB: 1, GM: 2, GN: 3, GK: 3, Rest: Rest{At: 52, GM: 1, GN: 4}},
		{GB: 3, GM: 13, GN: 2, GK: 1, Rest: Rest{At: 64, GM: 1, GN: 10}, BOrder: true},
	}
	for _, s := range splits {
		if !s.Fits(mm) {
			t.Fatalf("%v does not fit", s)
		}
		blocks := s.Blocks(mm, 5)
		if len(blocks) != s.Tiles() {
			t.Fatalf("%v: %d blocks for %d tiles", s, len(blocks), s.Tiles())
		}
		// cover[b][l] counts the blocks over each result element.
		cover := make([][][]int, mm.Batches())
		for b := range cover {
			cover[b] = make([][]int, s.GK)
			for l := range cover[b] {
				cover[b][l] = make([]int, mm.M*mm.N)
			}
		}
		owned := make([][]int, mm.Batches())
		for b := range owned {
			owned[b] = make([]int, mm.M*mm.N)
		}
		for rel, tb := range blocks {
			b, i, j, l := s.Coords(rel)
			if got := s.Tile(5, b, i, j, l); got != tb.Tile || tb.Tile != 5+rel {
				t.Fatalf("%v: tile %d has block (%d,%d,%d,%d), whose tile is %d", s, tb.Tile, b, i, j, l, got)
			}
			if tb.M0 >= tb.M1 || tb.N0 >= tb.N1 || tb.M0%s.RowAlign() != 0 || tb.N0%s.ColAlign() != 0 {
				t.Fatalf("%v: tile %d block rows [%d,%d) columns [%d,%d)", s, tb.Tile, tb.M0, tb.M1, tb.N0, tb.N1)
			}
			if k0, k1 := s.KBlock(mm.K, l); tb.K0 != k0 || tb.K1 != k1 {
				t.Fatalf("%v: tile %d k [%d,%d), want [%d,%d)", s, tb.Tile, tb.K0, tb.K1, k0, k1)
			}
			for bi := tb.B0; bi < tb.B1; bi++ {
				for m := tb.M0; m < tb.M1; m++ {
					for n := tb.N0; n < tb.N1; n++ {
						cover[bi][l][m*mm.N+n]++
						if m >= tb.M0+tb.P0 && m < tb.M0+tb.P1 {
							owned[bi][m*mm.N+n]++
						}
					}
				}
			}
		}
		for b := range cover {
			for l := range cover[b] {
				for e, c := range cover[b][l] {
					if c != 1 {
						t.Fatalf("%v: batch %d k block %d element %d covered %d times", s, b, l, e, c)
					}
				}
			}
			for e, c := range owned[b] {
				if c != 1 {
					t.Fatalf("%v: batch %d result element %d owned %d times", s, b, e, c)
				}
			}
		}
		for _, a := range []bool{true, false} {
			kind, shape := APanel, []int{3, mm.M, mm.K}
			if !a {
				kind, shape = BPanel, []int{1, mm.K, mm.N}
			}
			op := &Tensor{Name: "op", Size: 2, Shape: shape, Kind: kind, Pieces: s.OperandPieces(mm, 5, a)}
			op.SortPieces()
			if err := op.Validate(5 + s.Tiles()); err != nil {
				t.Fatalf("%v operand a=%v: %v", s, a, err)
			}
			blocks := 0
			for _, tb := range s.Blocks(mm, 5) {
				blocks += tb.B1 - tb.B0
			}
			n := len(s.OperandPieces(mm, 5, a))
			if cut := n > blocks; cut != s.EdgeCut(a) || n < blocks {
				t.Fatalf("%v operand a=%v: %d pieces for %d blocks, edge cut %v", s, a, n, blocks, s.EdgeCut(a))
			}
		}
		y := &Tensor{Name: "y", Size: 4, Shape: []int{3, mm.M, mm.N}, Kind: RowMajor, Pad: BGroup, Pieces: s.ResultPieces(mm, 5)}
		y.SortPieces()
		if err := y.Validate(5 + s.Tiles()); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
	}
}

// TestSplitFits checks the cut's bounds.
func TestSplitFits(t *testing.T) {
	mm := MatMul{M: 64, K: 8, N: 64}
	for _, tc := range []struct {
		s    Split
		want bool
	}{
		{Split{GM: 16, GN: 4, GK: 1}, true},
		{Split{GM: 17, GN: 4, GK: 1}, false},
		{Split{GM: 1, GN: 1, GK: 1, Rest: Rest{At: 32}}, false},                          // a rest without blocks
		{Split{GM: 8, GN: 2, GK: 1, Rest: Rest{Cols: true, At: 32, GM: 4, GN: 2}}, true}, // 2 + 2 column blocks
		{Split{GM: 8, GN: 3, GK: 1, Rest: Rest{Cols: true, At: 32, GM: 4, GN: 2}}, false},
		{Split{GM: 8, GN: 2, GK: 1, Rest: Rest{Cols: true, At: 40, GM: 4, GN: 1}}, false}, // not on a panel
		{Split{GM: 8, GN: 2, GK: 1, Rest: Rest{Cols: true, At: 64, GM: 4, GN: 1}}, false}, // an empty rest
		{Split{GM: 2, GN: 4, GK: 1, Rest: Rest{At: 8, GM: 14, GN: 1}}, true},
		{Split{GM: 2, GN: 4, GK: 1, Rest: Rest{At: 6, GM: 14, GN: 1}}, false},
		{Split{GM: 2, GN: 4, GK: 1, Rest: Rest{At: 8, GM: 15, GN: 1}}, false},
	} {
		if got := tc.s.Fits(mm); got != tc.want {
			t.Errorf("%v fits %v: %v, want %v", tc.s, mm, got, tc.want)
		}
	}
}

// TestColParts checks the reduce-scatter's column parts: the fewest
// whose widest is as narrow as the k blocks allow.
func TestColParts(t *testing.T) {
	for _, tc := range []struct {
		gk, rows, cols int
		cut            bool
		want           int
	}{
		{8, 8, 96, true, 3},  // 2 row groups, 6 panels, at most 4 parts: 3 of 2 panels
		{4, 8, 64, true, 2},  // 4 panels, at most 2 parts
		{4, 8, 144, true, 2}, // 9 panels in 2 parts of 5 and 4
		{8, 4, 160, true, 5}, // 10 panels, at most 8 parts: 5 of 2 panels
		{8, 4, 64, true, 4},  // a part per panel
		{4, 16, 96, true, 1}, // as many row groups as k blocks
		{8, 8, 96, false, 1}, // no column cut
	} {
		s := Split{GB: 1, GM: 1, GN: 1, GK: tc.gk, ColCut: tc.cut}
		if got := s.ColParts(tc.rows, tc.cols); got != tc.want {
			t.Errorf("k=%d %dx%d cut=%v: %d column parts, want %d", tc.gk, tc.rows, tc.cols, tc.cut, got, tc.want)
		}
	}
}
