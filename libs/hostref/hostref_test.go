package hostref

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// Model builders.

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

func addNode(m *onnx.Model, op string, ins, outs []string, attrs ...onnx.Attr) {
	m.Graph.Nodes = append(m.Graph.Nodes, onnx.Node{Name: op + "_" + outs[0], OpType: op, Inputs: ins, Outputs: outs, Attrs: attrs})
}

func aInt(name string, v int64) onnx.Attr { return onnx.Attr{Name: name, Type: onnx.AttrInt, I: v} }
func aInts(name string, v ...int64) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrInts, Ints: v}
}
func aString(name, v string) onnx.Attr { return onnx.Attr{Name: name, Type: onnx.AttrString, S: v} }

func l(s ...string) []string { return s }

func build(t *testing.T, m *onnx.Model) *graph.Graph {
	t.Helper()
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func floats(t *testing.T, tn *onnx.Tensor) []float64 {
	t.Helper()
	v, err := graph.DecodeFloats(tn)
	if err != nil {
		// Double tensors (FP64 outputs).
		f, err2 := tn.Float64s()
		if err2 != nil {
			t.Fatal(err)
		}
		return f
	}
	return v
}

func f32(name string, dims []int64, v ...float32) *onnx.Tensor { return onnx.NewFloat32(name, dims, v) }

func eval(t *testing.T, g *graph.Graph, p Precision, threads int, in ...*onnx.Tensor) [][]float64 {
	t.Helper()
	outs, err := Eval(g, in, Options{Precision: p, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	res := make([][]float64, len(outs))
	for i, o := range outs {
		res[i] = floats(t, o)
	}
	return res
}

func TestMatMulPrecisions(t *testing.T) {
	// 1 + 2^-24 + 2^-24: float32 accumulation in k order loses both small
	// terms (each addition ties to even); float64 keeps them.
	m := newModel(13)
	input(m, "a", onnx.Float, 1, 3)
	input(m, "b", onnx.Float, 3, 1)
	addNode(m, "MatMul", l("a", "b"), l("y"))
	output(m, "y")
	g := build(t, m)
	a := f32("a", []int64{1, 3}, 1, 0x1p-24, 0x1p-24)
	b := f32("b", []int64{3, 1}, 1, 1, 1)
	for _, tc := range []struct {
		p    Precision
		want float64
	}{
		{FP64, 1 + 0x1p-23},
		{FP32, 1},
		{Device, 1},
	} {
		if got := eval(t, g, tc.p, 1, a, b)[0][0]; got != tc.want {
			t.Errorf("%v: %.17g, want %.17g", tc.p, got, tc.want)
		}
	}
	// In the opposite order the device's k-ordered accumulation keeps the
	// small terms: 2^-24 + 2^-24 = 2^-23, then + 1 ties to even.
	a = f32("a", []int64{1, 3}, 0x1p-24, 0x1p-24, 1)
	if got := eval(t, g, Device, 1, a, b)[0][0]; got != 1+0x1p-23 {
		t.Errorf("device, small terms first: %.17g, want %.17g", got, 1+0x1p-23)
	}
}

func TestDeviceProductIsFused(t *testing.T) {
	// (1+2^-12)^2 = 1 + 2^-11 + 2^-24: exact in the product, which the
	// device adds to the accumulator with one rounding; rounding the
	// product first would drop 2^-24 and then 1 - 1 gives 2^-11 only.
	m := newModel(13)
	input(m, "a", onnx.Float, 1, 2)
	input(m, "b", onnx.Float, 2, 1)
	addNode(m, "MatMul", l("a", "b"), l("y"))
	output(m, "y")
	g := build(t, m)
	x := float32(1 + 0x1p-12)
	got := eval(t, g, Device, 1, f32("a", []int64{1, 2}, -1, x), f32("b", []int64{2, 1}, 1, x))[0][0]
	if want := 0x1p-11 + 0x1p-24; got != want {
		t.Errorf("device: %.17g, want %.17g", got, want)
	}
}

func TestThreadsDoNotChangeResults(t *testing.T) {
	m := newModel(13)
	input(m, "a", onnx.Float, 3, 37, 29)
	input(m, "b", onnx.Float, 29, 41)
	input(m, "c", onnx.Float, 41)
	addNode(m, "MatMul", l("a", "b"), l("y"))
	addNode(m, "Gemm", l("x2", "b", "c"), l("z"), aInt("transA", 0))
	addNode(m, "Reshape", l("a", "s"), l("x2"))
	m.Graph.Initializers = append(m.Graph.Initializers, int64s("s", 111, 29))
	output(m, "y", "z")
	g := build(t, m)
	in := GenerateInputs(g, 7)
	for _, p := range []Precision{FP64, FP32, Device} {
		want := eval(t, g, p, 1, in...)
		for _, threads := range []int{2, 3, 8, 200} {
			got := eval(t, g, p, threads, in...)
			for o := range want {
				for i := range want[o] {
					if math.Float64bits(got[o][i]) != math.Float64bits(want[o][i]) {
						t.Fatalf("%v with %d threads: output %d element %d is %g, with 1 thread %g", p, threads, o, i, got[o][i], want[o][i])
					}
				}
			}
		}
	}
}

func int64s(name string, v ...int64) *onnx.Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		u := uint64(x)
		raw = append(raw, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Int64, Dims: []int64{int64(len(v))}, Raw: raw}
}

func TestCastPrecisions(t *testing.T) {
	m := newModel(21)
	input(m, "x", onnx.Float, 4)
	addNode(m, "Cast", l("x"), l("x8"), aInt("to", int64(onnx.Float8E4M3FN)), aInt("saturate", 0))
	addNode(m, "Cast", l("x8"), l("y"), aInt("to", int64(onnx.Float)))
	addNode(m, "Cast", l("x"), l("h"), aInt("to", int64(onnx.Float16)))
	output(m, "y", "h", "x8")
	g := build(t, m)
	x := f32("x", []int64{4}, 480, 1.0625, -1000, 1+0x1p-11)
	nan := math.NaN()
	// 480 rounds to 480 > 448: NaN under the ONNX rules, but onnxruntime
	// gives 448, and so do the device's conversions and every precision.
	// 1.0625 is a tie between 1 and 1.125: to even, 1.
	tests := []struct {
		p    Precision
		y, h []float64
	}{
		{FP64, []float64{448, 1, nan, 1}, []float64{480, 1.0625, -1000, 1}},
		{FP32, []float64{448, 1, nan, 1}, []float64{480, 1.0625, -1000, 1}},
		{Device, []float64{448, 1, nan, 1}, []float64{480, 1.0625, -1000, 1}},
	}
	for _, tc := range tests {
		got := eval(t, g, tc.p, 1, x)
		if d := cmp.Diff([][]float64{tc.y, tc.h}, got[:2], cmpopts.EquateNaNs()); d != "" {
			t.Errorf("%v: mismatch (-want +got):\n%s", tc.p, d)
		}
	}
	outs, err := Eval(g, []*onnx.Tensor{x}, Options{Precision: Device})
	if err != nil {
		t.Fatal(err)
	}
	if outs[1].DType != onnx.Float16 || outs[2].DType != onnx.Float8E4M3FN {
		t.Errorf("output types %v, %v", outs[1].DType, outs[2].DType)
	}
	if d := cmp.Diff([]byte{0x7E, 0x38, 0xFF, 0x38}, outs[2].Raw); d != "" {
		t.Errorf("fp8 codes mismatch (-want +got):\n%s", d)
	}
}

// naive computes reference results for the kernel tests straight from the
// operators' definitions, in float64.
func TestKernelsAgainstDefinitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 2*3*4)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	xt := f32("x", []int64{2, 3, 4}, x...)
	at := func(i, j, k int) float64 { return float64(x[i*12+j*4+k]) }
	type kernelCase struct {
		name  string
		opset int64
		op    string
		attrs []onnx.Attr
		want  func() []float64
	}
	cases := []kernelCase{
		{"softmax axis 1", 13, "Softmax", []onnx.Attr{aInt("axis", 1)}, func() []float64 {
			y := make([]float64, 24)
			for i := 0; i < 2; i++ {
				for k := 0; k < 4; k++ {
					s := 0.0
					for j := 0; j < 3; j++ {
						s += math.Exp(at(i, j, k))
					}
					for j := 0; j < 3; j++ {
						y[i*12+j*4+k] = math.Exp(at(i, j, k)) / s
					}
				}
			}
			return y
		}},
		{"softmax coerced at axis 1", 11, "Softmax", []onnx.Attr{aInt("axis", 1)}, func() []float64 {
			y := make([]float64, 24)
			for i := 0; i < 2; i++ {
				s := 0.0
				for e := 0; e < 12; e++ {
					s += math.Exp(float64(x[i*12+e]))
				}
				for e := 0; e < 12; e++ {
					y[i*12+e] = math.Exp(float64(x[i*12+e])) / s
				}
			}
			return y
		}},
		{"logsoftmax last axis", 13, "LogSoftmax", nil, func() []float64 {
			y := make([]float64, 24)
			for r := 0; r < 6; r++ {
				s := 0.0
				for k := 0; k < 4; k++ {
					s += math.Exp(float64(x[r*4+k]))
				}
				for k := 0; k < 4; k++ {
					y[r*4+k] = float64(x[r*4+k]) - math.Log(s)
				}
			}
			return y
		}},
		{"layernorm axis 1", 17, "LayerNormalization", []onnx.Attr{aInt("axis", 1)}, func() []float64 {
			y := make([]float64, 24)
			for i := 0; i < 2; i++ {
				mu, v := 0.0, 0.0
				for e := 0; e < 12; e++ {
					mu += float64(x[i*12+e]) / 12
				}
				for e := 0; e < 12; e++ {
					d := float64(x[i*12+e]) - mu
					v += d * d / 12
				}
				for e := 0; e < 12; e++ {
					y[i*12+e] = (float64(x[i*12+e]) - mu) / math.Sqrt(v+float64(float32(1e-5))) * float64(x[e])
				}
			}
			return y
		}},
		{"gelu", 20, "Gelu", nil, func() []float64 {
			y := make([]float64, 24)
			for i, v := range x {
				y[i] = float64(v) * 0.5 * math.Erfc(-float64(v)/math.Sqrt2)
			}
			return y
		}},
		{"gelu tanh", 20, "Gelu", []onnx.Attr{aString("approximate", "tanh")}, func() []float64 {
			y := make([]float64, 24)
			for i, v := range x {
				u := float64(v)
				y[i] = 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
			}
			return y
		}},
		{"reducemean axes 0 2", 13, "ReduceMean", []onnx.Attr{aInts("axes", 0, 2), aInt("keepdims", 0)}, func() []float64 {
			y := make([]float64, 3)
			for j := 0; j < 3; j++ {
				for i := 0; i < 2; i++ {
					for k := 0; k < 4; k++ {
						y[j] += at(i, j, k) / 8
					}
				}
			}
			return y
		}},
		{"transpose", 13, "Transpose", []onnx.Attr{aInts("perm", 2, 0, 1)}, func() []float64 {
			var y []float64
			for k := 0; k < 4; k++ {
				for i := 0; i < 2; i++ {
					for j := 0; j < 3; j++ {
						y = append(y, at(i, j, k))
					}
				}
			}
			return y
		}},
		{"sigmoid", 13, "Sigmoid", nil, func() []float64 {
			y := make([]float64, 24)
			for i, v := range x {
				y[i] = 1 / (1 + math.Exp(-float64(v)))
			}
			return y
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(tc.opset)
			input(m, "x", onnx.Float, 2, 3, 4)
			ins := l("x")
			feeds := []*onnx.Tensor{xt}
			if tc.op == "LayerNormalization" {
				// Scale: the first 12 values of x, no bias.
				input(m, "s", onnx.Float, 3, 4)
				ins = append(ins, "s")
				feeds = append(feeds, f32("s", []int64{3, 4}, x[:12]...))
			}
			addNode(m, tc.op, ins, l("y"), tc.attrs...)
			output(m, "y")
			g := build(t, m)
			got := eval(t, g, FP64, 1, feeds...)[0]
			if d := cmp.Diff(tc.want(), got, cmpopts.EquateApprox(1e-12, 1e-12)); d != "" {
				t.Errorf("fp64 mismatch (-want +got):\n%s", d)
			}
			// FP32 and Device land within the error bound of FP64.
			bounds, err := ErrorBounds(g, feeds)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []Precision{FP32, Device} {
				v := eval(t, g, p, 1, feeds...)[0]
				if msg := within(v, bounds[0].Ref, bounds[0].Err, func(e float64) float64 { return e }); msg != "" {
					t.Errorf("%v: %s", p, msg)
				}
			}
		})
	}
}

