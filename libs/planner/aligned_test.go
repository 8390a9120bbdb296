package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// TestElementwiseAlignsRows: a keepdims=0 ReduceMean writes one value a
// row, pad 1: on one tile its [2, 9] FP32 output has rows of 36 bytes,
// and its [3, 7] FP16 one rows of 14, which an elementwise kernel cannot
// walk (every row starts on an 8-byte boundary). The Add reading it
// takes it through a re-layout to a pad that aligns its rows, and the
// model plans on one tile; the FP32 model on two tiles holds one row on
// each, and no re-layout is added.
func TestElementwiseAlignsRows(t *testing.T) {
	for _, tc := range []struct {
		model    string
		tiles    int
		relayout bool
	}{
		{"temb_b2_s9_h36_const_keepdims0_op14", 1, true},
		{"temb_b2_s9_h36_const_keepdims0_op14", 2, false},
		{"temb_b3_s7_h20_fp16_keepdims0_op14", 1, true},
	} {
		g := load(t, "torch-sizes/"+tc.model+"/model")
		pl, _, _, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: tc.tiles, Seed: 1, MaxAttempts: 5})
		if err != nil {
			t.Fatalf("%s on %d tiles: %v", tc.model, tc.tiles, err)
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
					t.Errorf("%s on %d tiles: the re-layout's rows of %d elements at pad %d are not 8-byte aligned", tc.model, tc.tiles, n, out.Pad)
				}
			}
		}
		if relayout != tc.relayout {
			t.Errorf("%s on %d tiles: re-layout of the reduction's output %v, want %v", tc.model, tc.tiles, relayout, tc.relayout)
		}
	}
}
