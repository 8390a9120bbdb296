package graph

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// Model builders: the graph tests build onnx.Model values directly.

func newModel(opset int64) *onnx.Model {
	return &onnx.Model{IRVersion: 10, Opsets: map[string]int64{"": opset}, Graph: &onnx.Graph{Name: "g"}}
}

func input(m *onnx.Model, name string, d onnx.DataType, dims ...int64) {
	vi := onnx.ValueInfo{Name: name, DType: d, HasShape: true, Shape: []onnx.Dim{}}
	for _, v := range dims {
		vi.Shape = append(vi.Shape, onnx.Dim{Value: v})
	}
	m.Graph.Inputs = append(m.Graph.Inputs, vi)
}

func output(m *onnx.Model, names ...string) {
	for _, n := range names {
		m.Graph.Outputs = append(m.Graph.Outputs, onnx.ValueInfo{Name: n})
	}
}

func addNode(m *onnx.Model, op, name string, ins, outs []string, attrs ...onnx.Attr) {
	m.Graph.Nodes = append(m.Graph.Nodes, onnx.Node{Name: name, OpType: op, Inputs: ins, Outputs: outs, Attrs: attrs})
}

func ints64(name string, dims []int64, v ...int64) *onnx.Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Int64, Dims: dims, Raw: raw}
}

func initializer(m *onnx.Model, t *onnx.Tensor) {
	m.Graph.Initializers = append(m.Graph.Initializers, t)
}

func aInt(name string, v int64) onnx.Attr { return onnx.Attr{Name: name, Type: onnx.AttrInt, I: v} }
func aFloat(name string, v float32) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrFloat, F: v}
}
func aInts(name string, v ...int64) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrInts, Ints: v}
}
func aString(name, v string) onnx.Attr { return onnx.Attr{Name: name, Type: onnx.AttrString, S: v} }
func aTensor(name string, t *onnx.Tensor) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrTensor, T: t}
}

func l(s ...string) []string { return s }

// build is a table entry: a model maker, and either the dump of the built
// graph or the error.
type buildCase struct {
	name  string
	model func() *onnx.Model
	want  string // g.String() without the "graph" line
	err   string
}

func runBuildCases(t *testing.T, cases []buildCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.model())
			if tc.err != "" {
				if err == nil {
					t.Fatalf("built without error:\n%s", g)
				}
				if err.Error() != tc.err {
					t.Errorf("error\n%s\nwant\n%s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(g); err != nil {
				t.Errorf("Check of a built graph: %v", err)
			}
			got := g.String()
			got = got[strings.IndexByte(got, '\n')+1:]
			if d := cmp.Diff(strings.TrimLeft(tc.want, "\n"), got); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// unary builds opset-v model y = op(x) with x float[2,3].
func unary(v int64, op string, xdims []int64, attrs ...onnx.Attr) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(v)
		input(m, "x", onnx.Float, xdims...)
		addNode(m, op, "n", l("x"), l("y"), attrs...)
		output(m, "y")
		return m
	}
}

