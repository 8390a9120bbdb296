package graph

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/onnx"
)

// passCase is a pass test: a model, the graph Build makes of it (before)
// and the one the pass makes (after: "" when the pass must leave it as it
// is), and the rewrites.
type passCase struct {
	name          string
	model         func() *onnx.Model
	before, after string
	rewrites      []string // "node: what"
}

// node builds one node named after its first output.
func node(op string, ins []string, out string, attrs ...onnx.Attr) onnx.Node {
	return onnx.Node{Name: out, OpType: op, Inputs: ins, Outputs: l(out), Attrs: attrs}
}

// graphModel builds a model over input x (float of the given dims), the
// initializers and nodes, with output y.
func graphModel(v int64, xdims []int64, inits []*onnx.Tensor, nodes ...onnx.Node) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(v)
		input(m, "x", onnx.Float, xdims...)
		for _, t := range inits {
			initializer(m, t)
		}
		m.Graph.Nodes = nodes
		output(m, "y")
		return m
	}
}

func runPassCases(t *testing.T, pass func(*Graph) (*Graph, []Rewrite), cases []passCase) {
	t.Helper()
	dump := func(g *Graph) string {
		s := g.String()
		return s[strings.IndexByte(s, '\n')+1:]
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.model())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(strings.TrimLeft(tc.before, "\n"), dump(g)); d != "" {
				t.Errorf("before: mismatch (-want +got):\n%s", d)
			}
			after := tc.after
			if after == "" {
				after = tc.before
			}
			g, rw := pass(g)
			checkGraph(t, g)
			if d := cmp.Diff(strings.TrimLeft(after, "\n"), dump(g)); d != "" {
				t.Errorf("after: mismatch (-want +got):\n%s", d)
			}
			var got []string
			for _, r := range rw {
				got = append(got, r.Node+": "+r.What)
			}
			if d := cmp.Diff(tc.rewrites, got); d != "" {
				t.Errorf("rewrites: mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestRemoveIdentities(t *testing.T) {
	runPassCases(t, RemoveIdentities, []passCase{
		{name: "chain into a graph output", model: graphModel(13, []int64{2}, nil,
			node("Relu", l("x"), "r"), node("Identity", l("r"), "i1"), node("Identity", l("i1"), "y")),
			before: `
input x float[2]
node "r" Relu (x) -> r float[2]
node "i1" Identity (r) -> i1 float[2]
node "y" Identity (i1) -> y float[2]
output y
`, after: `
input x float[2]
node "r" Relu (x) -> y float[2]
output y
`, rewrites: []string{`i1: Identity removed: readers of "i1" read "r"`, `y: Identity removed: "r" renamed "y" (a graph output)`}},
		{name: "a cast to the same type", model: graphModel(13, []int64{2}, nil,
			node("Cast", l("x"), "c", aInt("to", int64(onnx.Float))), node("Relu", l("c"), "y")),
			before: `
input x float[2]
node "c" Cast {To:float Saturate:true} (x) -> c float[2]
node "y" Relu (c) -> y float[2]
output y
`, after: `
input x float[2]
node "y" Relu (x) -> y float[2]
output y
`, rewrites: []string{`c: Cast removed: readers of "c" read "x"`}},
		{name: "a graph input to a graph output stays", model: graphModel(13, []int64{2}, nil, node("Identity", l("x"), "y")),
			before: `
input x float[2]
node "y" Identity (x) -> y float[2]
output y
`},
		{name: "an output to another output stays", model: func() *onnx.Model {
			m := graphModel(13, []int64{2}, nil, node("Relu", l("x"), "r"), node("Identity", l("r"), "y"))()
			output(m, "r")
			return m
		}, before: `
input x float[2]
node "r" Relu (x) -> r float[2]
node "y" Identity (r) -> y float[2]
output y
output r
`},
	})
}

func TestEliminateDead(t *testing.T) {
	runPassCases(t, EliminateDead, []passCase{
		{name: "dead chain", model: graphModel(13, []int64{2}, nil,
			node("Relu", l("x"), "a"), node("Neg", l("a"), "b"), node("Abs", l("x"), "y"), node("Exp", l("b"), "c")),
			before: `
input x float[2]
node "a" Relu (x) -> a float[2]
node "b" Neg (a) -> b float[2]
node "y" Abs (x) -> y float[2]
node "c" Exp (b) -> c float[2]
output y
`, after: `
input x float[2]
node "y" Abs (x) -> y float[2]
output y
`, rewrites: []string{"a: Relu removed: no output is read", "b: Neg removed: no output is read", "c: Exp removed: no output is read"}},
		{name: "what the If's inlining left", model: gateModel(func(m *onnx.Model) {
			initializer(m, bools("on", []int64{1}, true))
			m.Graph.Nodes[0].Inputs = l("on")
		}), before: `
input x float[1,2]
const k float[]
const thr float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "Neg" Neg (x) -> t float[1,2]
node "tm" Mul (t, k) -> p float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:false} (s) -> r float[]
node "ge" GreaterOrEqual (r, thr) -> c bool[]
output p
`, after: `
input x float[1,2]
const k float[]
node "Neg" Neg (x) -> t float[1,2]
node "tm" Mul (t, k) -> p float[1,2]
output p
`, rewrites: []string{"sig: Sigmoid removed: no output is read", "rm: ReduceMax removed: no output is read", "ge: GreaterOrEqual removed: no output is read"}},
		{name: "a value only a branch gives stays", model: gateModel(nil), before: `
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
	})
}

// lnNodes is LayerNorm written out over x's last axis, as exporters
// write it: y = (x - mean) / sqrt(var + eps) * g + b.
func lnNodes() []onnx.Node {
	return []onnx.Node{
		node("ReduceMean", l("x"), "mu", aInts("axes", -1)),
		node("Sub", l("x", "mu"), "d"),
		node("Pow", l("d", "two"), "d2"),
		node("ReduceMean", l("d2"), "var", aInts("axes", -1)),
		node("Add", l("var", "eps"), "ve"),
		node("Sqrt", l("ve"), "sd"),
		node("Div", l("d", "sd"), "nrm"),
		node("Mul", l("nrm", "g"), "sc"),
		node("Add", l("b", "sc"), "y"),
	}
}

func lnConsts(eps *onnx.Tensor, exponent float32) []*onnx.Tensor {
	return []*onnx.Tensor{f32("two", []int64{}, exponent), eps,
		f32("g", []int64{4}, 1, 2, 3, 4), f32("b", []int64{4}, 0, 0, 1, 1)}
}

// lnModel is LayerNorm written out on x [2,4], edited.
func lnModel(edit func(nodes []onnx.Node) []onnx.Node, consts []*onnx.Tensor) func() *onnx.Model {
	nodes := lnNodes()
	if edit != nil {
		nodes = edit(nodes)
	}
	if consts == nil {
		consts = lnConsts(f32("eps", []int64{}, 1e-5), 2)
	}
	return graphModel(13, []int64{2, 4}, consts, nodes...)
}

const lnBefore = `
input x float[2,4]
const two float[]
const eps float[]
const g float[4]
const b float[4]
node "mu" ReduceMean {Axes:[1] KeepDims:true} (x) -> mu float[2,1]
node "d" Sub (x, mu) -> d float[2,4]
node "d2" Pow (d, two) -> d2 float[2,4]
node "var" ReduceMean {Axes:[1] KeepDims:true} (d2) -> var float[2,1]
node "ve" Add (var, eps) -> ve float[2,1]
node "sd" Sqrt (ve) -> sd float[2,1]
node "nrm" Div (d, sd) -> nrm float[2,4]
node "sc" Mul (nrm, g) -> sc float[2,4]
node "y" Add (b, sc) -> y float[2,4]
output y
`

func TestFuseLayerNorm(t *testing.T) {
	rewrite := func(root, axis, nodes string) string {
		return root + ": fused into LayerNormalization (axis " + axis + ", epsilon 1e-05): " + nodes
	}
	core := `ReduceMean "mu", Sub "d", Pow "d2", ReduceMean "var", Add "ve", Sqrt "sd", Div "nrm"`
	runPassCases(t, FuseLayerNorm, []passCase{
		{name: "scale and bias", model: lnModel(nil, nil), before: lnBefore, after: `
input x float[2,4]
const g float[4]
const b float[4]
node "y" LayerNormalization {Axis:1 Epsilon:1e-05} (x, g, b) -> y float[2,4]
output y
`, rewrites: []string{rewrite("y", "1", core+`, Mul "sc", Add "y"`)}},
		{name: "no scale, no bias", model: lnModel(func(n []onnx.Node) []onnx.Node {
			n[6].Outputs = l("y")
			return n[:7]
		}, nil), before: `
input x float[2,4]
const two float[]
const eps float[]
node "mu" ReduceMean {Axes:[1] KeepDims:true} (x) -> mu float[2,1]
node "d" Sub (x, mu) -> d float[2,4]
node "d2" Pow (d, two) -> d2 float[2,4]
node "var" ReduceMean {Axes:[1] KeepDims:true} (d2) -> var float[2,1]
node "ve" Add (var, eps) -> ve float[2,1]
node "sd" Sqrt (ve) -> sd float[2,1]
node "nrm" Div (d, sd) -> y float[2,4]
output y
`, after: `
input x float[2,4]
const nrm/scale float[4]
node "nrm" LayerNormalization {Axis:1 Epsilon:1e-05} (x, nrm/scale, -) -> y float[2,4]
output y
`, rewrites: []string{rewrite("nrm", "1", core)}},
		{name: "near miss: reduction over another axis", model: lnModel(func(n []onnx.Node) []onnx.Node {
			n[0].Attrs[0].Ints = []int64{0}
			n[3].Attrs[0].Ints = []int64{0}
			return n
		}, nil), before: strings.ReplaceAll(strings.ReplaceAll(lnBefore, "{Axes:[1]", "{Axes:[0]"), "float[2,1]", "float[1,4]")},
		{name: "near miss: the reductions differ", model: lnModel(func(n []onnx.Node) []onnx.Node {
			n[3].Attrs[0].Ints = []int64{0, 1}
			return n
		}, nil), before: strings.ReplaceAll(strings.Replace(strings.Replace(lnBefore, `node "var" ReduceMean {Axes:[1] KeepDims:true} (d2) -> var float[2,1]`,
			`node "var" ReduceMean {Axes:[0 1] KeepDims:true} (d2) -> var float[1,1]`, 1), `node "ve" Add (var, eps) -> ve float[2,1]`, `node "ve" Add (var, eps) -> ve float[1,1]`, 1), "sd float[2,1]", "sd float[1,1]")},
		{name: "near miss: exponent 3", model: lnModel(nil, lnConsts(f32("eps", []int64{}, 1e-5), 3)), before: lnBefore},
		{name: "near miss: an epsilon per element", model: lnModel(nil, lnConsts(f32("eps", []int64{2, 1}, 1e-5, 1e-5), 2)),
			before: strings.Replace(lnBefore, "const eps float[]", "const eps float[2,1]", 1)},
		{name: "near miss: epsilon computed", model: func() *onnx.Model {
			m := lnModel(nil, nil)()
			input(m, "e", onnx.Float)
			m.Graph.Nodes[4].Inputs[1] = "e"
			return m
		}, before: strings.Replace(strings.Replace(strings.Replace(lnBefore, "input x float[2,4]\n", "input x float[2,4]\ninput e float[]\n", 1),
			"const eps float[]\n", "", 1), "(var, eps)", "(var, e)", 1)},
		{name: "near miss: the centred value read elsewhere", model: func() *onnx.Model {
			m := lnModel(nil, nil)()
			m.Graph.Nodes = append(m.Graph.Nodes, node("Relu", l("d"), "r"))
			output(m, "r")
			return m
		}, before: lnBefore[:len(lnBefore)-len("output y\n")] + "node \"r\" Relu (d) -> r float[2,4]\noutput y\noutput r\n"},
		{name: "a scale of the full shape stays outside", model: func() *onnx.Model {
			m := lnModel(nil, lnConsts(f32("eps", []int64{}, 1e-5), 2))()
			m.Graph.Initializers[2] = f32("g", []int64{2, 4}, 1, 1, 1, 1, 2, 2, 2, 2)
			m.Graph.Nodes = m.Graph.Nodes[:8]
			m.Graph.Nodes[7].Outputs = l("y")
			m.Graph.Initializers = m.Graph.Initializers[:3]
			return m
		}, before: `
input x float[2,4]
const two float[]
const eps float[]
const g float[2,4]
node "mu" ReduceMean {Axes:[1] KeepDims:true} (x) -> mu float[2,1]
node "d" Sub (x, mu) -> d float[2,4]
node "d2" Pow (d, two) -> d2 float[2,4]
node "var" ReduceMean {Axes:[1] KeepDims:true} (d2) -> var float[2,1]
node "ve" Add (var, eps) -> ve float[2,1]
node "sd" Sqrt (ve) -> sd float[2,1]
node "nrm" Div (d, sd) -> nrm float[2,4]
node "sc" Mul (nrm, g) -> y float[2,4]
output y
`, after: `
input x float[2,4]
const g float[2,4]
const nrm/scale float[4]
node "nrm" LayerNormalization {Axis:1 Epsilon:1e-05} (x, nrm/scale, -) -> nrm float[2,4]
node "sc" Mul (nrm, g) -> y float[2,4]
output y
`, rewrites: []string{rewrite("nrm", "1", core)}},
		{name: "several trailing axes", model: func() *onnx.Model {
			m := lnModel(func(n []onnx.Node) []onnx.Node {
				n[0].Attrs[0].Ints = []int64{-2, -1}
				n[3].Attrs[0].Ints = []int64{2, 1}
				return n
			}, nil)()
			m.Graph.Inputs[0].Shape = []onnx.Dim{{Value: 3}, {Value: 2}, {Value: 4}}
			return m
		}, before: `
input x float[3,2,4]
const two float[]
const eps float[]
const g float[4]
const b float[4]
node "mu" ReduceMean {Axes:[1 2] KeepDims:true} (x) -> mu float[3,1,1]
node "d" Sub (x, mu) -> d float[3,2,4]
node "d2" Pow (d, two) -> d2 float[3,2,4]
node "var" ReduceMean {Axes:[1 2] KeepDims:true} (d2) -> var float[3,1,1]
node "ve" Add (var, eps) -> ve float[3,1,1]
node "sd" Sqrt (ve) -> sd float[3,1,1]
node "nrm" Div (d, sd) -> nrm float[3,2,4]
node "sc" Mul (nrm, g) -> sc float[3,2,4]
node "y" Add (b, sc) -> y float[3,2,4]
output y
`, after: `
input x float[3,2,4]
const g float[4]
const b float[4]
node "y" LayerNormalization {Axis:1 Epsilon:1e-05} (x, g, b) -> y float[3,2,4]
output y
`, rewrites: []string{rewrite("y", "1", core+`, Mul "sc", Add "y"`)}},
	})
}

// geluConsts are the constants of GELU written out.
func geluConsts() []*onnx.Tensor {
	return []*onnx.Tensor{f32("half", []int64{}, 0.5), f32("one", []int64{}, 1), f32("rt2", []int64{}, float32(math.Sqrt2)),
		f32("irt2", []int64{}, float32(1/math.Sqrt2)), f32("c1", []int64{}, float32(math.Sqrt(2/math.Pi))),
		f32("c2", []int64{}, 0.044715), f32("three", []int64{}, 3)}
}

func TestFuseGelu(t *testing.T) {
	fused := func(form string) string {
		return `
input x float[2,3]
node "y" Gelu {Tanh:` + form + `} (x) -> y float[2,3]
output y
`
	}
	erf := func(nodes ...onnx.Node) func() *onnx.Model {
		return graphModel(13, []int64{2, 3}, geluConsts(), nodes...)
	}
	tests := []struct {
		name     string
		model    func() *onnx.Model
		tanh     bool
		rewrite  string // "" when nothing may fuse
		keepRoot bool
	}{
		{"erf as torch exports it", erf(node("Div", l("x", "rt2"), "t"), node("Erf", l("t"), "e"), node("Add", l("e", "one"), "s"),
			node("Mul", l("x", "s"), "p"), node("Mul", l("p", "half"), "y")), false,
			`y: fused into Gelu (erf): Mul "y", Mul "p", Add "s", Erf "e", Div "t"`, false},
		{"erf, the half first", erf(node("Mul", l("x", "half"), "h"), node("Mul", l("x", "irt2"), "t"), node("Erf", l("t"), "e"),
			node("Add", l("one", "e"), "s"), node("Mul", l("h", "s"), "y")), false,
			`y: fused into Gelu (erf): Mul "y", Mul "h", Add "s", Erf "e", Mul "t"`, false},
		{"erf, half times the rest", erf(node("Mul", l("irt2", "x"), "t"), node("Erf", l("t"), "e"), node("Add", l("one", "e"), "s"),
			node("Mul", l("s", "x"), "p"), node("Mul", l("half", "p"), "y")), false,
			`y: fused into Gelu (erf): Mul "y", Mul "p", Add "s", Erf "e", Mul "t"`, false},
		{"tanh with Pow", erf(node("Pow", l("x", "three"), "x3"), node("Mul", l("c2", "x3"), "q"), node("Add", l("x", "q"), "a"),
			node("Mul", l("c1", "a"), "u"), node("Tanh", l("u"), "th"), node("Add", l("th", "one"), "s"),
			node("Mul", l("x", "half"), "h"), node("Mul", l("h", "s"), "y")), true,
			`y: fused into Gelu (tanh): Mul "y", Mul "h", Add "s", Tanh "th", Mul "u", Add "a", Mul "q", Pow "x3"`, false},
		{"tanh with x*x*x", erf(node("Mul", l("x", "x"), "xx"), node("Mul", l("xx", "x"), "x3"), node("Mul", l("x3", "c2"), "q"),
			node("Add", l("q", "x"), "a"), node("Mul", l("a", "c1"), "u"), node("Tanh", l("u"), "th"), node("Add", l("one", "th"), "s"),
			node("Mul", l("s", "half"), "p"), node("Mul", l("x", "p"), "y")), true,
			`y: fused into Gelu (tanh): Mul "y", Mul "p", Add "s", Tanh "th", Mul "u", Add "a", Mul "q", Mul "x3", Mul "xx"`, false},
		{"near miss: 0.6 for a half", erf(node("Div", l("x", "rt2"), "t"), node("Erf", l("t"), "e"), node("Add", l("e", "one"), "s"),
			node("Mul", l("x", "s"), "p"), node("Mul", l("p", "c1"), "y")), false, "", true},
		{"near miss: another divisor", erf(node("Div", l("x", "c1"), "t"), node("Erf", l("t"), "e"), node("Add", l("e", "one"), "s"),
			node("Mul", l("x", "s"), "p"), node("Mul", l("p", "half"), "y")), false, "", true},
		{"near miss: erf of another value", erf(node("Relu", l("x"), "r"), node("Div", l("r", "rt2"), "t"), node("Erf", l("t"), "e"),
			node("Add", l("e", "one"), "s"), node("Mul", l("x", "s"), "p"), node("Mul", l("p", "half"), "y")), false, "", true},
		{"near miss: x squared in the tanh form", erf(node("Mul", l("x", "x"), "x3"), node("Mul", l("x3", "c2"), "q"),
			node("Add", l("q", "x"), "a"), node("Mul", l("a", "c1"), "u"), node("Tanh", l("u"), "th"), node("Add", l("one", "th"), "s"),
			node("Mul", l("s", "half"), "p"), node("Mul", l("x", "p"), "y")), true, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.model())
			if err != nil {
				t.Fatal(err)
			}
			before := g.String()
			g, rw := FuseGelu(g)
			checkGraph(t, g)
			got := g.String()
			if tc.rewrite == "" {
				if d := cmp.Diff(before, got); d != "" {
					t.Errorf("changed a near miss (-before +after):\n%s", d)
				}
				if len(rw) != 0 {
					t.Errorf("rewrites %v", rw)
				}
				return
			}
			form := "false"
			if tc.tanh {
				form = "true"
			}
			if d := cmp.Diff(strings.TrimLeft(fused(form), "\n"), got[strings.IndexByte(got, '\n')+1:]); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
			if len(rw) != 1 || rw[0].Node+": "+rw[0].What != tc.rewrite {
				t.Errorf("rewrites %v, want %q", rw, tc.rewrite)
			}
		})
	}
}

// TestSimplify runs the passes in order on the attention idioms.
func TestSimplify(t *testing.T) {
	nodes := append(lnNodes(), node("Identity", l("y"), "z"))
	nodes[8].Outputs = l("w")
	nodes[9].Inputs = l("w")
	m := graphModel(13, []int64{2, 4}, lnConsts(f32("eps", []int64{}, 1e-5), 2), nodes...)()
	m.Graph.Outputs[0].Name = "z"
	g, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	g, rw := Simplify(g)
	want := `graph "g" opset 13
input x float[2,4]
const g float[4]
const b float[4]
node "y" LayerNormalization {Axis:1 Epsilon:1e-05} (x, g, b) -> z float[2,4]
output z
`
	if d := cmp.Diff(want, g.String()); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	if len(rw) != 2 {
		t.Errorf("rewrites %v", rw)
	}
}