func TestBinaryBroadcast(t *testing.T) {
	m := newModel(14)
	input(m, "a", onnx.Float, 2, 1)
	input(m, "b", onnx.Float, 3)
	for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"} {
		addNode(m, op, l("a", "b"), l(op))
		output(m, op)
	}
	g := build(t, m)
	a := f32("a", []int64{2, 1}, 2, -3)
	b := f32("b", []int64{3}, 1, 2, -0.5)
	got := eval(t, g, FP32, 1, a, b)
	want := [][]float64{
		{3, 4, 1.5, -2, -1, -3.5},
		{1, 0, 2.5, -4, -5, -2.5},
		{2, 4, -1, -3, -6, 1.5},
		{2, 1, -4, -3, -1.5, 6},
		{2, 4, float64(float32(1 / math.Sqrt2)), -3, 9, math.NaN()},
		{2, 2, 2, 1, 2, -0.5},
		{1, 2, -0.5, -3, -3, -3},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateNaNs()); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
}

func TestFloat16Results(t *testing.T) {
	// Arithmetic on float16 tensors rounds each result to float16 under
	// FP32 and Device, not under FP64.
	m := newModel(13)
	input(m, "a", onnx.Float16, 1)
	input(m, "b", onnx.Float16, 1)
	addNode(m, "Add", l("a", "b"), l("y"))
	output(m, "y")
	g := build(t, m)
	h := func(v float32) *onnx.Tensor {
		b := numfmt.F32ToF16(math.Float32bits(v))
		return &onnx.Tensor{Name: "h", DType: onnx.Float16, Dims: []int64{1}, Raw: []byte{byte(b), byte(b >> 8)}}
	}
	a, b := h(1), h(0x1p-11) // 1 + 2^-11 ties to even: 1
	if got := eval(t, g, FP32, 1, a, b)[0][0]; got != 1 {
		t.Errorf("fp32: %g, want 1", got)
	}
	if got := eval(t, g, FP64, 1, a, b)[0][0]; got != 1+0x1p-11 {
		t.Errorf("fp64: %g, want 1+2^-11", got)
	}
}

