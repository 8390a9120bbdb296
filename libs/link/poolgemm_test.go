package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// TestPoolFlattenGemm: a CNN's head, the mean over the spatial axes kept
// [N, C, 1, 1], flattened, into Gemm, on 5 tiles: a tile's piece of the
// flattened rows is one row of C/5 elements, whose odd FP16 pitch the
// pack refused ("row stride 3: want an even stride") although one row
// never steps it.
func TestPoolFlattenGemm(t *testing.T) {
	for _, dt := range []onnx.DataType{onnx.Float16, onnx.Float} {
		for _, ch := range []int64{12, 16, 7} {
			b := onnx.NewModel(14)
			b.AddInput("x", dt, []int64{1, ch, 5, 5})
			b.AddInput("w", dt, []int64{5, ch})
			b.AddInitializer(onnx.NewInt64("ax", []int64{2}, []int64{2, 3}))
			b.AddNode("ReduceMean", "gap", []string{"x"}, []string{"g"}, onnx.IntsAttr("axes", 2, 3))
			b.AddNode("Flatten", "fl", []string{"g"}, []string{"f"}, onnx.IntAttr("axis", 1))
			b.AddNode("Gemm", "fc", []string{"f", "w"}, []string{"y"}, onnx.IntAttr("transB", 1))
			b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: dt})
			t.Run(fmt.Sprint(dt, ch), func(t *testing.T) {
				_, o, st, g, err := planLinkN(t, b.Marshal(), 5, 2)
				if err != nil {
					t.Fatal(err)
				}
				checkVerdict(t, o, st, g, 3)
			})
		}
	}
}
