package graph

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/onnx"
)

func bools(name string, dims []int64, v ...bool) *onnx.Tensor { return onnx.NewBool(name, dims, v) }

// constModel builds a model whose nodes read only initializers; the graph
// outputs are "y" and a Split's second output.
func constModel(v int64, inits []*onnx.Tensor, nodes ...onnx.Node) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(v)
		for _, t := range inits {
			initializer(m, t)
		}
		m.Graph.Nodes = nodes
		output(m, "y")
		for _, n := range nodes {
			if n.OpType == "Split" && len(n.Outputs) > 1 {
				output(m, n.Outputs[1])
			}
		}
		return m
	}
}

func nd(op string, ins, outs []string, attrs ...onnx.Attr) onnx.Node {
	return onnx.Node{Name: op, OpType: op, Inputs: ins, Outputs: outs, Attrs: attrs}
}

// folded returns the data of a graph's output constant: integers (ints
// and bools) or float32 values (float and float16).
func folded(t *testing.T, g *Graph, k int) any {
	t.Helper()
	v := g.Outputs[k]
	if v.Const == nil {
		t.Fatalf("output %q is not a constant:\n%s", v.Name, g)
	}
	switch v.DType {
	case onnx.Float:
		f, err := v.Const.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return f
	case onnx.Float16:
		f, err := DecodeFloats(v.Const)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(f))
		for i, x := range f {
			out[i] = float32(x)
		}
		return out
	}
	i, err := constInts(v.Const)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestFold(t *testing.T) {
	m23 := ints64("m", []int64{2, 3}, 1, 2, 3, 4, 5, 6)
	f4 := f32("f", []int64{4}, -2.7, 2.5, 0, float32(math.NaN()))
	tests := []struct {
		name  string
		model func() *onnx.Model
		want  []any // per output
	}{
		{"gather negative index on axis 1", constModel(13, []*onnx.Tensor{m23, ints64("i", []int64{2}, -1, 0)},
			nd("Gather", l("m", "i"), l("y"), aInt("axis", 1))), []any{[]int64{3, 1, 6, 4}}},
		{"gather scalar index", constModel(13, []*onnx.Tensor{m23, ints64("i", []int64{}, 1)},
			nd("Gather", l("m", "i"), l("y"))), []any{[]int64{4, 5, 6}}},
		{"slice negative step", constModel(13, []*onnx.Tensor{m23, ints64("s", []int64{1}, -1), ints64("e", []int64{1}, -100), ints64("a", []int64{1}, 1), ints64("st", []int64{1}, -2)},
			nd("Slice", l("m", "s", "e", "a", "st"), l("y"))), []any{[]int64{3, 1, 6, 4}}},
		{"concat", constModel(13, []*onnx.Tensor{m23, ints64("k", []int64{2, 1}, 7, 8)},
			nd("Concat", l("k", "m"), l("y"), aInt("axis", 1))), []any{[]int64{7, 1, 2, 3, 8, 4, 5, 6}}},
		{"split", constModel(13, []*onnx.Tensor{m23, ints64("sp", []int64{2}, 2, 1)},
			nd("Split", l("m", "sp"), l("y", "z"), aInt("axis", 1))), []any{[]int64{1, 2, 4, 5}, []int64{3, 6}}},
		{"transpose", constModel(13, []*onnx.Tensor{m23}, nd("Transpose", l("m"), l("y"))), []any{[]int64{1, 4, 2, 5, 3, 6}}},
		{"unsqueeze squeeze reshape flatten identity", constModel(13, []*onnx.Tensor{m23, ints64("a", []int64{1}, 0), ints64("s", []int64{2}, 3, -1)},
			nd("Unsqueeze", l("m", "a"), l("u")), nd("Squeeze", l("u", "a"), l("q")), nd("Reshape", l("q", "s"), l("r")),
			nd("Flatten", l("r"), l("f"), aInt("axis", 0)), nd("Identity", l("f"), l("y"))), []any{[]int64{1, 2, 3, 4, 5, 6}}},
		{"expand", constModel(13, []*onnx.Tensor{ints64("k", []int64{2, 1}, 7, 8), ints64("s", []int64{2}, 2, 3)},
			nd("Expand", l("k", "s"), l("y"))), []any{[]int64{7, 7, 7, 8, 8, 8}}},
		{"tile", constModel(13, []*onnx.Tensor{ints64("k", []int64{1, 2}, 7, 8), ints64("r", []int64{2}, 2, 2)},
			nd("Tile", l("k", "r"), l("y"))), []any{[]int64{7, 8, 7, 8, 7, 8, 7, 8}}},
		{"where", constModel(13, []*onnx.Tensor{bools("c", []int64{2, 1}, true, false), m23, ints64("z", []int64{}, 0)},
			nd("Where", l("c", "m", "z"), l("y"))), []any{[]int64{1, 2, 3, 0, 0, 0}}},
		{"int arithmetic", constModel(13, []*onnx.Tensor{ints64("a", []int64{4}, -7, 7, 7, math.MinInt64), ints64("b", []int64{4}, 2, -2, 2, -1)},
			nd("Div", l("a", "b"), l("y")), nd("Mul", l("a", "b"), l("z")), nd("Sub", l("a", "b"), l("w"))),
			[]any{[]int64{-3, -3, 3, math.MinInt64}}},
		{"int32 wraps", constModel(13, []*onnx.Tensor{onnx.NewInt32("a", []int64{2}, []int32{math.MaxInt32, -5}), onnx.NewInt32("b", []int64{}, []int32{1})},
			nd("Add", l("a", "b"), l("y"))), []any{[]int64{math.MinInt32, -4}}},
		{"float arithmetic", constModel(13, []*onnx.Tensor{f32("a", []int64{3}, 1, 0.1, -3), f32("b", []int64{}, 3)},
			nd("Div", l("a", "b"), l("y")), nd("Sub", l("b", "a"), l("z")), nd("Mul", l("a", "b"), l("w"))),
			[]any{[]float32{float32(1.0 / 3), 0.1 / 3, -1}}},
		{"cast float to int64, int32 and bool", constModel(13, []*onnx.Tensor{f32("f", []int64{3}, -2.7, 2.5, 0)},
			nd("Cast", l("f"), l("y"), aInt("to", int64(onnx.Int64))), nd("Cast", l("f"), l("z"), aInt("to", int64(onnx.Int32))),
			nd("Cast", l("f"), l("w"), aInt("to", int64(onnx.Bool)))), []any{[]int64{-2, 2, 0}}},
		{"cast NaN to bool", constModel(13, []*onnx.Tensor{f4}, nd("Cast", l("f"), l("y"), aInt("to", int64(onnx.Bool)))),
			[]any{[]int64{1, 1, 0, 1}}},
		{"cast int to float", constModel(13, []*onnx.Tensor{ints64("i", []int64{3}, 1<<24+1, -3, 70000)},
			nd("Cast", l("i"), l("y"), aInt("to", int64(onnx.Float)))), []any{[]float32{1 << 24, -3, 70000}}},
		{"cast int to float16", constModel(13, []*onnx.Tensor{ints64("i", []int64{3}, 2049, -3, 70000)},
			nd("Cast", l("i"), l("y"), aInt("to", int64(onnx.Float16)))), []any{[]float32{2048, -3, float32(math.Inf(1))}}},
		{"cast float to float16", constModel(13, []*onnx.Tensor{f32("f", []int64{3}, 0.1, 1, 65520)},
			nd("Cast", l("f"), l("y"), aInt("to", int64(onnx.Float16)))), []any{[]float32{0.0999755859375, 1, float32(math.Inf(1))}}},
		{"cast int64 to int32 wraps", constModel(13, []*onnx.Tensor{ints64("i", []int64{1}, 1<<32+5)},
			nd("Cast", l("i"), l("y"), aInt("to", int64(onnx.Int32)))), []any{[]int64{5}}},
		{"comparisons", constModel(13, []*onnx.Tensor{f4, f32("z", []int64{}, 0)},
			nd("Less", l("f", "z"), l("y")), nd("GreaterOrEqual", l("f", "z"), l("ge")), nd("Equal", l("f", "f"), l("eq"))),
			[]any{[]int64{1, 0, 0, 0}}},
		{"comparisons on ints", constModel(13, []*onnx.Tensor{ints64("a", []int64{3}, 1, 2, 3), ints64("b", []int64{}, 2)},
			nd("Greater", l("a", "b"), l("g")), nd("LessOrEqual", l("a", "b"), l("le")), nd("Equal", l("a", "b"), l("eq")),
			nd("Or", l("g", "eq"), l("o")), nd("And", l("o", "le"), l("y"))), []any{[]int64{0, 1, 0}}},
		{"not", constModel(13, []*onnx.Tensor{bools("c", []int64{2}, true, false)}, nd("Not", l("c"), l("y"))), []any{[]int64{0, 1}}},
		{"range float accumulates", constModel(13, []*onnx.Tensor{f32("a", []int64{}, 0), f32("b", []int64{}, 1), f32("d", []int64{}, 0.1)},
			nd("Range", l("a", "b", "d"), l("y"))), []any{rangeF32(0, 0.1, 10)}},
		{"range int empty", constModel(13, []*onnx.Tensor{ints64("a", []int64{}, 5), ints64("b", []int64{}, 1)},
			nd("Range", l("a", "b", "a"), l("y"))), []any{[]int64{}}},
		{"constant of shape bool", constModel(13, []*onnx.Tensor{ints64("s", []int64{1}, 2)},
			nd("ConstantOfShape", l("s"), l("y"), aTensor("value", bools("", []int64{1}, true)))), []any{[]int64{1, 1}}},
		{"shape of shape", constModel(13, []*onnx.Tensor{m23}, nd("Shape", l("m"), l("s")), nd("Shape", l("s"), l("y"))), []any{[]int64{2}}},
		{"if on a constant condition", func() *onnx.Model {
			m := constModel(13, []*onnx.Tensor{m23, bools("c", []int64{}, false)},
				nd("If", l("c"), l("y"), aGraph("then_branch", branch(nd("Identity", l("m"), l("t")), "t")),
					aGraph("else_branch", branch(nd("Neg", l("m"), l("e")), "e"))))()
			m.Graph.Nodes[0].Attrs[1].G.Nodes[0] = nd("Transpose", l("m"), l("e"))
			return m
		}, []any{[]int64{1, 4, 2, 5, 3, 6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.model())
			if err != nil {
				t.Fatal(err)
			}
			checkGraph(t, g)
			if len(g.Nodes) != 0 {
				t.Errorf("%d nodes left:\n%s", len(g.Nodes), g)
			}
			for k, want := range tc.want {
				got := folded(t, g, k)
				if d := cmp.Diff(want, got, cmp.Comparer(sameFloat)); d != "" {
					t.Errorf("output %d mismatch (-want +got):\n%s", k, d)
				}
			}
		})
	}
}

