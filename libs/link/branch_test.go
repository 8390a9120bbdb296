package link

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
	"ipu.local/libs/verdict"
)

// branchModels are Ifs on a condition the host gives (a bool input, so
// that nothing folds it): the device branches on it.
var branchModels = []struct {
	name  string
	tiles []int
	build func(b *onnx.ModelBuilder)
}{
	// The torch gate's shape: the then side computes, the else side is
	// an outer value.
	{"gate", []int{1, 4, 64}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{6, 16})
		b.AddInput("c", onnx.Bool, []int64{1})
		b.AddInitializer(scalar("k", 2))
		then := &onnx.Graph{Name: "then", Nodes: []onnx.Node{
			{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"t"}},
			{Name: "mul", OpType: "Mul", Inputs: []string{"t", "k"}, Outputs: []string{"y"}},
		}, Outputs: []onnx.ValueInfo{{Name: "y"}}}
		els := &onnx.Graph{Name: "else", Nodes: []onnx.Node{{Name: "id", OpType: "Identity", Inputs: []string{"x"}, Outputs: []string{"e"}}},
			Outputs: []onnx.ValueInfo{{Name: "e"}}}
		b.AddNode("If", "gate", []string{"c"}, []string{"p"}, onnx.GraphAttr("then_branch", then), onnx.GraphAttr("else_branch", els))
		b.AddNode("Relu", "after", []string{"p"}, []string{"q"})
		b.AddOutput("q", onnx.Float, []int64{6, 16})
	}},
	// Sides of very different lengths (a product and a chain against
	// one operator), the then side only an outer value, two outputs.
	{"uneven", []int{4, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{8, 32})
		b.AddInput("c", onnx.Bool, []int64{})
		b.AddInitializer(onnx.NewFloat32("w", []int64{32, 32}, ramp(32*32, 0.0625)))
		then := &onnx.Graph{Name: "then", Outputs: []onnx.ValueInfo{{Name: "x"}, {Name: "x"}}}
		els := &onnx.Graph{Name: "else", Nodes: []onnx.Node{
			{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"m"}},
			{Name: "th", OpType: "Tanh", Inputs: []string{"m"}, Outputs: []string{"h"}},
			{Name: "sg", OpType: "Sigmoid", Inputs: []string{"h"}, Outputs: []string{"s"}},
			{Name: "mm2", OpType: "MatMul", Inputs: []string{"s", "w"}, Outputs: []string{"m2"}},
			{Name: "ab", OpType: "Abs", Inputs: []string{"x"}, Outputs: []string{"a"}},
		}, Outputs: []onnx.ValueInfo{{Name: "m2"}, {Name: "a"}}}
		b.AddNode("If", "big", []string{"c"}, []string{"p", "r"}, onnx.GraphAttr("then_branch", then), onnx.GraphAttr("else_branch", els))
		b.AddOutput("p", onnx.Float, []int64{8, 32})
		b.AddOutput("r", onnx.Float, []int64{8, 32})
	}},
	// Two Ifs one after the other, the second's condition an input and
	// its then side reading the first's output; an If nested in the
	// first's else side (predicated inside it).
	{"sequence-nested", []int{4, 64}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{4, 24})
		b.AddInput("c", onnx.Bool, []int64{})
		b.AddInput("c1", onnx.Bool, []int64{1})
		b.AddInput("d", onnx.Bool, []int64{})
		inner := &onnx.Graph{Name: "inner", Nodes: []onnx.Node{{Name: "inner", OpType: "If", Inputs: []string{"d"}, Outputs: []string{"w"}, Attrs: []onnx.Attr{
			onnx.GraphAttr("then_branch", &onnx.Graph{Name: "t2", Nodes: []onnx.Node{{Name: "ex", OpType: "Exp", Inputs: []string{"x"}, Outputs: []string{"ex"}}}, Outputs: []onnx.ValueInfo{{Name: "ex"}}}),
			onnx.GraphAttr("else_branch", &onnx.Graph{Name: "e2", Nodes: []onnx.Node{{Name: "sq", OpType: "Mul", Inputs: []string{"x", "x"}, Outputs: []string{"sq"}}}, Outputs: []onnx.ValueInfo{{Name: "sq"}}}),
		}}}, Outputs: []onnx.ValueInfo{{Name: "w"}}}
		then := &onnx.Graph{Name: "then", Nodes: []onnx.Node{{Name: "ng", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"ng"}}}, Outputs: []onnx.ValueInfo{{Name: "ng"}}}
		b.AddNode("If", "first", []string{"c"}, []string{"p"}, onnx.GraphAttr("then_branch", then), onnx.GraphAttr("else_branch", inner))
		then2 := &onnx.Graph{Name: "then2", Nodes: []onnx.Node{{Name: "sg", OpType: "Sigmoid", Inputs: []string{"p"}, Outputs: []string{"sg"}}}, Outputs: []onnx.ValueInfo{{Name: "sg"}}}
		else2 := &onnx.Graph{Name: "else2", Nodes: []onnx.Node{{Name: "ad", OpType: "Add", Inputs: []string{"p", "x"}, Outputs: []string{"ad"}}}, Outputs: []onnx.ValueInfo{{Name: "ad"}}}
		b.AddNode("If", "second", []string{"c1"}, []string{"q"}, onnx.GraphAttr("then_branch", then2), onnx.GraphAttr("else_branch", else2))
		b.AddOutput("q", onnx.Float, []int64{4, 24})
	}},
}

