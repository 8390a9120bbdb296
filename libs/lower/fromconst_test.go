package lower

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// TestFromConstCopies: a constant's tile bytes hold each piece's
// elements at its offset, whether the tile's pieces repeat another
// tile's (a replicated block, whose bytes it shares) or not; tiles with
// other pieces but the same bytes share them too.
func TestFromConstCopies(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	const rows, cols = 8, 32
	raw := make([]byte, 2*rows*cols)
	for i := range raw {
		raw[i] = byte(r.IntN(256))
	}
	v := &graph.Value{Name: "w", DType: onnx.Float16, Shape: []int64{rows, cols}, Const: &onnx.Tensor{Raw: raw}}
	g := &graph.Graph{Values: []*graph.Value{v}}
	left := layout.Box{{Lo: 0, Hi: rows}, {Lo: 0, Hi: 16}}
	right := layout.Box{{Lo: 0, Hi: rows}, {Lo: 16, Hi: cols}}
	top := layout.Box{{Lo: 0, Hi: 4}, {Lo: 0, Hi: cols}}
	ten := &layout.Tensor{ID: 0, Value: 0, Name: "w", Size: 2, Shape: []int{rows, cols}, Kind: layout.RowMajor, Source: layout.FromConst,
		Pieces: []layout.Piece{{Tile: 0, Box: left}, {Tile: 1, Box: left}, {Tile: 2, Box: right}, {Tile: 3, Box: left}, {Tile: 3, Box: right},
			{Tile: 4, Box: right}, {Tile: 5, Box: left}, {Tile: 5, Box: right}, {Tile: 6, Box: top}}}
	ten.SortPieces()
	l := &lowerer{p: arch.MustLookup("ipu21"), g: g, out: &prog.Program{}, refs: make([][]prog.Ref, 1)}
	refs, err := l.fromConst(ten)
	if err != nil {
		t.Fatal(err)
	}
	buf := refs[0].Buf
	for i, pc := range ten.Pieces {
		geo := ten.Geometry(i)
		for row := pc.Box[0].Lo; row < pc.Box[0].Hi; row++ {
			for c := pc.Box[1].Lo; c < pc.Box[1].Hi; c++ {
				at := int(refs[i].Off) + 2*geo.Offset([]int{row, c})
				if got, want := buf.Data[pc.Tile][at:at+2], raw[2*(row*cols+c):2*(row*cols+c)+2]; !bytes.Equal(got, want) {
					t.Fatalf("tile %d element (%d, %d): %x, want %x", pc.Tile, row, c, got, want)
				}
			}
		}
	}
	same := func(a, b int) bool { return &buf.Data[a][0] == &buf.Data[b][0] }
	if !same(0, 1) || !same(2, 4) || !same(3, 5) || same(0, 2) || same(0, 3) || same(6, 0) {
		t.Fatal("tiles with the same pieces do not share their bytes, or tiles with others do")
	}
	// Columns 16 to 31 a copy of 0 to 15: the left and right blocks
	// have the same bytes.
	for row := range rows {
		copy(raw[2*(row*cols+16):2*(row*cols+32)], raw[2*row*cols:2*(row*cols+16)])
	}
	two := &layout.Tensor{ID: 0, Value: 0, Name: "w", Size: 2, Shape: []int{rows, cols}, Kind: layout.RowMajor, Source: layout.FromConst,
		Pieces: []layout.Piece{{Tile: 0, Box: left}, {Tile: 1, Box: right}}}
	l = &lowerer{p: arch.MustLookup("ipu21"), g: g, out: &prog.Program{}, refs: make([][]prog.Ref, 1)}
	if refs, err = l.fromConst(two); err != nil {
		t.Fatal(err)
	}
	if d := refs[0].Buf.Data; &d[0][0] != &d[1][0] {
		t.Fatal("tiles with other pieces but the same bytes do not share them")
	}
}
