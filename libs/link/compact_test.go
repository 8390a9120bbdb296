package link

import (
	"testing"

	"ipu.local/formats/obj"
)

// TestCompactedSameResults links plans with their supersteps compacted
// (libs/lower compact.go) and with their steps in order: both run in
// their linked cycles and give bit-identical outputs, and compaction
// leaves fewer supersteps: an attention block (independent projections),
// a GPT-2-shaped block, and an embedding with attention as PyTorch
// exports it.
func TestCompactedSameResults(t *testing.T) {
	if testing.Short() {
		t.Skip("plans, links and simulates three models twice")
	}
	for _, c := range []struct {
		path  string
		tiles int
	}{
		{"../../testdata/models/shared/torch_attention/model.onnx", 64},
		{"../../testdata/models/transformers/gpt2_small_block_fp16/model.onnx", 64},
		{"../../testdata/models/torch-sizes/tembattn_b2_s10_h40_n5_op14/model.onnx", 64},
	} {
		pl, _, _, g := linkModel(t, c.path, "ipu21", c.tiles)
		if pl.Supersteps != "compact" {
			t.Logf("%s: the planner kept the steps in order", c.path)
		}
		pl.Supersteps = "compact"
		o, st, err := Link(pl, "test", Options{})
		if err != nil {
			t.Fatal(err)
		}
		pl.Supersteps = ""
		io, ist, err := Link(pl, "test", Options{})
		if err != nil {
			t.Fatal(err)
		}
		count := func(st *Stats) (n int) {
			for _, s := range st.Supersteps {
				if s.Kind != obj.HostExchange {
					n++
				}
			}
			return n
		}
		if count(st) >= count(ist) {
			t.Errorf("%s: %d supersteps compacted, %d in order", c.path, count(st), count(ist))
		}
		sameRuns(t, g, o, st, io, ist, c.path+": compacted and in order")
		t.Logf("%s: %d -> %d supersteps, %d -> %d cycles", c.path, count(ist), count(st), ist.FinalCycles, st.FinalCycles)
	}
}
