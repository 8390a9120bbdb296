package link

import (
	"encoding/binary"
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// TestConcatConstantParts: a Concat of FP16 data (twice) with constant
// parts in the middle and at the end, the parts laid out on the
// output's tiles (planner.bandPieces), gives every element on the
// device, on tile counts that split the output unevenly.
func TestConcatConstantParts(t *testing.T) {
	const a, m, w = 4, 10, 6
	half := func(i int) uint16 { return 0x3c00 + uint16(i%251) } // 1 and up, finite
	raw := func(n, base int) []byte {
		out := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(out[2*i:], half(base+i))
		}
		return out
	}
	x, c1, c2 := raw(a*m*w, 0), raw(a*3*w, 1000), raw(a*1*w, 2000)
	for _, tiles := range []int{5, 13, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			b := onnx.NewModel(13)
			b.AddInput("x", onnx.Float16, []int64{a, m, w})
			b.AddInitializer(&onnx.Tensor{Name: "c1", DType: onnx.Float16, Dims: []int64{a, 3, w}, Raw: c1})
			b.AddInitializer(&onnx.Tensor{Name: "c2", DType: onnx.Float16, Dims: []int64{a, 1, w}, Raw: c2})
			b.AddNode("Concat", "cat", []string{"x", "c1", "x", "c2"}, []string{"y"}, onnx.IntAttr("axis", 1))
			b.AddOutput("y", onnx.Float16, []int64{a, 2*m + 4, w})
			o, _, _ := linkBytes(t, b.Marshal(), tiles)
			outs, _ := runObject(t, o, [][]byte{x})
			parts := []struct {
				raw []byte
				n   int
			}{{x, m}, {c1, 3}, {x, m}, {c2, 1}}
			k := 0
			for i := range a {
				for _, p := range parts {
					for j := range p.n * w {
						want := binary.LittleEndian.Uint16(p.raw[2*(i*p.n*w+j):])
						if got := binary.LittleEndian.Uint16(outs[0][2*k:]); got != want {
							t.Fatalf("y element %d = %#04x, want %#04x", k, got, want)
						}
						k++
					}
				}
			}
		})
	}
}
