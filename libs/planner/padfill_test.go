package planner

import (
	"fmt"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/onnx"
)

// A Pad's fill is a constant part of a Concat: the plan lays it out on
// the tiles of the output pieces that hold it (bandPieces), so that the
// link copies it on each tile instead of exchanging it from its default
// tiles every run (ResNet-18's pads cost 27,305 cycles a run so, and the
// exchange scheduler 51 s). Shapes, pads and tile counts the defaults
// were not designed for, with the fill before and after the data.
func TestConcatConstantOnOutputTiles(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		pads  []int64 // ONNX order: begins, then ends
		tiles int
	}{
		{[]int64{1, 16, 30, 30}, []int64{0, 0, 1, 1, 0, 0, 1, 1}, 64},
		{[]int64{2, 3, 17, 9}, []int64{0, 0, 2, 0, 0, 0, 1, 3}, 13},
		{[]int64{1, 64, 56, 56}, []int64{0, 0, 1, 1, 0, 0, 1, 1}, 1472},
		{[]int64{5, 7, 11}, []int64{0, 3, 0, 0, 0, 2}, 7},
		{[]int64{3, 40}, []int64{1, 0, 2, 5}, 6},
	} {
		t.Run(fmt.Sprint(tc.shape, tc.pads, tc.tiles), func(t *testing.T) {
			r := len(tc.shape)
			out := make([]int64, r)
			n := int64(1)
			for d := range r {
				out[d] = tc.shape[d] + tc.pads[d] + tc.pads[r+d]
				n *= out[d]
			}
			b := onnx.NewModel(17)
			b.AddInput("x", onnx.Float, tc.shape)
			b.AddInitializer(onnx.NewInt64("pads", []int64{int64(2 * r)}, tc.pads))
			b.AddNode("Pad", "pad", []string{"x", "pads"}, []string{"p"})
			b.AddNode("Relu", "relu", []string{"p"}, []string{"y"})
			b.AddOutput("y", onnx.Float, out)
			checkConstParts(t, b, tc.tiles)
		})
	}
}

// A Concat's constant parts in the middle and at the end, FP16, with
// the data twice, on tile counts that split the output unevenly.
func TestConcatConstantPartsFP16(t *testing.T) {
	for _, tiles := range []int{5, 64, 1472} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			b := onnx.NewModel(13)
			b.AddInput("x", onnx.Float16, []int64{4, 10, 6})
			b.AddInitializer(&onnx.Tensor{Name: "c1", DType: onnx.Float16, Dims: []int64{4, 3, 6}, Raw: make([]byte, 2*4*3*6)})
			b.AddInitializer(&onnx.Tensor{Name: "c2", DType: onnx.Float16, Dims: []int64{4, 1, 6}, Raw: make([]byte, 2*4*1*6)})
			b.AddNode("Concat", "cat", []string{"x", "c1", "x", "c2"}, []string{"p"}, onnx.IntAttr("axis", 1))
			b.AddNode("Relu", "relu", []string{"p"}, []string{"y"})
			b.AddOutput("y", onnx.Float16, []int64{4, 24, 6})
			checkConstParts(t, b, tiles)
		})
	}
}

// checkConstParts plans b's model on tiles and checks that every
// constant part of a Concat lies on the tiles of the output pieces that
// take it.
func checkConstParts(t *testing.T, b *onnx.ModelBuilder, tiles int) {
	t.Helper()
	pl, _, _, err := Plan(canonical(t, b), arch.MustLookup("ipu21"), Options{Tiles: tiles, Seed: 1, MaxAttempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	fills := 0
	for _, st := range pl.Steps {
		if st.Kernel != "move" {
			continue
		}
		y := pl.Tensors[st.Outputs[0]]
		off := int64(0)
		for _, id := range st.Inputs {
			x := pl.Tensors[id]
			axis := concatAxis(x.Shape, y.Shape)
			if x.Source == plan.FromConst {
				fills++
				for _, pc := range x.Pieces {
					if !heldOn(y, pc, axis, off) {
						t.Errorf("step %q: constant piece %v on tile %d is in no output piece of that tile", st.Name, pc.Region, pc.Tile)
					}
				}
			}
			off += x.Shape[axis]
		}
	}
	if fills == 0 {
		t.Fatal("no constant part of a Concat in the plan")
	}
}

// concatAxis is the axis along which a Concat input's shape differs from
// its output's.
func concatAxis(in, out []int64) int {
	for d := range in {
		if in[d] != out[d] {
			return d
		}
	}
	return 0
}

// heldOn reports whether an output piece of y on pc's tile holds pc's
// region shifted by off along axis.
func heldOn(y plan.Tensor, pc plan.Piece, axis int, off int64) bool {
	for _, q := range y.Pieces {
		if q.Tile != pc.Tile {
			continue
		}
		in := true
		for d, rg := range pc.Region {
			lo, hi := rg[0], rg[1]
			if d == axis {
				lo, hi = lo+off, hi+off
			}
			in = in && q.Region[d][0] <= lo && hi <= q.Region[d][1]
		}
		if in {
			return true
		}
	}
	return false
}
