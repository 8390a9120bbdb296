package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// TestReciprocal: Reciprocal (Div(1, x)) of float and float16 values
// and an inference Dropout before it, on 1, 5 and 64 tiles, bit for bit
// against the host reference at device precision.
func TestReciprocal(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{3, 11})
	b.AddInput("h", onnx.Float16, []int64{2, 9})
	b.AddNode("Dropout", "drop", []string{"x"}, []string{"d"})
	b.AddNode("Reciprocal", "rx", []string{"d"}, []string{"r"})
	b.AddNode("Reciprocal", "rh", []string{"h"}, []string{"rh"})
	b.AddOutput("r", onnx.Float, []int64{3, 11})
	b.AddOutput("rh", onnx.Float16, []int64{2, 9})
	data := b.Marshal()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, err := planLink(t, data, tiles)
			if err != nil {
				t.Fatal(err)
			}
			outs, res, want := runWithReference(t, o, g, 11)
			for k := range want {
				if string(outs[k]) != string(want[k].Raw) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], want[k].Raw)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