// TestBranch links Ifs the device branches on and runs both sides: the
// outputs are the host reference's, the supersteps that ran are those
// of the taken side with the linker's cycles, and final_cycles counts
// the longer side.
func TestBranch(t *testing.T) {
	for _, m := range branchModels {
		for _, tiles := range m.tiles {
			t.Run(fmt.Sprintf("%s@%d", m.name, tiles), func(t *testing.T) {
				b := onnx.NewModel(13)
				m.build(b)
				o, st, g, err := planLink(t, b.Marshal(), tiles)
				if err != nil {
					t.Fatal(err)
				}
				var conds []string
				for _, v := range g.Inputs {
					if v.DType == onnx.Bool {
						conds = append(conds, v.Name)
					}
				}
				// Every If but a nested one branches.
				nb := min(len(conds), 2)
				if len(st.Branches) != nb || len(o.Host.Branches) != nb {
					t.Fatalf("%d branches costed, %d in the object, want %d", len(st.Branches), len(o.Host.Branches), nb)
				}
				var longer []bool
				for _, br := range st.Branches {
					longer = append(longer, br.Then >= br.Else)
				}
				if want := st.PathCycles(longer); st.FinalCycles != want {
					t.Errorf("final cycles %d, the longer sides' path %d (%+v)", st.FinalCycles, want, st.Branches)
				}
				for mask := 0; mask < 1<<len(conds); mask++ {
					set := map[string]bool{}
					for k, c := range conds {
						set[c] = mask&(1<<k) != 0
					}
					t.Run(fmt.Sprint(set), func(t *testing.T) {
						checkBranchRun(t, o, st, g, set)
					})
				}
			})
		}
	}
}

// checkBranchRun runs o with its bool inputs set to conds and checks
// outputs and cycles against the sides taken (branch k, program order,
// is the k-th bool input's If).
func checkBranchRun(t *testing.T, o *obj.Object, st *Stats, g *graph.Graph, conds map[string]bool) {
	t.Helper()
	ins := hostref.GenerateInputs(g, 1)
	var path []bool
	for i, v := range g.Inputs {
		if c, ok := conds[v.Name]; ok {
			ins[i] = onnx.NewBool(v.Name, v.Shape, []bool{c})
			if len(path) < len(st.Branches) {
				path = append(path, c)
			}
		}
	}
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	outs, res := runObject(t, o, raw)
	t.Logf("branches %+v, final %d; ran %d of %d phases, %d cycles", st.Branches, st.FinalCycles, len(res.Phases), len(st.Supersteps), res.Cycles)
	want, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		ot := o.Host.Outputs[i]
		r, err := verdict.Compare(ot.Name, ot.DType, ot.Accumulate, outs[i], w.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Pass {
			t.Errorf("output %q: %d of %d elements wrong, first %d: got %s want %s", ot.Name, r.Bad, r.Elements, r.FirstBad, r.Got, r.Want)
		}
	}
	var ran []int
	for i := range st.Supersteps {
		if st.onPath(i, path) {
			ran = append(ran, i)
		}
	}
	if len(res.Phases) != len(ran) {
		t.Fatalf("simulator ran %d supersteps, the taken side's path has %d of %d", len(res.Phases), len(ran), len(st.Supersteps))
	}
	var sim int64
	for k, ph := range res.Phases {
		s := st.Supersteps[ran[k]]
		if s.Kind == obj.HostExchange {
			continue
		}
		sim += ph.Cycles + ph.SyncCycles
		if ph.Cycles != s.Cycles {
			t.Errorf("superstep %d (%s): simulated %d cycles, costed %d", ran[k], s.Name, ph.Cycles, s.Cycles)
		}
	}
	if want := st.PathCycles(path); sim != want {
		t.Errorf("simulated %d cycles, the linker's for the taken side %d", sim, want)
	}
	if diff := cmp.Diff(ran, o.Host.PhasePath(path)); diff != "" {
		t.Errorf("object's phase path: mismatch (-want +got):\n%s", diff)
	}
}

// A plan without branch tags (written before branching) lowers the
// Wheres as nodes: both sides run, the results are the same.
func TestBranchUntaggedPlan(t *testing.T) {
	b := onnx.NewModel(13)
	branchModels[0].build(b)
	pl, _, _, g, err := planLinkN(t, b.Marshal(), 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pl.Graph.Nodes {
		pl.Graph.Nodes[i].If, pl.Graph.Nodes[i].Side = "", ""
	}
	o, st, err := Link(pl, "test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Branches) != 0 || len(o.Host.Branches) != 0 {
		t.Fatalf("%d branches from an untagged plan", len(st.Branches))
	}
	for _, c := range []bool{true, false} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			checkBranchRun(t, o, st, g, map[string]bool{"c": c})
		})
	}
}
