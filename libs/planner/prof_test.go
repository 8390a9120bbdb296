package planner

import (
	"os"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/lower"
	"ipu.local/libs/onnx"
)

func TestProfBert(t *testing.T) {
	path := os.Getenv("PROF_MODEL")
	if path == "" {
		t.Skip()
	}
	m, err := onnx.ReadModelFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	pl, _, st, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: 1472, Seed: 1, MaxAttempts: 20, SearchEstimate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cycles %d evaluated %d", pl.Cost.FinalCycles, st.Evaluated)
	data, _ := plan.Marshal(pl)
	os.WriteFile("/tmp/t/prof.plan", data, 0o644)
}

func TestBoundVsSchedule(t *testing.T) {
	path := os.Getenv("PROF_MODEL")
	if path == "" {
		t.Skip()
	}
	m, _ := onnx.ReadModelFile(path)
	g, _ := graph.Build(m)
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := pl.start()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pl.build(pt)
	pr, err := lower.LowerWith(b.plan(pl, pt), g, pl.p, lower.Options{NoData: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := cost.Synthetic(pl.p, pr.Buffers)
	for i, s := range pr.Steps {
		if len(s.Xfers) == 0 {
			continue
		}
		bd, _ := cost.ExchangeBound(pl.p, s, addr)
		ex, _ := cost.ExchangeCycles(pl.p, s, addr)
		t.Logf("%d %s: %d transfers bound %d schedule %d", i, s.Name, len(s.Xfers), bd, ex)
	}
}

func TestSteps(t *testing.T) {
	path := os.Getenv("PROF_MODEL")
	if path == "" {
		t.Skip()
	}
	m, _ := onnx.ReadModelFile(path)
	g, _ := graph.Build(m)
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := pl.start()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pt {
		t.Logf("decision %+v", d)
	}
	b, _ := pl.build(pt)
	pr, err := lower.LowerWith(b.plan(pl, pt), g, pl.p, lower.Options{NoData: true})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cost.ProgramWith(pr, cost.Options{Bound: true})
	for i, s := range pr.Steps {
		kern := 0
		for _, ks := range s.Work {
			kern += len(ks)
		}
		t.Logf("%d %s: %d cycles, %d transfers, %d tiles, %d kernels", i, s.Name, c.Supersteps[i], len(s.Xfers), len(s.Work), kern)
	}
	t.Logf("total %d", c.FinalCycles)
}

func TestProfMM(t *testing.T) {
	path := os.Getenv("PROF_MM")
	if path == "" {
		t.Skip()
	}
	m, _ := onnx.ReadModelFile(path)
	g, _ := graph.Build(m)
	pl, _, _, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: 1472, Seed: 1, MaxAttempts: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range pl.Steps {
		t.Logf("step %+v", st)
		if st.Split != nil {
			t.Logf("split %+v", *st.Split)
		}
	}
	data, _ := plan.Marshal(pl)
	os.WriteFile("/tmp/t/mm.plan", data, 0o644)
	for _, ts := range pl.Tensors {
		t.Logf("tensor %s %v %s pad %v pieces %d", ts.Name, ts.Shape, ts.Layout, ts.Pad, len(ts.Pieces))
	}
}

func TestProfCands(t *testing.T) {
	path := os.Getenv("PROF_CANDS")
	if path == "" {
		t.Skip()
	}
	m, _ := onnx.ReadModelFile(path)
	g, _ := graph.Build(m)
	g, _ = graph.Canonicalize(g)
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("constShare %d budgets %v", pl.constShare, pl.budgets())
	for i, pr := range pl.products {
		if i > 9 {
			break
		}
		for _, s := range pl.candidates(pr) {
			d := decision(pr.idx, s, "", "b")
			t.Logf("%s class %s: %+v const %d", pr.node.Name, pr.class(), s, pl.constBytes(pr, d))
		}
	}
}
