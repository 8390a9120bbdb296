package planner

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
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

func TestModels(t *testing.T) {
	p := arch.MustLookup("ipu21")
	for _, tc := range []struct {
		model    string
		tiles    int
		maxRatio float64
	}{
		{"matmul2048", 1472, 2.0},
		{"qk-early", 1472, 0},
		{"qk-early", 64, 0},
		{"mlp-small", 1472, 0},
	} {
		t.Run(tc.model, func(t *testing.T) {
			if testing.Short() && tc.tiles > 64 {
				t.Skip("full-chip planning is slow; run without -short")
			}
			g := load(t, tc.model)
			pl, s, st, err := Plan(g, p, Options{Tiles: tc.tiles, Seed: 1, MaxAttempts: 10, ModelFingerprint: "fp"})
			if err != nil {
				t.Fatal(err)
			}
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
