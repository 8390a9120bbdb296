package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// TestStagedWordRuns: strided FP32 slices (a stride-2 window gather
// reads one word in two) across tiles copy exactly their elements on
// the device, and the short word runs from one tile's buffer go in a
// few staged transfers instead of one transfer a word.
func TestStagedWordRuns(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		step  int64
		tiles int
	}{
		{[]int64{3, 20, 230}, 2, 128},
		{[]int64{1, 12, 630}, 3, 72},
		{[]int64{1, 24, 460}, 2, 96},
	} {
		t.Run(fmt.Sprint(tc.shape, tc.step, tc.tiles), func(t *testing.T) {
			r := len(tc.shape)
			w := tc.shape[r-1]
			out := append([]int64(nil), tc.shape...)
			out[r-1] = (w - 1 + tc.step) / tc.step
			n := int64(1)
			for _, d := range tc.shape {
				n *= d
			}
			b := onnx.NewModel(13)
			b.AddInput("x", onnx.Float, tc.shape)
			b.AddInitializer(onnx.NewInt64("starts", []int64{1}, []int64{0}))
			b.AddInitializer(onnx.NewInt64("ends", []int64{1}, []int64{w}))
			b.AddInitializer(onnx.NewInt64("axes", []int64{1}, []int64{int64(r - 1)}))
			b.AddInitializer(onnx.NewInt64("steps", []int64{1}, []int64{tc.step}))
			b.AddNode("Relu", "relu", []string{"x"}, []string{"a"})
			b.AddNode("Slice", "slice", []string{"a", "starts", "ends", "axes", "steps"}, []string{"s"})
			b.AddNode("Neg", "neg", []string{"s"}, []string{"y"})
			b.AddOutput("y", onnx.Float, out)
			o, _, _ := linkBytes(t, b.Marshal(), tc.tiles)
			transfers := 0
			for _, tl := range o.Tiles {
				transfers += len(tl.Exchange)
			}
			x := make([]byte, 4*n)
			for i := range n {
				binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(i%97)+0.25))
			}
			outs, _ := runObject(t, o, [][]byte{x})
			rows := n / w
			k := 0
			for row := range rows {
				for c := int64(0); c < w; c += tc.step {
					want := -float32((row*w+c)%97) - 0.25
					if got := math.Float32frombits(binary.LittleEndian.Uint32(outs[0][4*k:])); got != want {
						t.Fatalf("y[%d] = %v, want %v", k, got, want)
					}
					k++
				}
			}
			t.Logf("%d transfers for %d output elements", transfers, k)
			if 4*transfers > k {
				t.Errorf("%d transfers for %d output elements: the strided words were not staged", transfers, k)
			}
		})
	}
}
