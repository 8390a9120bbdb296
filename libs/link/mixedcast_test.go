package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// A product of an operand rounded to FP8 or FP16 and back (a cast
// chain) and a plain FP32 operand computes in FP32: the rounding is the
// graph's own casts, not dropped. Its root computed (a Relu before the
// casts, whose rounding the planner once skipped: worst error 0.22 on
// the FP8 case) or from the host, the casts shared with a second product
// or not, on few and many tiles; checked against the host reference.
func TestMixedCastProduct(t *testing.T) {
	for _, tc := range []struct {
		round   onnx.DataType
		relu    bool
		shared  bool
		m, k, n int64
		tiles   int
	}{
		{onnx.Float8E4M3FNUZ, true, false, 64, 96, 80, 1472},
		{onnx.Float8E4M3FNUZ, false, true, 40, 72, 48, 64},
		{onnx.Float16, true, true, 33, 50, 20, 16},
		{onnx.Float8E5M2, false, false, 24, 40, 56, 4},
	} {
		t.Run(fmt.Sprintf("%s relu %v shared %v @%d", tc.round, tc.relu, tc.shared, tc.tiles), func(t *testing.T) {
			b := onnx.NewModel(21)
			b.AddInput("x", onnx.Float, []int64{tc.m, tc.k})
			b.AddInput("w", onnx.Float, []int64{tc.k, tc.n})
			x := "x"
			if tc.relu {
				b.AddNode("Relu", "r_Relu", []string{"x"}, []string{"r"})
				x = "r"
			}
			b.AddNode("Cast", "x8_Cast", []string{x}, []string{"x8"}, onnx.IntAttr("to", int64(tc.round)), onnx.IntAttr("saturate", 1))
			b.AddNode("Cast", "xf_Cast", []string{"x8"}, []string{"xf"}, onnx.IntAttr("to", int64(onnx.Float)))
			b.AddNode("MatMul", "y_MatMul", []string{"xf", "w"}, []string{"y"})
			b.AddOutput("y", onnx.Float, []int64{tc.m, tc.n})
			if tc.shared {
				b.AddInput("v", onnx.Float, []int64{tc.k, tc.n})
				b.AddNode("MatMul", "z_MatMul", []string{"xf", "v"}, []string{"z"})
				b.AddOutput("z", onnx.Float, []int64{tc.m, tc.n})
			}
			o, st, g := linkBytes(t, b.Marshal(), tc.tiles)
			checkModel(t, o, st, g)
		})
	}
}