func TestBuildOps(t *testing.T) {
	runBuildCases(t, []buildCase{
		{name: "matmul", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 3)
			input(m, "b", onnx.Float, 3, 4)
			addNode(m, "MatMul", "mm", l("a", "b"), l("y"))
			output(m, "y")
			return m
		}, want: `
input a float[2,3]
input b float[3,4]
node "mm" MatMul (a, b) -> y float[2,4]
output y
`},
		{name: "matmul batch and vector", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float16, 5, 1, 2, 3)
			input(m, "b", onnx.Float16, 4, 3, 6)
			input(m, "v", onnx.Float16, 6)
			addNode(m, "MatMul", "mm", l("a", "b"), l("y"))
			addNode(m, "MatMul", "mv", l("y", "v"), l("z"))
			addNode(m, "MatMul", "vm", l("v", "v"), l("s"))
			output(m, "z", "s")
			return m
		}, want: `
input a float16[5,1,2,3]
input b float16[4,3,6]
input v float16[6]
node "mm" MatMul (a, b) -> y float16[5,4,2,6]
node "mv" MatMul (y, v) -> z float16[5,4,2]
node "vm" MatMul (v, v) -> s float16[]
output z
output s
`},
		{name: "matmul mismatch", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 3, 4)
			input(m, "b", onnx.Float, 5, 6)
			addNode(m, "MatMul", "MatMul_3", l("a", "b"), l("y"))
			output(m, "y")
			return m
		}, err: `node "MatMul_3" (MatMul) input 1: shape [5,6] does not match [3,4]: inner dimensions 4 and 5 differ`},
		{name: "matmul batch mismatch", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 3, 4)
			input(m, "b", onnx.Float, 5, 4, 6)
			addNode(m, "MatMul", "bmm", l("a", "b"), l("y"))
			output(m, "y")
			return m
		}, err: `node "bmm" (MatMul) input 1: shape [5,4,6] does not match [2,3,4]: batch dimensions: shape [5] does not broadcast with [2]`},
		{name: "gemm", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 3, 2)
			input(m, "b", onnx.Float, 4, 3)
			input(m, "c", onnx.Float, 4)
			addNode(m, "Gemm", "g", l("a", "b", "c"), l("y"), aFloat("alpha", 0.5), aInt("transA", 1), aInt("transB", 1))
			addNode(m, "Gemm", "h", l("y", "y"), l("z"), aInt("transB", 1))
			output(m, "z")
			return m
		}, want: `
input a float[3,2]
input b float[4,3]
input c float[4]
node "g" Gemm {Alpha:0.5 Beta:1 TransA:true TransB:true} (a, b, c) -> y float[2,4]
node "h" Gemm {Alpha:1 Beta:1 TransA:false TransB:true} (y, y, -) -> z float[2,2]
output z
`},
		{name: "gemm C required before opset 11", model: func() *onnx.Model {
			m := newModel(9)
			input(m, "a", onnx.Float, 2, 2)
			addNode(m, "Gemm", "g", l("a", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "g" (Gemm): 2 inputs, want 3`},
		{name: "gemm C shape", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 3)
			input(m, "b", onnx.Float, 3, 4)
			input(m, "c", onnx.Float, 3)
			addNode(m, "Gemm", "g", l("a", "b", "c"), l("y"))
			output(m, "y")
			return m
		}, err: `node "g" (Gemm) input 2: shape [3] does not broadcast to [2,4]`},
		{name: "transpose", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float8E4M3FN, 2, 3, 4)
			addNode(m, "Transpose", "t", l("x"), l("y"), aInts("perm", 1, 2, 0))
			addNode(m, "Transpose", "u", l("y"), l("z"))
			output(m, "z")
			return m
		}, want: `
input x float8e4m3fn[2,3,4]
node "t" Transpose {Perm:[1 2 0]} (x) -> y float8e4m3fn[3,4,2]
node "u" Transpose {Perm:[2 1 0]} (y) -> z float8e4m3fn[2,4,3]
output z
`},
		{name: "transpose bad perm", model: unary(13, "Transpose", []int64{2, 3}, aInts("perm", 1, 1)),
			err: `node "n" (Transpose): perm [1 1] is not a permutation of 0..1`},
		{name: "cast", model: func() *onnx.Model {
			m := newModel(21)
			input(m, "x", onnx.Float, 2)
			addNode(m, "Cast", "c8", l("x"), l("x8"), aInt("to", int64(onnx.Float8E5M2FNUZ)))
			addNode(m, "Cast", "c8n", l("x"), l("y8"), aInt("to", int64(onnx.Float8E4M3FN)), aInt("saturate", 0))
			addNode(m, "Cast", "c16", l("x8"), l("y"), aInt("to", int64(onnx.Float16)))
			output(m, "y", "y8")
			return m
		}, want: `
input x float[2]
node "c8" Cast {To:float8e5m2fnuz Saturate:true} (x) -> x8 float8e5m2fnuz[2]
node "c8n" Cast {To:float8e4m3fn Saturate:false} (x) -> y8 float8e4m3fn[2]
node "c16" Cast {To:float16 Saturate:true} (x8) -> y float16[2]
output y
output y8
`},
		{name: "cast to uint8", model: unary(13, "Cast", []int64{2}, aInt("to", int64(onnx.Uint8))),
			err: `node "n" (Cast): cast to uint8 is not supported`},
		{name: "cast to double", model: unary(13, "Cast", []int64{2}, aInt("to", int64(onnx.Double))),
			err: `node "n" (Cast): output "y": element type double is not supported by the device`},
		{name: "cast fp8 before opset 19", model: unary(17, "Cast", []int64{2}, aInt("to", int64(onnx.Float8E4M3FN))),
			err: `node "n" (Cast): cast to float8e4m3fn needs opset 19, the model imports 17`},
		{name: "binary broadcast", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 4, 1, 3)
			input(m, "r", onnx.Float, 5, 1)
			for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow"} {
				addNode(m, op, op, l("x", "r"), l(strings.ToLower(op)))
			}
			output(m, "add", "sub", "mul", "div", "pow")
			return m
		}, want: `
input x float[4,1,3]
input r float[5,1]
node "Add" Add (x, r) -> add float[4,5,3]
node "Sub" Sub (x, r) -> sub float[4,5,3]
node "Mul" Mul (x, r) -> mul float[4,5,3]
node "Div" Div (x, r) -> div float[4,5,3]
node "Pow" Pow (x, r) -> pow float[4,5,3]
output add
output sub
output mul
output div
output pow
`},
		{name: "binary no broadcast", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 4, 3)
			input(m, "r", onnx.Float, 4)
			addNode(m, "Add", "a", l("x", "r"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: shape [4] does not broadcast with [4,3]`},
		{name: "binary type mismatch", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 4)
			input(m, "h", onnx.Float16, 4)
			addNode(m, "Mul", "a", l("x", "h"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Mul) input 1: element type float16 does not match float`},
		{name: "pow mixed types from opset 12", model: func() *onnx.Model {
			m := newModel(12)
			input(m, "x", onnx.Float, 4)
			input(m, "h", onnx.Float16, 1)
			addNode(m, "Pow", "p", l("x", "h"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x float[4]
input h float16[1]
node "p" Pow (x, h) -> y float[4]
output y
`},
		{name: "arithmetic on fp8", model: func() *onnx.Model {
			m := newModel(21)
			input(m, "x", onnx.Float8E5M2, 4)
			addNode(m, "Relu", "r", l("x"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Relu) input 0: element type float8e5m2 of "x" is not supported by Relu`},
		{name: "legacy broadcast", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float, 2, 3)
			input(m, "r", onnx.Float, 3)
			input(m, "c", onnx.Float, 2, 1)
			addNode(m, "Add", "a", l("x", "r"), l("y"), aInt("broadcast", 1))
			addNode(m, "Mul", "b", l("y", "c"), l("z"), aInt("broadcast", 1), aInt("axis", 0))
			addNode(m, "Sub", "s", l("z", "x"), l("w"))
			output(m, "w")
			return m
		}, want: `
input x float[2,3]
input r float[3]
input c float[2,1]
node "a" Add (x, r) -> y float[2,3]
node "b" Mul (y, c) -> z float[2,3]
node "s" Sub (z, x) -> w float[2,3]
output w
`},
		{name: "legacy broadcast at inner axis", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float, 2, 3)
			input(m, "c", onnx.Float, 2)
			addNode(m, "Add", "a", l("x", "c"), l("y"), aInt("broadcast", 1), aInt("axis", 0))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: legacy broadcast of [2] into [2,3] at axis 0 is not supported (it differs from numpy broadcasting)`},
		{name: "legacy without broadcast", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float, 2, 3)
			input(m, "r", onnx.Float, 3)
			addNode(m, "Add", "a", l("x", "r"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: shape [3] does not match [2,3] (no broadcasting before opset 7 without broadcast=1)`},
		{name: "unary", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float16, 2)
			prev := "x"
			for _, op := range []string{"Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt"} {
				addNode(m, op, "", l(prev), l(op))
				prev = op
			}
			output(m, prev)
			return m
		}, want: `
input x float16[2]
node "Neg" Neg (x) -> Neg float16[2]
node "Abs" Abs (Neg) -> Abs float16[2]
node "Relu" Relu (Abs) -> Relu float16[2]
node "Tanh" Tanh (Relu) -> Tanh float16[2]
node "Sigmoid" Sigmoid (Tanh) -> Sigmoid float16[2]
node "Exp" Exp (Sigmoid) -> Exp float16[2]
node "Sqrt" Sqrt (Exp) -> Sqrt float16[2]
output Sqrt
`},
		{name: "max min", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 1)
			input(m, "b", onnx.Float, 3)
			input(m, "c", onnx.Float)
			addNode(m, "Max", "mx", l("a", "b", "c"), l("y"))
			addNode(m, "Min", "mn", l("y"), l("z"))
			output(m, "z")
			return m
		}, want: `
input a float[2,1]
input b float[3]
input c float[]
node "mx" Max (a, b, c) -> y float[2,3]
node "mn" Min (y) -> z float[2,3]
output z
`},
		{name: "max without broadcast before opset 8", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "a", onnx.Float, 2, 1)
			input(m, "b", onnx.Float, 1)
			addNode(m, "Max", "mx", l("a", "b"), l("y"))
			output(m, "y")
			return m
		}, err: `node "mx" (Max) input 1: shape [1] does not match [2,1] (no broadcasting before opset 8)`},
		{name: "clip attributes", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float, 2)
			addNode(m, "Clip", "c", l("x"), l("y"), aFloat("min", -0.5))
			output(m, "y")
			return m
		}, want: `
input x float[2]
node "c" Clip {Min:-0.5 Max:3.4028234663852886e+38} (x) -> y float[2]
output y
`},
		{name: "clip inputs", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float16, 2)
			initializer(m, &onnx.Tensor{Name: "hi", DType: onnx.Float16, Dims: []int64{}, Raw: []byte{0x00, 0x3C}})
			addNode(m, "Clip", "c", l("x", "", "hi"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x float16[2]
node "c" Clip {Min:-65504 Max:1} (x) -> y float16[2]
output y
`},
		{name: "clip runtime bound", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 2)
			input(m, "lo", onnx.Float)
			addNode(m, "Clip", "c", l("x", "lo"), l("y"))
			output(m, "y")
			return m
		}, err: `node "c" (Clip) input 1: min "lo" must be a constant (an initializer, a Constant or a value computed from them)`},
		{name: "softmax opset 11 coerces", model: unary(11, "Softmax", []int64{2, 3, 4}),
			want: `
input x float[2,3,4]
node "n" Softmax {Axis:1 Coerce2D:true} (x) -> y float[2,3,4]
output y
`},
		{name: "logsoftmax opset 13 last axis", model: unary(13, "LogSoftmax", []int64{2, 3, 4}),
			want: `
input x float[2,3,4]
node "n" LogSoftmax {Axis:2 Coerce2D:false} (x) -> y float[2,3,4]
output y
`},
		{name: "softmax bad axis", model: unary(13, "Softmax", []int64{2, 3}, aInt("axis", 2)),
			err: `node "n" (Softmax): axis 2 out of range [-2,1] for rank 2`},
		{name: "layernorm", model: func() *onnx.Model {
			m := newModel(17)
			input(m, "x", onnx.Float, 2, 3, 4)
			input(m, "s", onnx.Float, 3, 4)
			input(m, "b", onnx.Float, 4)
			addNode(m, "LayerNormalization", "ln", l("x", "s", "b"), l("y", "", "inv"), aInt("axis", -2), aFloat("epsilon", 1e-3))
			output(m, "y", "inv")
			return m
		}, want: `
input x float[2,3,4]
input s float[3,4]
input b float[4]
node "ln" LayerNormalization {Axis:1 Epsilon:0.001} (x, s, b) -> y float[2,3,4], -, inv float[2,1,1]
output y
output inv
`},
		{name: "layernorm before opset 17", model: unary(16, "LayerNormalization", []int64{2}),
			err: `node "n" (LayerNormalization): operator needs opset 17, the model imports 16`},
		{name: "layernorm scale shape", model: func() *onnx.Model {
			m := newModel(17)
			input(m, "x", onnx.Float, 2, 3)
			input(m, "s", onnx.Float, 2)
			addNode(m, "LayerNormalization", "ln", l("x", "s"), l("y"))
			output(m, "y")
			return m
		}, err: `node "ln" (LayerNormalization) input 1: shape [2] does not broadcast to the normalized shape [3]`},
		{name: "gelu", model: unary(20, "Gelu", []int64{2}, aString("approximate", "tanh")),
			want: `
input x float[2]
node "n" Gelu {Tanh:true} (x) -> y float[2]
output y
`},
		{name: "gelu bad approximation", model: unary(20, "Gelu", []int64{2}, aString("approximate", "erf")),
			err: `node "n" (Gelu): approximate "erf", want "none" or "tanh"`},
		{name: "reduce attributes", model: func() *onnx.Model {
			m := newModel(11)
			input(m, "x", onnx.Float, 2, 3, 4)
			addNode(m, "ReduceMean", "m", l("x"), l("y"), aInts("axes", -1, 0), aInt("keepdims", 0))
			addNode(m, "ReduceSum", "s", l("x"), l("z"))
			output(m, "y", "z")
			return m
		}, want: `
input x float[2,3,4]
node "m" ReduceMean {Axes:[0 2] KeepDims:false} (x) -> y float[3]
node "s" ReduceSum {Axes:[0 1 2] KeepDims:true} (x) -> z float[1,1,1]
output y
output z
`},
		{name: "reduce inputs", model: func() *onnx.Model {
			m := newModel(18)
			input(m, "x", onnx.Float, 2, 3, 4)
			initializer(m, ints64("ax", []int64{1}, 1))
			initializer(m, ints64("none", []int64{0}))
			addNode(m, "ReduceMean", "m", l("x", "ax"), l("y"))
			addNode(m, "ReduceSum", "s", l("x", "none"), l("z"), aInt("noop_with_empty_axes", 1), aInt("keepdims", 0))
			addNode(m, "ReduceSum", "t", l("x"), l("w"), aInt("keepdims", 0))
			output(m, "y", "z", "w")
			return m
		}, want: `
input x float[2,3,4]
node "m" ReduceMean {Axes:[1] KeepDims:true} (x) -> y float[2,1,4]
node "s" ReduceSum {Axes:[] KeepDims:false} (x) -> z float[2,3,4]
node "t" ReduceSum {Axes:[0 1 2] KeepDims:false} (x) -> w float[]
output y
output z
output w
`},
		{name: "reduce axes twice", model: unary(11, "ReduceSum", []int64{2, 3}, aInts("axes", 1, -1)),
			err: `node "n" (ReduceSum): axes [1 -1] name axis 1 twice`},
		{name: "reshape and flatten", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 2, 3, 4)
			initializer(m, ints64("s1", []int64{3}, 0, -1, 2))
			addNode(m, "Constant", "k", nil, l("s2"), aTensor("value", ints64("", []int64{2}, 4, 6)))
			addNode(m, "Reshape", "r1", l("x", "s1"), l("y"))
			addNode(m, "Reshape", "r2", l("y", "s2"), l("z"))
			addNode(m, "Flatten", "f", l("z"), l("w"), aInt("axis", -1))
			addNode(m, "Flatten", "f0", l("w"), l("v"), aInt("axis", 0))
			output(m, "v")
			return m
		}, want: `
input x float[2,3,4]
node "r1" Reshape {Shape:[2 6 2]} (x) -> y float[2,6,2]
node "r2" Reshape {Shape:[4 6]} (y) -> z float[4,6]
node "f" Flatten {Axis:1} (z) -> w float[4,6]
node "f0" Flatten {Axis:0} (w) -> v float[1,24]
output v
`},
		{name: "reshape count mismatch", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 2, 3)
			initializer(m, ints64("s", []int64{2}, 4, -1))
			addNode(m, "Reshape", "r", l("x", "s"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Reshape) input 1: cannot reshape [2,3] (6 elements) to [4 -1]`},
		{name: "reshape runtime shape", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 2, 3)
			input(m, "s", onnx.Float, 2)
			addNode(m, "Reshape", "r", l("x", "s"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Reshape) input 1: shape "s" must be a constant (an initializer, a Constant or a value computed from them)`},
		{name: "constants", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 2)
			addNode(m, "Constant", "", nil, l("one"), onnx.Attr{Name: "value_float", Type: onnx.AttrFloat, F: 1})
			addNode(m, "Constant", "", nil, l("v"), onnx.Attr{Name: "value_floats", Type: onnx.AttrFloats, Floats: []float32{1, 2}})
			addNode(m, "Add", "a", l("x", "one"), l("y"))
			addNode(m, "Mul", "b", l("y", "v"), l("z"))
			output(m, "z")
			return m
		}, want: `
input x float[2]
const one float[]
const v float[2]
node "a" Add (x, one) -> y float[2]
node "b" Mul (y, v) -> z float[2]
output z
`},
		{name: "int64 constant as data", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 2)
			addNode(m, "Constant", "", nil, l("k"), onnx.Attr{Name: "value_ints", Type: onnx.AttrInts, Ints: []int64{1, 2}})
			addNode(m, "Add", "a", l("x", "k"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: element type int64 does not match float`},
		{name: "uint8 constant as data", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 2)
			initializer(m, &onnx.Tensor{Name: "k", DType: onnx.Uint8, Dims: []int64{2}, Raw: []byte{1, 2}})
			addNode(m, "Add", "a", l("x", "k"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: constant "k": element type uint8 is not supported as data`},
	})
}