func TestGenerateInputs(t *testing.T) {
	m := newModel(21)
	input(m, "x", onnx.Float, 1000)
	input(m, "h", onnx.Float16, 1000)
	input(m, "q", onnx.Float8E4M3FNUZ, 1000)
	addNode(m, "Cast", l("h"), l("hf"), aInt("to", int64(onnx.Float)))
	addNode(m, "Cast", l("q"), l("qf"), aInt("to", int64(onnx.Float)))
	addNode(m, "Add", l("x", "hf"), l("s"))
	addNode(m, "Add", l("s", "qf"), l("y"))
	output(m, "y")
	g := build(t, m)
	a, b := GenerateInputs(g, 42), GenerateInputs(g, 42)
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("same seed, different inputs (-want +got):\n%s", d)
	}
	if cmp.Equal(a[0].Raw, GenerateInputs(g, 43)[0].Raw) {
		t.Error("different seeds, same inputs")
	}
	if cmp.Equal(a[0].Raw[:400], a[1].Raw[:400]) {
		t.Error("inputs 0 and 1 share their values")
	}
	for i, tn := range a {
		if tn.DType != g.Inputs[i].DType || !cmp.Equal(tn.Dims, g.Inputs[i].Shape) || tn.Name != g.Inputs[i].Name {
			t.Errorf("input %d: %v %v %q", i, tn.DType, tn.Dims, tn.Name)
		}
		v, err := graph.DecodeFloats(tn)
		if err != nil {
			t.Fatal(err)
		}
		var lo, hi float64
		for _, x := range v {
			if x < -1 || x > 1 || (x == 1 && i == 0) || x != x {
				t.Fatalf("input %d: value %g outside [-1, 1)", i, x)
			}
			lo, hi = min(lo, x), max(hi, x)
		}
		if lo > -0.9 || hi < 0.9 {
			t.Errorf("input %d: values span [%g, %g], want most of [-1, 1)", i, lo, hi)
		}
	}
	// Golden: the generator must not change under the project's feet.
	if got := a[0].Raw[:8]; !cmp.Equal(got, []byte{0x36, 0x10, 0x37, 0x3f, 0xda, 0xe2, 0x6b, 0x3f}) {
		t.Errorf("first values changed: % x", got)
	}
}