// sameFloat compares bit for bit, NaN for NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func rangeF32(start, delta float32, n int) []float32 {
	out := make([]float32, n)
	acc := start
	for i := range out {
		out[i] = acc
		acc = float32(acc + delta)
	}
	return out
}

// branch is an If branch of nodes giving output out.
func branch(n onnx.Node, out string) *onnx.Graph {
	return &onnx.Graph{Name: "b", Nodes: []onnx.Node{n}, Outputs: []onnx.ValueInfo{{Name: out}}}
}

// TestFoldLeavesAlone: what the folder leaves to the device stays a node,
// and what it refuses is an error naming the node and input.
func TestFoldLeavesAlone(t *testing.T) {
	big := f32("big", []int64{maxFoldFloats + 1}, make([]float32, maxFoldFloats+1)...)
	h := &onnx.Tensor{Name: "h", DType: onnx.Float16, Dims: []int64{2}, Raw: []byte{0, 0x3c, 0, 0x40}}
	runBuildCases(t, []buildCase{
		{name: "float16 sign bit", model: constModel(13, []*onnx.Tensor{h}, nd("Neg", l("h"), l("y"))), want: `
const h float16[2]
node "Neg" Neg (h) -> y float16[2]
output y
`},
		{name: "float math beyond the limit", model: constModel(13, []*onnx.Tensor{big}, nd("Mul", l("big", "big"), l("y"))), want: `
const big float[1048577]
node "Mul" Mul (big, big) -> y float[1048577]
output y
`},
		{name: "sigmoid", model: constModel(13, []*onnx.Tensor{f32("f", []int64{1}, 1)}, nd("Sigmoid", l("f"), l("y"))), want: `
const f float[1]
node "Sigmoid" Sigmoid (f) -> y float[1]
output y
`},
		{name: "cast to fp8", model: constModel(19, []*onnx.Tensor{f32("f", []int64{1}, 1)}, nd("Cast", l("f"), l("y"), aInt("to", int64(onnx.Float8E4M3FN)))), want: `
const f float[1]
node "Cast" Cast {To:float8e4m3fn Saturate:true} (f) -> y float8e4m3fn[1]
output y
`},
		{name: "integer division by zero", model: constModel(13, []*onnx.Tensor{ints64("a", []int64{2}, 1, 2), ints64("z", []int64{2}, 1, 0)}, nd("Div", l("a", "z"), l("y"))),
			err: `node "Div" (Div) input 1: division by zero in constant "z"`},
		{name: "gather index out of range", model: constModel(13, []*onnx.Tensor{ints64("a", []int64{2}, 1, 2), ints64("i", []int64{1}, 2)}, nd("Gather", l("a", "i"), l("y"))),
			err: `node "Gather" (Gather) input 1: index 2 of "i" out of range [-2,1] for axis 0 of [2]`},
	})
}

