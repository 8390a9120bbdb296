package link

import (
	"bytes"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/hostref"
	"ipu.local/libs/sim"
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
		ins := hostref.GenerateInputs(g, 5)
		inputs := make([][]byte, len(ins))
		for i, in := range ins {
			inputs[i] = in.Raw
		}
		outs, res, err := Simulate(o, inputs, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		iouts, ires, err := Simulate(io, inputs, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkCyclesOnly(t, st, res)
		checkCyclesOnly(t, ist, ires)
		for i := range outs {
			if !bytes.Equal(outs[i], iouts[i]) {
				t.Errorf("%s: output %d differs compacted and in order", c.path, i)
			}
		}
		t.Logf("%s: %d -> %d supersteps, %d -> %d cycles", c.path, count(ist), count(st), ist.FinalCycles, st.FinalCycles)
	}
}