func TestBuildGraph(t *testing.T) {
	runBuildCases(t, []buildCase{
		{name: "unsupported operator", model: unary(13, "LSTM", []int64{1}),
			err: `unsupported operator LSTM (node "n")`},
		{name: "unsupported operator without a name", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{1})()
			m.Graph.Nodes[0].Name = ""
			m.Graph.Nodes[0].OpType = "Softsign"
			return m
		}, err: `unsupported operator Softsign (node "y")`},
		{name: "other domain", model: func() *onnx.Model {
			m := unary(13, "Gelu", []int64{1})()
			m.Graph.Nodes[0].Domain = "com.microsoft"
			return m
		}, err: `unsupported operator com.microsoft.Gelu (node "n")`},
		{name: "gelu before opset 20", model: unary(18, "Gelu", []int64{1}),
			err: `node "n" (Gelu): operator needs opset 20, the model imports 18`},
		{name: "symbolic input", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{1})()
			m.Graph.Inputs[0].Shape[0] = onnx.Dim{Value: -1, Param: "batch"}
			return m
		}, err: `input "x": dimension 0 is symbolic ("batch"); the device program needs static shapes (ipu-plan --dim batch=N, or --input-shapes DIR)`},
		{name: "input without shape", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{1})()
			m.Graph.Inputs[0].HasShape = false
			return m
		}, err: `input "x": no shape; graph inputs need static shapes`},
		{name: "double input", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{1})()
			m.Graph.Inputs[0].DType = onnx.Double
			return m
		}, err: `input "x": element type double is not supported by the device`},
		{name: "huge input", model: unary(13, "Relu", []int64{1 << 20, 1 << 20}),
			err: `input "x": shape [1048576,1048576] has 1099511627776 elements, more than 268435456`},
		{name: "undefined input", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 1)
			addNode(m, "Add", "a", l("x", "nope"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: "nope" is not defined by any node, input or initializer`},
		{name: "topological order", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 1)
			addNode(m, "Exp", "second", l("y"), l("z"))
			addNode(m, "Neg", "first", l("x"), l("y"))
			addNode(m, "Abs", "third", l("x"), l("w"))
			output(m, "z", "w")
			return m
		}, want: `
input x float[1]
node "first" Neg (x) -> y float[1]
node "second" Exp (y) -> z float[1]
node "third" Abs (x) -> w float[1]
output z
output w
`},
		{name: "cycle", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 1)
			addNode(m, "Add", "a", l("x", "z"), l("y"))
			addNode(m, "Neg", "b", l("y"), l("z"))
			output(m, "z")
			return m
		}, err: `node "a" (Add): on a cycle`},
		{name: "name defined twice", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 1)
			addNode(m, "Neg", "a", l("x"), l("x"))
			output(m, "x")
			return m
		}, err: `node "a" (Neg) output "x": name defined twice`},
		{name: "declared output type", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{2})()
			m.Graph.Outputs[0].DType = onnx.Float16
			return m
		}, err: `output "y": element type float, model declares float16`},
		{name: "declared output shape", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{2})()
			m.Graph.Outputs[0].HasShape = true
			m.Graph.Outputs[0].Shape = []onnx.Dim{{Value: 3}}
			return m
		}, err: `output "y": shape [2], model declares [3]`},
		{name: "undefined output", model: func() *onnx.Model {
			m := unary(13, "Relu", []int64{2})()
			output(m, "nope")
			return m
		}, err: `output "nope": not defined by any node, input or initializer`},
		{name: "initializer listed as input", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float, 2)
			input(m, "w", onnx.Float, 2)
			initializer(m, onnx.NewFloat32("w", []int64{2}, []float32{1, 2}))
			addNode(m, "Add", "a", l("x", "w"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x float[2]
const w float[2]
node "a" Add (x, w) -> y float[2]
output y
`},
	})
}