// TestDiv32 checks the device's division sequence: the correctly rounded
// quotient for normal operands and quotients, and the special cases.
func TestDiv32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100000; i++ {
		a := math.Float32frombits(rng.Uint32()&0x3FFFFFFF | 0x20000000) // normal, moderate
		b := math.Float32frombits(rng.Uint32()&0x3FFFFFFF | 0x20000000)
		if rng.IntN(2) == 0 {
			a = -a
		}
		if got, want := div32(a, b), float32(float64(a)/float64(b)); got != want {
			t.Fatalf("div32(%g, %g) = %g, want %g", a, b, got, want)
		}
	}
	inf := float32(math.Inf(1))
	for _, tc := range []struct{ a, b, want float32 }{
		{1, 0, inf}, {-1, 0, -inf}, {inf, 2, inf}, {6, inf, 0}, {0, 5, 0},
	} {
		if got := div32(tc.a, tc.b); got != tc.want {
			t.Errorf("div32(%g, %g) = %g, want %g", tc.a, tc.b, got, tc.want)
		}
	}
	if got := div32(0, 0); got == got {
		t.Errorf("div32(0, 0) = %g, want NaN", got)
	}
}

// Floor, Ceil, Round and Sign of a float constant fold exactly (signed
// zeros, halves to even, a NaN's bits kept but by Sign); of float16
// they stay on the device.
func TestFoldRounding(t *testing.T) {
	x := []float32{-2.5, -0.5, -0.3, 0.5, 1.5, 2.5, 0x1p23 + 1, float32(math.Inf(-1))}
	raw := make([]byte, 0, 4*(len(x)+1))
	for _, v := range x {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	raw = binary.LittleEndian.AppendUint32(raw, 0x7FA00001) // a signalling NaN
	want := map[string][]float32{
		"Floor": {-3, -1, -1, 0, 1, 2, 0x1p23 + 1, float32(math.Inf(-1))},
		"Ceil":  {-2, float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1)), 1, 2, 3, 0x1p23 + 1, float32(math.Inf(-1))},
		"Round": {-2, float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1)), 0, 2, 2, 0x1p23 + 1, float32(math.Inf(-1))},
		"Sign":  {-1, -1, -1, 1, 1, 1, 1, -1},
	}
	for _, op := range []string{"Floor", "Ceil", "Round", "Sign"} {
		b := onnx.NewModel(13)
		b.AddInput("h", onnx.Float16, []int64{2})
		b.AddInitializer(&onnx.Tensor{Name: "c", DType: onnx.Float, Dims: []int64{9}, Raw: raw})
		b.AddNode(op, "y", []string{"c"}, []string{"y"})
		b.AddNode(op, "z", []string{"h"}, []string{"z"})
		b.AddOutput("y", onnx.Float, []int64{9})
		b.AddOutput("z", onnx.Float16, []int64{2})
		g := buildOf(t, b)
		c := g.Outputs[0].Const
		if c == nil || len(g.Nodes) != 1 || g.Nodes[0].Op != op {
			t.Fatalf("%s: not folded, or the float16 one folded:\n%s", op, g)
		}
		for i, w := range want[op] {
			if got := binary.LittleEndian.Uint32(c.Raw[4*i:]); got != math.Float32bits(w) {
				t.Errorf("%s(%g) = %#08x, want %#08x", op, x[i], got, math.Float32bits(w))
			}
		}
		nan := uint32(0x7FA00001) // kept, but Sign's is +0
		if op == "Sign" {
			nan = 0
		}
		if got := binary.LittleEndian.Uint32(c.Raw[32:]); got != nan {
			t.Errorf("%s(NaN) = %#08x, want %#08x", op, got, nan)
		}
	}
}

