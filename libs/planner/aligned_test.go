package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// TestElementwiseAlignsRows: a keepdims=0 ReduceMean writes one value a
// row, pad 1: on one tile its [2, 9] FP32 output has rows of 36 bytes,
// which an elementwise kernel cannot walk (every row starts on an 8-byte
// boundary). The Add reading it takes it through a re-layout to a pad
// that aligns its rows, and the model plans on one tile; on two tiles
// each holds one row, and no re-layout is added.
func TestElementwiseAlignsRows(t *testing.T) {
	g := load(t, "torch-sizes/temb_b2_s9_h36_const_keepdims0_op14/model")
	for _, tc := range []struct {
		tiles    int
		relayout bool
	}{{1, true}, {2, false}} {
		pl, _, _, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: tc.tiles, Seed: 1, MaxAttempts: 5})
		if err != nil {
			t.Fatalf("%d tiles: %v", tc.tiles, err)
		}
		relayout := false
		for _, st := range pl.Steps {
			if st.Name != "relayout:/embeddings/LayerNorm/ReduceMean_1_output_0" {
				continue
			}
			relayout = true
			out := pl.Tensors[st.Outputs[0]]
			for _, p := range out.Pieces {
				n := p.Region[len(p.Region)-1][1] - p.Region[len(p.Region)-1][0]
				if layout.Pad(int(n), out.Pad)*lower.DeviceSize(g.Values[out.Value].DType)%8 != 0 {
					t.Errorf("%d tiles: the re-layout's rows of %d elements at pad %d are not 8-byte aligned", tc.tiles, n, out.Pad)
				}
			}
		}
		if relayout != tc.relayout {
			t.Errorf("%d tiles: re-layout of the reduction's output %v, want %v", tc.tiles, relayout, tc.relayout)
		}
	}
}