func TestMatMulShape(t *testing.T) {
	tests := []struct {
		a, b, want []int64
	}{
		{[]int64{2, 3}, []int64{3, 4}, []int64{2, 4}},
		{[]int64{3}, []int64{3, 4}, []int64{4}},
		{[]int64{2, 3}, []int64{3}, []int64{2}},
		{[]int64{3}, []int64{3}, []int64{}},
		{[]int64{7, 1, 2, 3}, []int64{5, 3, 4}, []int64{7, 5, 2, 4}},
		{[]int64{3}, []int64{6, 3, 4}, []int64{6, 4}},
		{[]int64{2, 3}, []int64{4, 5}, nil},
	}
	for _, tt := range tests {
		got, err := MatMulShape(tt.a, tt.b)
		if tt.want == nil {
			if err == nil {
				t.Errorf("MatMulShape(%v, %v) = %v, want an error", tt.a, tt.b, got)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tt.want) {
			t.Errorf("MatMulShape(%v, %v) = %v, %v, want %v", tt.a, tt.b, got, err, tt.want)
		}
	}
}

func TestBroadcastIndex(t *testing.T) {
	tests := []struct {
		in, out []int64
		want    []int64
	}{
		{[]int64{}, []int64{2, 2}, []int64{0, 0, 0, 0}},
		{[]int64{3}, []int64{2, 3}, []int64{0, 1, 2, 0, 1, 2}},
		{[]int64{2, 1}, []int64{2, 3}, []int64{0, 0, 0, 1, 1, 1}},
		{[]int64{2, 1, 2}, []int64{2, 2, 2}, []int64{0, 1, 0, 1, 2, 3, 2, 3}},
		{[]int64{2, 3}, []int64{2, 3}, []int64{0, 1, 2, 3, 4, 5}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, BroadcastIndex(tt.in, tt.out)); d != "" {
			t.Errorf("BroadcastIndex(%v, %v) mismatch (-want +got):\n%s", tt.in, tt.out, d)
		}
	}
}

func TestReshapeShape(t *testing.T) {
	tests := []struct {
		in, want  []int64
		allowZero bool
		out       []int64
		err       string
	}{
		{in: []int64{2, 3, 4}, want: []int64{-1}, out: []int64{24}},
		{in: []int64{2, 3, 4}, want: []int64{0, -1}, out: []int64{2, 12}},
		{in: []int64{2, 0, 4}, want: []int64{0, 0, 4}, out: []int64{2, 0, 4}},
		{in: []int64{0, 3}, want: []int64{0, 3}, allowZero: true, out: []int64{0, 3}},
		{in: []int64{2, 3}, want: []int64{0, -1}, allowZero: true, err: "shape [0 -1] has both 0 and -1 with allowzero"},
		{in: []int64{2, 3}, want: []int64{-1, -1}, err: "shape [-1 -1] has more than one -1"},
		{in: []int64{2, 3}, want: []int64{6, 1, 0}, err: "shape [6 1 0] copies dimension 2, input [2,3] has rank 2"},
		{in: []int64{2, 3}, want: []int64{-2, -3}, err: "shape [-2 -3] has a negative dimension -2"},
		{in: []int64{2, 3}, want: []int64{1 << 40, 1 << 40}, err: "shape [1099511627776 1099511627776] has a dimension above 268435456"},
	}
	for _, tt := range tests {
		got, err := ReshapeShape(tt.in, tt.want, tt.allowZero)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ReshapeShape(%v, %v) error %v, want %q", tt.in, tt.want, err, tt.err)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tt.out) {
			t.Errorf("ReshapeShape(%v, %v) = %v, %v, want %v", tt.in, tt.want, got, err, tt.out)
		}
	}
}