// TestT5BucketsFold: T5's relative position buckets (bidirectional, 32
// buckets, max_distance 128) as torch exports them over 40 positions
// fold to a constant: Abs of int64, Log of float, the cast of log(0) =
// -Inf to int64 (saturated, then selected away), Min of int64. The
// values are T5's, computed here in float32 as torch does.
func TestT5BucketsFold(t *testing.T) {
	const n, nb, me = 40, 16, 8 // positions, num_buckets/2, max_exact
	pos := make([]int64, n)
	for i := range pos {
		pos[i] = int64(i)
	}
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{1})
	b.AddInitializer(onnx.NewInt64("q", []int64{n}, pos))
	b.AddInitializer(onnx.NewInt64("one", []int64{1}, []int64{1}))
	b.AddInitializer(onnx.NewInt64("zero", nil, []int64{0}))
	b.AddInitializer(onnx.NewInt64("nb", nil, []int64{nb}))
	b.AddInitializer(onnx.NewInt64("nb1", nil, []int64{nb - 1}))
	b.AddInitializer(onnx.NewInt64("me", nil, []int64{me}))
	b.AddInitializer(onnx.NewFloat32("mef", nil, []float32{me}))
	b.AddInitializer(onnx.NewFloat32("ld", nil, []float32{float32(math.Log(128.0 / me))}))
	b.AddInitializer(onnx.NewFloat32("sc", nil, []float32{nb - me}))
	b.AddNode("Unsqueeze", "cq", []string{"q", "one"}, []string{"ctx"})
	b.AddNode("Sub", "rel", []string{"q", "ctx"}, []string{"rel"}) // memory - context
	b.AddNode("Greater", "gt", []string{"rel", "zero"}, []string{"gt"})
	b.AddNode("Cast", "gtl", []string{"gt"}, []string{"gtl"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Mul", "bk", []string{"gtl", "nb"}, []string{"bk"})
	b.AddNode("Abs", "ab", []string{"rel"}, []string{"ab"})
	b.AddNode("Less", "small", []string{"ab", "me"}, []string{"small"})
	b.AddNode("Cast", "abf", []string{"ab"}, []string{"abf"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Div", "d1", []string{"abf", "mef"}, []string{"d1"})
	b.AddNode("Log", "lg", []string{"d1"}, []string{"lg"})
	b.AddNode("Div", "d2", []string{"lg", "ld"}, []string{"d2"})
	b.AddNode("Mul", "m2", []string{"d2", "sc"}, []string{"m2"})
	b.AddNode("Cast", "m2l", []string{"m2"}, []string{"m2l"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Add", "large", []string{"me", "m2l"}, []string{"large"})
	b.AddNode("Min", "lmin", []string{"large", "nb1"}, []string{"lmin"})
	b.AddNode("Where", "w", []string{"small", "ab", "lmin"}, []string{"w"})
	b.AddNode("Add", "buckets", []string{"bk", "w"}, []string{"buckets"})
	b.AddOutput("buckets", onnx.Int64, []int64{n, n})
	g := buildOf(t, b)
	got := foldedInt64s(t, g)
	ld := float32(math.Log(128.0 / me))
	for c := 0; c < n; c++ {
		for m := 0; m < n; m++ {
			rel := m - c
			bucket := 0
			if rel > 0 {
				bucket = nb
			}
			a := rel
			if a < 0 {
				a = -a
			}
			if a < me {
				bucket += a
			} else {
				v := float32(math.Log(float64(float32(a)/me))) / ld * (nb - me)
				bucket += min(me+int(v), nb-1)
			}
			if got[c*n+m] != int64(bucket) {
				t.Fatalf("bucket [%d, %d] (relative %d) = %d, want %d", c, m, rel, got[c*n+m], bucket)
			}
		}
	}
}

// Float functions of a float constant fold as the device computes them,
// Abs and Neg of integers as Sub and Where; float16 stays on the device.
func TestFoldUnary(t *testing.T) {
	b := onnx.NewModel(14)
	b.AddInput("h", onnx.Float16, []int64{2})
	b.AddInitializer(onnx.NewFloat32("c", []int64{4}, []float32{-2, 0.5, 3, float32(math.Copysign(0, -1))}))
	b.AddInitializer(onnx.NewInt64("i", []int64{3}, []int64{-7, 0, 9}))
	var outs []string
	for _, op := range []string{"Exp", "Log", "Tanh", "Erf", "Sin", "Cos", "Sqrt", "Neg", "Abs"} {
		b.AddNode(op, "f"+op, []string{"c"}, []string{"f" + op})
		outs = append(outs, "f"+op)
	}
	b.AddNode("Neg", "in", []string{"i"}, []string{"in"})
	b.AddNode("Abs", "ia", []string{"i"}, []string{"ia"})
	b.AddNode("Exp", "he", []string{"h"}, []string{"he"})
	for _, o := range outs {
		b.AddOutput(o, onnx.Float, []int64{4})
	}
	b.AddOutput("in", onnx.Int64, []int64{3})
	b.AddOutput("ia", onnx.Int64, []int64{3})
	b.AddOutput("he", onnx.Float16, []int64{2})
	g := buildOf(t, b)
	if len(g.Nodes) != 1 || g.Nodes[0].Op != "Exp" {
		t.Fatalf("want only the float16 Exp left:\n%s", g)
	}
	want := map[string][]uint32{
		"fExp":  {0x3E0A9555, 0x3FD3094C, 0x41A0AF2E, 0x3F800000},
		"fSqrt": {0x7FC00000, 0x3F3504F3, 0x3FDDB3D7, 0x80000000},
		"fNeg":  {0x40000000, 0xBF000000, 0xC0400000, 0x00000000},
		"fAbs":  {0x40000000, 0x3F000000, 0x40400000, 0x00000000},
		"fLog":  {0x7FC00000, 0xBF317218, 0x3F8C9F54, 0xFF800000},
	}
	for i, o := range outs {
		w, ok := want[o]
		if !ok {
			continue
		}
		c := g.Outputs[i].Const
		for k, x := range w {
			if got := binary.LittleEndian.Uint32(c.Raw[4*k:]); got != x {
				t.Errorf("%s element %d: %#08x, want %#08x", o, k, got, x)
			}
		}
	}
	for i, want := range [][]int64{{7, 0, -9}, {7, 0, 9}} {
		c := g.Outputs[len(outs)+i].Const
		v, _ := c.Int64s()
		if fmt.Sprint(v) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", g.Outputs[len(outs)+i].Name, v, want)
		}
	}
}
