package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// TestRowsOfOne: elementwise operators on a keepdims reduction's
// [B, S, 1] result (RMSNorm's mean of squares plus epsilon, its square
// root), float and float16, read back per row by the normalization. The
// dense rows of one element used to meet an output padded to 8 bytes a
// row: "A row stride 1: 4 bytes is not a multiple of 8".
func TestRowsOfOne(t *testing.T) {
	for _, dt := range []onnx.DataType{onnx.Float, onnx.Float16} {
		b := onnx.NewModel(14)
		b.AddInput("x", dt, []int64{3, 5, 12})
		two, eps := onnx.NewFloat32("two", nil, []float32{2}), onnx.NewFloat32("eps", nil, []float32{1e-6})
		if dt == onnx.Float16 {
			two = &onnx.Tensor{Name: "two", DType: dt, Raw: []byte{0x00, 0x40}}
			eps = &onnx.Tensor{Name: "eps", DType: dt, Raw: []byte{0x11, 0x00}}
		}
		b.AddInitializer(two)
		b.AddInitializer(eps)
		b.AddNode("Pow", "sq", []string{"x", "two"}, []string{"sq"})
		b.AddNode("ReduceMean", "ms", []string{"sq"}, []string{"ms"}, onnx.IntsAttr("axes", -1))
		b.AddNode("Add", "v", []string{"ms", "eps"}, []string{"v"})
		b.AddNode("Sqrt", "sd", []string{"v"}, []string{"sd"})
		b.AddNode("Div", "y", []string{"x", "sd"}, []string{"y"})
		b.AddOutput("y", dt, []int64{3, 5, 12})
		b.AddOutput("sd", dt, []int64{3, 5, 1})
		data := b.Marshal()
		for _, tiles := range []int{1, 2, 5} {
			t.Run(fmt.Sprint(dt, "/", tiles), func(t *testing.T) {
				o, st, g, _, _ := linkedInputs(t, data, tiles, 23)
				checkVerdict(t, o, st, g, 23)
			})
		}
	}
}
