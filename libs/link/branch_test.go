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
				if len(st.Branches) != 1 || len(o.Host.Branches) != 1 {
					t.Fatalf("%d branches costed, %d in the object, want 1", len(st.Branches), len(o.Host.Branches))
				}
				br := st.Branches[0]
				if want := st.PathCycles([]bool{br.Then >= br.Else}); st.FinalCycles != want {
					t.Errorf("final cycles %d, the longer side's path %d (then %d, else %d)", st.FinalCycles, want, br.Then, br.Else)
				}
				for _, cond := range []bool{true, false} {
					t.Run(fmt.Sprint(cond), func(t *testing.T) {
						checkBranchRun(t, o, st, g, cond)
					})
				}
			})
		}
	}
}

// checkBranchRun runs o with condition input "c" set to cond and checks
// outputs and cycles against the taken side.
func checkBranchRun(t *testing.T, o *obj.Object, st *Stats, g *graph.Graph, cond bool) {
	t.Helper()
	ins := hostref.GenerateInputs(g, 1)
	for i, v := range g.Inputs {
		if v.Name == "c" {
			ins[i] = onnx.NewBool("c", v.Shape, []bool{cond})
		}
	}
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	outs, res := runObject(t, o, raw)
	t.Logf("If %q: then %d cycles (phases %v), else %d (phases %v), final %d; ran %d of %d phases, %d cycles",
		st.Branches[0].If, st.Branches[0].Then, st.Branches[0].ThenSteps, st.Branches[0].Else, st.Branches[0].ElseSteps, st.FinalCycles, len(res.Phases), len(st.Supersteps), res.Cycles)
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
	path := []bool{cond}
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