func TestDecodeFloats(t *testing.T) {
	tests := []struct {
		t    *onnx.Tensor
		want []float64
	}{
		{onnx.NewFloat32("f", []int64{2}, []float32{1.5, -2}), []float64{1.5, -2}},
		{&onnx.Tensor{DType: onnx.Float16, Dims: []int64{2}, Raw: []byte{0x00, 0x3C, 0x01, 0x00}}, []float64{1, 0x1p-24}},
		{&onnx.Tensor{DType: onnx.Float8E4M3FNUZ, Dims: []int64{2}, Raw: []byte{0x7F, 0x01}}, []float64{240, 0x1p-10}},
		{&onnx.Tensor{DType: onnx.Float8E5M2, Dims: []int64{2}, Raw: []byte{0x7C, 0xFB}}, []float64{math.Inf(1), -57344}},
	}
	for _, tt := range tests {
		got, err := DecodeFloats(tt.t)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%v mismatch (-want +got):\n%s", tt.t.DType, d)
		}
	}
	if _, err := DecodeFloats(ints64("i", []int64{1}, 1)); err == nil {
		t.Error("DecodeFloats accepted int64")
	}
}

// conformanceDir is the conformance data (libs/repodata:
// $IPU_CONFORMANCE, the shared folder beside the repository when present,
// else the committed copies under testdata/conformance).
func conformanceDir(t testing.TB) string {
	t.Helper()
	r, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	return r.Dir
}

