package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// TestStagedWordRuns: strided slices across tiles whose runs are whole
// words (FP32 elements, or FP16 rows of two along the sliced axis; a
// stride-2 window gather reads one word in two) copy exactly their
// elements on the device, and the short word runs from one tile's
// buffer go in a few staged transfers instead of one transfer a word.
func TestStagedWordRuns(t *testing.T) {
	for _, tc := range []struct {
		shape      []int64
		axis, step int
		fp16       bool
		tiles      int
	}{
		{[]int64{3, 20, 230}, 2, 2, false, 128},
		{[]int64{1, 12, 630}, 2, 3, false, 72},
		{[]int64{1, 24, 460}, 2, 2, false, 96},
		{[]int64{2, 300, 2}, 1, 2, true, 40},
	} {
		t.Run(fmt.Sprint(tc.shape, tc.axis, tc.step, tc.fp16, tc.tiles), func(t *testing.T) {
			dt, size := onnx.Float, 4
			if tc.fp16 {
				dt, size = onnx.Float16, 2
			}
			out := append([]int64(nil), tc.shape...)
			out[tc.axis] = (tc.shape[tc.axis] - 1 + int64(tc.step)) / int64(tc.step)
			n := int64(1)
			for _, d := range tc.shape {
				n *= d
			}
			b := onnx.NewModel(13)
			b.AddInput("x", dt, tc.shape)
			b.AddInitializer(onnx.NewInt64("starts", []int64{1}, []int64{0}))
			b.AddInitializer(onnx.NewInt64("ends", []int64{1}, []int64{tc.shape[tc.axis]}))
			b.AddInitializer(onnx.NewInt64("axes", []int64{1}, []int64{int64(tc.axis)}))
			b.AddInitializer(onnx.NewInt64("steps", []int64{1}, []int64{int64(tc.step)}))
			b.AddNode("Relu", "relu", []string{"x"}, []string{"a"})
			b.AddNode("Slice", "slice", []string{"a", "starts", "ends", "axes", "steps"}, []string{"s"})
			b.AddNode("Neg", "neg", []string{"s"}, []string{"y"})
			b.AddOutput("y", dt, out)
			o, _, _ := linkBytes(t, b.Marshal(), tc.tiles)
			transfers := 0
			for _, tl := range o.Tiles {
				transfers += len(tl.Exchange)
			}
			value := func(i int64) float32 { return float32(i%97) + 0.25 } // exact in FP16 too
			x := make([]byte, int64(size)*n)
			for i := range n {
				if tc.fp16 {
					binary.LittleEndian.PutUint16(x[2*i:], numfmt.F32ToF16(math.Float32bits(value(i))))
				} else {
					binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(value(i)))
				}
			}
			outs, _ := runObject(t, o, [][]byte{x})
			inner := int64(1) // elements after the sliced axis
			for _, d := range tc.shape[tc.axis+1:] {
				inner *= d
			}
			k := 0
			for i := range n {
				if (i/inner)%tc.shape[tc.axis]%int64(tc.step) != 0 {
					continue
				}
				var got float32
				if tc.fp16 {
					got = math.Float32frombits(numfmt.F16ToF32(binary.LittleEndian.Uint16(outs[0][2*k:])))
				} else {
					got = math.Float32frombits(binary.LittleEndian.Uint32(outs[0][4*k:]))
				}
				if want := -value(i); got != want {
					t.Fatalf("y[%d] = %v, want %v", k, got, want)
				}
				k++
			}
			t.Logf("%d transfers for %d output elements", transfers, k)
			if 4*transfers > k {
				t.Errorf("%d transfers for %d output elements: the strided words were not staged", transfers, k)
			}
		})
	}
}
