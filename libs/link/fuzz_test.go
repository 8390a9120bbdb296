package link

import (
	"os"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
)

// FuzzLink links mutated plans of qk-early and of the node models: Link
// may refuse a plan, never panic, and what it links validates as an
// object (Link checks that itself).
func FuzzLink(f *testing.F) {
	p, _ := arch.Lookup("ipu21")
	for _, tc := range nodeModels {
		b := onnx.NewModel(tc.opset)
		tc.build(b)
		m, err := onnx.ReadModel(b.Marshal())
		if err != nil {
			f.Fatal(err)
		}
		g, err := graph.Build(m)
		if err != nil {
			f.Fatal(err)
		}
		pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: 4, Seed: 1, MaxAttempts: 1})
		if err != nil {
			f.Fatal(err)
		}
		out, err := plan.Marshal(pl)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(out)
	}
	for _, tc := range []struct {
		model string
		tiles int
	}{{"../../testdata/models/qk-early.onnx", 16}, {"../../testdata/models/qk-early.onnx", 4}} {
		data, err := os.ReadFile(tc.model)
		if err != nil {
			f.Fatal(err)
		}
		m, err := onnx.ReadModel(data)
		if err != nil {
			f.Fatal(err)
		}
		g, err := graph.Build(m)
		if err != nil {
			f.Fatal(err)
		}
		pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: tc.tiles, Seed: 1, MaxAttempts: 2})
		if err != nil {
			f.Fatal(err)
		}
		out, err := plan.Marshal(pl)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(out)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pl, err := plan.Read(data)
		if err != nil {
			return
		}
		if pl.Tiles > 64 {
			return // keep each run short
		}
		_, _, _ = Link(pl, "fuzz", Options{})
	})
}
