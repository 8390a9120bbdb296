package graph

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/onnx"
)

// gateModel is the gated detector's shape: s = Sigmoid(x); c =
// ReduceMax(s) >= 0.5; p = If(c) then Neg(x)*2 (a branch computing from
// an outer value) else s (an outer value through Identity). The If comes
// first in the model's node order: the branch's outer read of s orders
// the nodes.
func gateModel(edit func(m *onnx.Model)) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(13)
		input(m, "x", onnx.Float, 1, 2)
		initializer(m, f32("thr", []int64{}, 0.5))
		then := &onnx.Graph{Name: "then", Nodes: []onnx.Node{
			nd("Neg", l("x"), l("t")),
			{Name: "tc", OpType: "Constant", Outputs: l("k"), Attrs: []onnx.Attr{aTensor("value", f32("", []int64{}, 2))}},
			{Name: "tm", OpType: "Mul", Inputs: l("t", "k"), Outputs: l("c")}, // "c" is also an outer name
		}, Outputs: []onnx.ValueInfo{{Name: "c"}}}
		els := &onnx.Graph{Name: "else", Nodes: []onnx.Node{nd("Identity", l("s"), l("e"))}, Outputs: []onnx.ValueInfo{{Name: "e"}}}
		addNode(m, "If", "if", l("c"), l("p"), aGraph("then_branch", then), aGraph("else_branch", els))
		addNode(m, "Sigmoid", "sig", l("x"), l("s"))
		addNode(m, "ReduceMax", "rm", l("s"), l("r"), aInt("keepdims", 0))
		addNode(m, "GreaterOrEqual", "ge", l("r", "thr"), l("c"))
		output(m, "p")
		if edit != nil {
			edit(m)
		}
		return m
	}
}

func TestBuildIf(t *testing.T) {
	runBuildCases(t, []buildCase{
		{name: "computed condition", model: gateModel(nil), want: `
input x float[1,2]
const thr float[]
const k float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:false} (s) -> r float[]
node "ge" GreaterOrEqual (r, thr) -> c bool[]
node "if" If (c) -> p float[1,2]
  then
    node "Neg" Neg (x) -> t float[1,2]
    node "tm" Mul (t, k) -> c_2 float[1,2]
    output c_2
  else
    node "Identity" Identity (s) -> e float[1,2]
    output e
output p
`},
		{name: "constant condition: then inlined, its output renamed", model: gateModel(func(m *onnx.Model) {
			initializer(m, bools("on", []int64{1}, true))
			m.Graph.Nodes[0].Inputs = l("on")
		}), want: `
input x float[1,2]
const k float[]
const thr float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "Neg" Neg (x) -> t float[1,2]
node "tm" Mul (t, k) -> p float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:false} (s) -> r float[]
node "ge" GreaterOrEqual (r, thr) -> c bool[]
output p
`},
		{name: "constant condition: else inlined, an outer value through Identity", model: gateModel(func(m *onnx.Model) {
			initializer(m, bools("off", []int64{}, false))
			m.Graph.Nodes[0].Inputs = l("off")
			m.Graph.Nodes[0].Attrs[1].G.Nodes = nil
			m.Graph.Nodes[0].Attrs[1].G.Outputs[0].Name = "s"
		}), want: `
input x float[1,2]
const thr float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "if" Identity (s) -> p float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:false} (s) -> r float[]
node "ge" GreaterOrEqual (r, thr) -> c bool[]
output p
`},
		{name: "constant condition: a constant output", model: gateModel(func(m *onnx.Model) {
			initializer(m, bools("off", []int64{}, false))
			m.Graph.Nodes[0].Inputs = l("off")
			m.Graph.Nodes[0].Attrs[1].G.Outputs[0].Name = "thr"
			m.Graph.Nodes[0].Attrs[1].G.Nodes = nil
			m.Graph.Nodes = m.Graph.Nodes[:1]
		}), want: `
input x float[1,2]
const p float[]
output p
`},
		{name: "branches disagree on shape", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[1].G.Nodes[0] = nd("ReduceSum", l("s"), l("e"), aInts("axes", 1))
		}), err: `node "if" (If): output 0: then branch gives float[1,2], else branch float[1,1]`},
		{name: "branches disagree on type", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[1].G.Nodes[0] = nd("Cast", l("s"), l("e"), aInt("to", int64(onnx.Float16)))
		}), err: `node "if" (If): output 0: then branch gives float[1,2], else branch float16[1,2]`},
		{name: "condition of two elements", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[2].Attrs = append(m.Graph.Nodes[2].Attrs, aInts("axes", 0))
		}), err: `node "if" (If) input 0: condition "c" has shape [2], want one element`},
		{name: "condition not bool", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Inputs = l("thr")
		}), err: `node "if" (If) input 0: condition "thr" has element type float, want bool`},
		{name: "missing branch", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs = m.Graph.Nodes[0].Attrs[:1]
		}), err: `node "if" (If): missing attribute "else_branch"`},
		{name: "branch with inputs", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[0].G.Inputs = []onnx.ValueInfo{{Name: "z"}}
		}), err: `node "if" (If): then_branch has 1 inputs, want none`},
		{name: "branch reads an undefined name", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[1].G.Nodes[0].Inputs = l("nope")
		}), err: `node "if" (If) else_branch: node "Identity" (Identity) input 0: "nope" is not defined by any node, input or initializer`},
		{name: "branch reads the If's own output", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[1].G.Nodes[0].Inputs = l("p")
		}), err: `node "if" (If): a branch reads "p", the node's own output`},
		{name: "bad node in a branch", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[0].G.Nodes[0].OpType = "LSTM"
		}), err: `node "if" (If) then_branch: unsupported operator LSTM (node "Neg")`},
		{name: "branch output count", model: gateModel(func(m *onnx.Model) {
			m.Graph.Nodes[0].Attrs[1].G.Outputs = append(m.Graph.Nodes[0].Attrs[1].G.Outputs, onnx.ValueInfo{Name: "s"})
		}), err: `node "if" (If): else_branch has 2 outputs, the node 1`},
	})
}

// TestIfRoundTrip: an If's branches survive Check, the passes and the
// plan encoding.
func TestIfRoundTrip(t *testing.T) {
	g, err := Build(gateModel(nil)())
	if err != nil {
		t.Fatal(err)
	}
	g, rw := Simplify(g)
	checkGraph(t, g)
	want := `graph "g" opset 13
input x float[1,2]
const thr float[]
const k float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:false} (s) -> r float[]
node "ge" GreaterOrEqual (r, thr) -> c bool[]
node "if" If (c) -> p float[1,2]
  then
    node "Neg" Neg (x) -> t float[1,2]
    node "tm" Mul (t, k) -> c_2 float[1,2]
    output c_2
  else
    output s
output p
`
	_ = rw
	if d := cmp.Diff(want, g.String()); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	pg := Encode(g)
	g2, err := Decode(&pg)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, g2.String()); d != "" {
		t.Errorf("decoded: mismatch (-want +got):\n%s", d)
	}
}