// checkGraph checks the invariants of a built graph.
func checkGraph(t *testing.T, g *Graph) {
	t.Helper()
	if err := Check(g); err != nil {
		t.Errorf("Check of a built graph: %v", err)
	}
	defined := map[*Value]bool{}
	for i, v := range g.Values {
		if v.Index != i {
			t.Errorf("value %q has index %d, at %d", v.Name, v.Index, i)
		}
		if v.Producer == nil {
			defined[v] = true
		}
	}
	for i, n := range g.Nodes {
		if n.Index != i {
			t.Errorf("node %q has index %d, at %d", n.Name, n.Index, i)
		}
		for _, in := range n.Inputs {
			if in != nil && !defined[in] {
				t.Errorf("node %q reads %q before it is defined", n.Name, in.Name)
			}
		}
		for _, out := range n.Outputs {
			if out != nil {
				defined[out] = true
				if out.Producer != n {
					t.Errorf("value %q: wrong producer", out.Name)
				}
			}
		}
	}
}

// FuzzBuild checks that no model, however malformed, makes Build panic,
// and that what it builds keeps the graph invariants.
// builtOpsSeed is a model of the operators built from others (Trilu,
// CumSum, ScatterND, Einsum, ArgMax, Pad, IsInf, Dropout, Reciprocal),
// for FuzzBuild to mutate.
func builtOpsSeed() []byte {
	b := onnx.NewModel(18)
	b.AddInput("x", onnx.Float, []int64{2, 3, 4})
	b.AddInput("i", onnx.Int64, []int64{2, 5})
	b.AddInitializer(onnx.NewInt64("one", nil, []int64{1}))
	b.AddInitializer(onnx.NewInt64("idx", []int64{2, 1}, []int64{1, 0}))
	b.AddInitializer(onnx.NewInt64("pads", []int64{6}, []int64{0, 1, -1, 0, 0, 2}))
	b.AddNode("Trilu", "tri", []string{"x", "one"}, []string{"t"}, onnx.IntAttr("upper", 0))
	b.AddNode("CumSum", "cs", []string{"i", "one"}, []string{"c"}, onnx.IntAttr("exclusive", 1))
	b.AddNode("ScatterND", "sc", []string{"t", "idx", "t"}, []string{"s"})
	b.AddNode("Einsum", "es", []string{"s", "x"}, []string{"e"}, onnx.StringAttr("equation", "bij,bkj->bik"))
	b.AddNode("ArgMax", "am", []string{"e"}, []string{"a"}, onnx.IntAttr("axis", -1))
	b.AddNode("Pad", "pad", []string{"x", "pads"}, []string{"p"})
	b.AddNode("IsInf", "inf", []string{"p"}, []string{"f"})
	b.AddNode("Dropout", "drop", []string{"x"}, []string{"d"})
	b.AddNode("Reciprocal", "rc", []string{"d"}, []string{"r"})
	b.AddInput("h", onnx.Float16, []int64{3, 4})
	b.AddInitializer(onnx.NewInt64("hpads", []int64{4}, []int64{1, -1, 2, 2}))
	b.AddNode("Pad", "hpad", []string{"h", "hpads"}, []string{"hp"}, onnx.StringAttr("mode", "reflect"))
	b.AddNode("Cast", "hi", []string{"hp"}, []string{"hi"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Abs", "ha", []string{"hi"}, []string{"ha"})
	b.AddNode("Sin", "sn", []string{"r"}, []string{"sn"})
	b.AddNode("Floor", "fl", []string{"sn"}, []string{"fl"})
	b.AddInput("img", onnx.Float, []int64{1, 2, 6, 6})
	b.AddInitializer(onnx.NewFloat32("cw", []int64{3, 2, 3, 3}, make([]float32, 54)))
	for _, p := range []string{"bs", "bb", "bm", "bv"} {
		b.AddInitializer(onnx.NewFloat32(p, []int64{3}, []float32{1, 2, 3}))
	}
	b.AddNode("Conv", "cv", []string{"img", "cw"}, []string{"cv"}, onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("strides", 2, 1))
	b.AddNode("BatchNormalization", "bn", []string{"cv", "bs", "bb", "bm", "bv"}, []string{"bn"})
	b.AddNode("MaxPool", "mp", []string{"bn"}, []string{"mp"}, onnx.IntsAttr("kernel_shape", 2, 2), onnx.IntAttr("ceil_mode", 1))
	b.AddNode("GlobalAveragePool", "gp", []string{"mp"}, []string{"gp"})
	b.AddInitializer(onnx.NewFloat32("rsc", []int64{4}, []float32{1, 1, 1.5, 2}))
	b.AddNode("Resize", "rs", []string{"mp", "", "rsc"}, []string{"rs"}, onnx.StringAttr("mode", "linear"))
	b.AddInitializer(onnx.NewFloat32("ctw", []int64{3, 2, 2, 2}, make([]float32, 24)))
	b.AddNode("ConvTranspose", "ct", []string{"rs", "ctw"}, []string{"ct"}, onnx.IntsAttr("strides", 2, 2), onnx.IntsAttr("pads", 1, 0, 1, 0))
	b.AddInitializer(onnx.NewFloat32("n2", []int64{2}, []float32{1, 2}))
	b.AddNode("InstanceNormalization", "inorm", []string{"ct", "n2", "n2"}, []string{"inorm"})
	b.AddNode("GroupNormalization", "gnorm", []string{"inorm", "n2", "n2"}, []string{"gnorm"}, onnx.IntAttr("num_groups", 2))
	b.AddNode("SpaceToDepth", "s2d", []string{"gnorm"}, []string{"s2d"}, onnx.IntAttr("blocksize", 2))
	b.AddNode("DepthToSpace", "d2s", []string{"s2d"}, []string{"d2s"}, onnx.IntAttr("blocksize", 2), onnx.StringAttr("mode", "CRD"))
	b.AddInitializer(onnx.NewFloat32("slope", []int64{2, 1, 1}, []float32{0.5, -1}))
	b.AddNode("PRelu", "prelu", []string{"d2s", "slope"}, []string{"prelu"})
	b.AddNode("ReduceLogSumExp", "lse", []string{"prelu"}, []string{"lse"}, onnx.IntAttr("keepdims", 0))
	for _, o := range []struct {
		name string
		dt   onnx.DataType
	}{{"c", onnx.Int64}, {"a", onnx.Int64}, {"f", onnx.Bool}, {"r", onnx.Float}, {"ha", onnx.Int64}, {"fl", onnx.Float}, {"gp", onnx.Float}, {"rs", onnx.Float}, {"lse", onnx.Float}} {
		b.AddOutputInfo(onnx.ValueInfo{Name: o.name, DType: o.dt})
	}
	return b.Marshal()
}

// TestBuiltOpsSeed keeps FuzzBuild's seed of built operators a model that
// builds, so that the fuzzer starts from the operators' working paths.
func TestBuiltOpsSeed(t *testing.T) {
	m, err := onnx.ReadModel(builtOpsSeed())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(m); err != nil {
		t.Fatal(err)
	}
}

func FuzzBuild(f *testing.F) {
	dir := conformanceDir(f)
	for _, c := range []string{"ort/attention", "ort/layernorm_residual", "ort/qk_late_fp16", "onnx-pytorch/test_operator_mm", "onnx-pytorch/test_Softsign", "onnx-pytorch/test_operator_reduced_mean"} {
		if data, err := os.ReadFile(filepath.Join(dir, c, "model.onnx")); err == nil {
			f.Add(data)
		}
	}
	for _, c := range []string{"torch_gate_taken", "torch_attention", "torch_embedding"} {
		if data, err := os.ReadFile(filepath.Join(sharedModels(f), c, "model.onnx")); err == nil {
			f.Add(data)
		}
	}
	f.Add(builtOpsSeed())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := onnx.ReadModel(data)
		if err != nil {
			return
		}
		g, err := BuildWith(m, BuildOptions{DowncastFP64: true})
		if err == nil {
			checkGraph(t, g)
			g, _ = Simplify(g)
			checkGraph(t, g)
		}
		g, err = Build(m)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		checkGraph(t, g)
	})
}