func TestEvalErrors(t *testing.T) {
	m := newModel(13)
	input(m, "x", onnx.Float, 2)
	addNode(m, "Relu", l("x"), l("y"))
	output(m, "y")
	g := build(t, m)
	tests := []struct {
		name string
		in   []*onnx.Tensor
		opt  Options
		want string
	}{
		{"count", nil, Options{}, "0 input tensors, the graph has 1 inputs"},
		{"type", []*onnx.Tensor{{Name: "x", DType: onnx.Float16, Dims: []int64{2}, Raw: make([]byte, 4)}}, Options{}, `input 0 "x": element type float16, want float`},
		{"shape", []*onnx.Tensor{f32("x", []int64{1, 2}, 1, 2)}, Options{}, `input 0 "x": shape [1,2], want [2]`},
		{"short", []*onnx.Tensor{{Name: "x", DType: onnx.Float, Dims: []int64{2}, Raw: make([]byte, 4)}}, Options{}, `input 0 "x": 1 elements, want 2`},
		{"nil", []*onnx.Tensor{nil}, Options{}, `input 0 "x": no tensor`},
		{"precision", []*onnx.Tensor{f32("x", []int64{2}, 1, 2)}, Options{Precision: 7}, "unknown precision precision(7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Eval(g, tt.in, tt.opt)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	byName, err := InputsByName(g, map[string]*onnx.Tensor{"x": f32("x", []int64{2}, 1, 2)})
	if err != nil || len(byName) != 1 {
		t.Errorf("InputsByName: %v, %v", byName, err)
	}
	if _, err := InputsByName(g, map[string]*onnx.Tensor{"x": nil, "z": nil}); err == nil || !strings.Contains(err.Error(), `"z" is not a graph input`) {
		t.Errorf("InputsByName with an extra tensor: %v", err)
	}
}

func TestPrecisionNames(t *testing.T) {
	for _, p := range []Precision{FP64, FP32, Device} {
		q, err := ParsePrecision(p.String())
		if err != nil || q != p {
			t.Errorf("ParsePrecision(%q) = %v, %v", p.String(), q, err)
		}
	}
	if _, err := ParsePrecision("bf16"); err == nil {
		t.Error("ParsePrecision accepted bf16")
	}
}

func TestFP64Outputs(t *testing.T) {
	m := newModel(13)
	input(m, "x", onnx.Float, 1)
	addNode(m, "Div", l("x", "x3"), l("y"))
	addNode(m, "Constant", nil, l("x3"), onnx.Attr{Name: "value_float", Type: onnx.AttrFloat, F: 3})
	output(m, "y")
	g := build(t, m)
	outs, err := Eval(g, []*onnx.Tensor{f32("x", []int64{1}, 1)}, Options{Precision: FP64})
	if err != nil {
		t.Fatal(err)
	}
	v, err := outs[0].Float64s()
	if err != nil || outs[0].DType != onnx.Double || v[0] != 1.0/3 {
		t.Errorf("fp64 output %v %v, %v; want double 1/3", outs[0].DType, v, err)
	}
}
