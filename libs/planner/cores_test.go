package planner

import (
	"bytes"
	"runtime"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
)

// TestPlanOnAnyCores: the search prices points on a worker per core,
// each with its own step cache; the plan, its state and the points
// counted are the same on 1, 2 and 4 of them (a point's price and memory
// check do not depend on what its worker's cache holds).
func TestPlanOnAnyCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, model := range []string{"shared/torch_attention/model", "shared/bert_layer_fp16/model"} {
		g := load(t, model)
		var want []byte
		var wantState []byte
		var wantEvals int
		for _, cores := range []int{1, 2, 4} {
			runtime.GOMAXPROCS(cores)
			if searchWorkers() != cores {
				t.Fatalf("%d cores: %d workers", cores, searchWorkers())
			}
			pl, s, st, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: 64, Seed: 1, MaxAttempts: 20, ModelFingerprint: "fp"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := plan.Marshal(pl)
			if err != nil {
				t.Fatal(err)
			}
			gotState, err := plan.MarshalState(s)
			if err != nil {
				t.Fatal(err)
			}
			if cores == 1 {
				want, wantState, wantEvals = got, gotState, st.Evaluated
				continue
			}
			if !bytes.Equal(got, want) || !bytes.Equal(gotState, wantState) || st.Evaluated != wantEvals {
				t.Errorf("%s: on %d cores the plan, state or points priced (%d) differ from 1 core's (%d)", model, cores, st.Evaluated, wantEvals)
			}
		}
	}
}
