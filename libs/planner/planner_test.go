package planner

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
)

func load(t testing.TB, name string) *graph.Graph {
	t.Helper()
	m, err := onnx.ReadModelFile("../../testdata/models/" + name + ".onnx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// planned is one Plan call of a test model on ipu21 (seed 1, 10
// attempts), shared by the tests that read it.
type planned struct {
	pl  *plan.Plan
	s   *plan.State
	st  *Stats
	err error
}

var plannedCache = map[string]planned{}

func planModel(t *testing.T, model string, tiles int) (*plan.Plan, *plan.State, *Stats) {
	t.Helper()
	key := fmt.Sprintf("%s/%d", model, tiles)
	r, ok := plannedCache[key]
	if !ok {
		g := load(t, model)
		r.pl, r.s, r.st, r.err = Plan(g, arch.MustLookup("ipu21"), Options{Tiles: tiles, Seed: 1, MaxAttempts: 10, ModelFingerprint: "fp"})
		plannedCache[key] = r
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.pl, r.s, r.st
}

func TestModels(t *testing.T) {
	for _, tc := range []struct {
		model    string
		tiles    int
		maxRatio float64
	}{
		{"matmul2048", 1472, 2.0},
		{"qk-early", 1472, 0},
		{"qk-early", 64, 0},
		{"mlp-small", 1472, 0},
		{"mlp-small", 64, 0},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.model, tc.tiles), func(t *testing.T) {
			if testing.Short() && tc.tiles > 64 {
				t.Skip("full-chip planning is slow; run without -short")
			}
			pl, s, st := planModel(t, tc.model, tc.tiles)
			ratio := float64(pl.Cost.FinalCycles) / float64(pl.Cost.ComputeBound)
			t.Logf("%s on %d tiles: final_cycles=%d final_exchange=%d compute_bound=%d ratio=%.3f attempts=%d stats=%+v", tc.model, tc.tiles, pl.Cost.FinalCycles, pl.Cost.FinalExchange, pl.Cost.ComputeBound, ratio, s.Attempts, *st)
			for _, stp := range pl.Steps {
				t.Logf("  step %+v", stp)
			}
			if tc.maxRatio > 0 && ratio > tc.maxRatio {
				t.Errorf("ratio %.3f > %.1f", ratio, tc.maxRatio)
			}
			data, err := plan.Marshal(pl)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plan.Read(data); err != nil {
				t.Fatal(err)
			}
			// The plan links, to the cycles the planner estimated.
			_, lst, err := link.Link(pl, plan.Fingerprint(data), link.Options{})
			if err != nil {
				t.Fatalf("link: %v", err)
			}
			// The estimate schedules every exchange fast; the linker
			// repairs the transfers whose instructions the placed code
			// misaligns (RetriedPhases), which may lengthen a superstep.
			if lst.RetriedPhases == 0 && lst.FinalCycles != pl.Cost.FinalCycles ||
				lst.FinalCycles < pl.Cost.FinalCycles || float64(lst.FinalCycles) > 1.01*float64(pl.Cost.FinalCycles) {
				t.Errorf("linked %d cycles, estimated %d (%d exchange supersteps repaired)", lst.FinalCycles, pl.Cost.FinalCycles, lst.RetriedPhases)
			}
		})
	}
}

// TestMoreTiles checks that planning for more tiles is never worse: a
// plan for 1472 tiles may use any subset of them, 64 included.
func TestMoreTiles(t *testing.T) {
	for _, model := range []string{"qk-early", "mlp-small"} {
		t.Run(model, func(t *testing.T) {
			if testing.Short() {
				t.Skip("full-chip planning is slow; run without -short")
			}
			few, _, _ := planModel(t, model, 64)
			all, _, _ := planModel(t, model, 1472)
			t.Logf("%s: final_cycles %d on 64 tiles, %d on 1472", model, few.Cost.FinalCycles, all.Cost.FinalCycles)
			if all.Cost.FinalCycles > few.Cost.FinalCycles {
				t.Errorf("final_cycles %d on 1472 tiles > %d on 64", all.Cost.FinalCycles, few.Cost.FinalCycles)
			}
		})
	}
}

func TestResume(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	g := load(t, "qk-early")
	opt := Options{Seed: 3, ModelFingerprint: "fp"}
	one := opt
	one.MaxAttempts = 10
	want, wantS, _, err := Plan(g, p, one)
	if err != nil {
		t.Fatal(err)
	}
	half := opt
	half.MaxAttempts = 5
	_, s1, _, err := Plan(g, p, half)
	if err != nil {
		t.Fatal(err)
	}
	// Through the file format, as the tool does.
	data, err := plan.MarshalState(s1)
	if err != nil {
		t.Fatal(err)
	}
	s1, err = plan.ReadState(data)
	if err != nil {
		t.Fatal(err)
	}
	half.State = s1
	got, gotS, st, err := Plan(g, p, half)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Resuming {
		t.Errorf("second call not resuming")
	}
	if d := cmp.Diff(wantS, gotS); d != "" {
		t.Errorf("state mismatch (-want +got):\n%s", d)
	}
	a, _ := plan.Marshal(want)
	b, _ := plan.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Errorf("plans differ")
	}
}

func TestTooBig(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	g := load(t, "matmul2048")
	_, _, _, err := Plan(g, p, Options{Seed: 1})
	if err == nil {
		t.Fatal("planned matmul2048 on 4 tiles")
	}
	t.Logf("%v", err)
}
