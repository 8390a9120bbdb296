package hostref

import (
	"math"
	"strings"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// Tests of the data-movement, logic, cast, integer and activation
// kernels and of If, on models built through graph.Build (so that the
// axes, operands and opset forms are normalized as for real models),
// against hand-computed results.

func aF(name string, v float32) onnx.Attr { return onnx.Attr{Name: name, Type: onnx.AttrFloat, F: v} }
func aG(name string, g *onnx.Graph) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrGraph, G: g}
}
func aT(name string, t *onnx.Tensor) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrTensor, T: t}
}
func i64(name string, dims []int64, v ...int64) *onnx.Tensor { return onnx.NewInt64(name, dims, v) }
func i32(name string, dims []int64, v ...int32) *onnx.Tensor { return onnx.NewInt32(name, dims, v) }
func bl(name string, dims []int64, v ...bool) *onnx.Tensor   { return onnx.NewBool(name, dims, v) }
func initT(m *onnx.Model, t *onnx.Tensor)                    { m.Graph.Initializers = append(m.Graph.Initializers, t) }

// ramp is 0, 1, ..., n-1 as float32.
func ramp(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return v
}

// kcase is one model: its output is compared at every precision with
// want (within tol, relative; 0 means bit for bit), and has type dtype
// and shape.
type kcase struct {
	name  string
	model func() *onnx.Model
	in    []*onnx.Tensor
	want  []float64
	shape []int64
	dtype onnx.DataType
	tol   float64
}

func runKernelCases(t *testing.T, cases []kcase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := build(t, c.model())
			for _, p := range []Precision{FP32, Device, FP64} {
				outs, err := Eval(g, c.in, Options{Precision: p, Threads: 1})
				if err != nil {
					t.Fatalf("%v: %v", p, err)
				}
				o := outs[0]
				want := c.dtype
				if p == FP64 && !isIntType(want) {
					want = onnx.Double
				}
				if o.DType != want || graph.ShapeString(o.Dims) != graph.ShapeString(c.shape) {
					t.Fatalf("%v: output %v%s, want %v%s", p, o.DType, graph.ShapeString(o.Dims), want, graph.ShapeString(c.shape))
				}
				got, err := valuesOf(o)
				if err != nil {
					got = floats(t, o)
				}
				if len(got) != len(c.want) {
					t.Fatalf("%v: %d elements %v, want %v", p, len(got), got, c.want)
				}
				for i := range got {
					w, x := c.want[i], got[i]
					ok := x == w || (math.IsNaN(w) && math.IsNaN(x)) || math.Abs(x-w) <= c.tol*math.Abs(w)
					if !ok {
						t.Fatalf("%v: element %d is %v, want %v (all: %v)", p, i, x, w, got)
					}
				}
			}
			// The bounds evaluate too; exact data gives exact results for
			// the exact operators.
			bounds, err := ErrorBounds(g, c.in)
			if err != nil {
				t.Fatal(err)
			}
			if c.tol == 0 {
				for i, e := range bounds[0].Err {
					if e != 0 {
						t.Errorf("bound of element %d is %g, want 0 (exact)", i, e)
					}
				}
			}
		})
	}
}

// unaryModel builds y = op(x, operands...) with x a graph input and the
// operands initializers.
func unaryModel(opset int64, op string, x *onnx.Tensor, operands []*onnx.Tensor, attrs ...onnx.Attr) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(opset)
		input(m, "x", x.DType, x.Dims...)
		ins := []string{"x"}
		for _, t := range operands {
			if t == nil {
				ins = append(ins, "")
				continue
			}
			initT(m, t)
			ins = append(ins, t.Name)
		}
		addNode(m, op, ins, l("y"), attrs...)
		output(m, "y")
		return m
	}
}

// inputsModel builds y = op(inputs...), every operand a graph input.
func inputsModel(opset int64, op string, ins []*onnx.Tensor, attrs ...onnx.Attr) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(opset)
		var names []string
		for _, t := range ins {
			input(m, t.Name, t.DType, t.Dims...)
			names = append(names, t.Name)
		}
		addNode(m, op, names, l("y"), attrs...)
		output(m, "y")
		return m
	}
}

func TestMoveKernels(t *testing.T) {
	x12 := f32("x", []int64{2, 2, 3}, ramp(12)...)
	x8 := f32("x", []int64{2, 4}, ramp(8)...)
	runKernelCases(t, []kcase{
		{name: "Gather axis -1, negative indices (computed)",
			model: inputsModel(13, "Gather", []*onnx.Tensor{x12, i64("i", []int64{2})}, aInt("axis", -1)),
			in:    []*onnx.Tensor{x12, i64("i", []int64{2}, -1, 0)},
			want:  []float64{2, 0, 5, 3, 8, 6, 11, 9}, shape: []int64{2, 2, 2}, dtype: onnx.Float},
		{name: "Gather axis 0, int32 2-D indices",
			model: inputsModel(13, "Gather", []*onnx.Tensor{f32("x", []int64{3, 2}), i32("i", []int64{2, 2})}),
			in:    []*onnx.Tensor{f32("x", []int64{3, 2}, ramp(6)...), i32("i", []int64{2, 2}, 2, 0, 1, -3)},
			want:  []float64{4, 5, 0, 1, 2, 3, 0, 1}, shape: []int64{2, 2, 2}, dtype: onnx.Float},
		{name: "Gather of int64 data with scalar index (rank drops)",
			model: inputsModel(13, "Gather", []*onnx.Tensor{i64("x", []int64{2, 3}), i64("i", []int64{})}, aInt("axis", 1)),
			in:    []*onnx.Tensor{i64("x", []int64{2, 3}, 1<<60, 2, 3, 4, 5, -(1 << 62)), i64("i", []int64{}, -1)},
			want:  []float64{3, -(1 << 62)}, shape: []int64{2}, dtype: onnx.Int64},
		{name: "Concat axis -2",
			model: inputsModel(13, "Concat", []*onnx.Tensor{f32("a", []int64{2, 1, 2}), f32("b", []int64{2, 2, 2})}, aInt("axis", -2)),
			in:    []*onnx.Tensor{f32("a", []int64{2, 1, 2}, 1, 2, 3, 4), f32("b", []int64{2, 2, 2}, 10, 11, 12, 13, 14, 15, 16, 17)},
			want:  []float64{1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17}, shape: []int64{2, 3, 2}, dtype: onnx.Float},
		{name: "Concat of bool with an empty input",
			model: inputsModel(13, "Concat", []*onnx.Tensor{bl("a", []int64{2}), bl("b", []int64{0}), bl("c", []int64{1})}, aInt("axis", 0)),
			in:    []*onnx.Tensor{bl("a", []int64{2}, true, false), bl("b", []int64{0}), bl("c", []int64{1}, true)},
			want:  []float64{1, 0, 1}, shape: []int64{3}, dtype: onnx.Bool},
		{name: "Slice negative step, clamped end, negative axis",
			model: unaryModel(13, "Slice", x8, []*onnx.Tensor{i64("s", []int64{2}, 1, -1), i64("e", []int64{2}, 2, -1000), i64("a", []int64{2}, 0, -1), i64("st", []int64{2}, 1, -2)}),
			in:    []*onnx.Tensor{x8},
			want:  []float64{7, 5}, shape: []int64{1, 2}, dtype: onnx.Float},
		{name: "Slice step 3 on rank 4",
			model: unaryModel(13, "Slice", f32("x", []int64{1, 2, 1, 7}), []*onnx.Tensor{i64("s", []int64{1}, 1), i64("e", []int64{1}, math.MaxInt64), i64("a", []int64{1}, 3), i64("st", []int64{1}, 3)}),
			in:    []*onnx.Tensor{f32("x", []int64{1, 2, 1, 7}, ramp(14)...)},
			want:  []float64{1, 4, 8, 11}, shape: []int64{1, 2, 1, 2}, dtype: onnx.Float},
		{name: "Slice to nothing",
			model: unaryModel(13, "Slice", f32("x", []int64{3}), []*onnx.Tensor{i64("s", []int64{1}, 2), i64("e", []int64{1}, 1)}),
			in:    []*onnx.Tensor{f32("x", []int64{3}, 1, 2, 3)},
			want:  []float64{}, shape: []int64{0}, dtype: onnx.Float},
		{name: "Squeeze axis -1 of int64",
			model: unaryModel(13, "Squeeze", i64("x", []int64{2, 1}), []*onnx.Tensor{i64("a", []int64{1}, -1)}),
			in:    []*onnx.Tensor{i64("x", []int64{2, 1}, 7, -8)},
			want:  []float64{7, -8}, shape: []int64{2}, dtype: onnx.Int64},
		{name: "Unsqueeze axes 0 and -1",
			model: unaryModel(13, "Unsqueeze", f32("x", []int64{3}), []*onnx.Tensor{i64("a", []int64{2}, 0, -1)}),
			in:    []*onnx.Tensor{f32("x", []int64{3}, 1, 2, 3)},
			want:  []float64{1, 2, 3}, shape: []int64{1, 3, 1}, dtype: onnx.Float},
		{name: "Expand to a higher rank",
			model: unaryModel(13, "Expand", f32("x", []int64{3, 1}), []*onnx.Tensor{i64("s", []int64{3}, 2, 1, 2)}),
			in:    []*onnx.Tensor{f32("x", []int64{3, 1}, 1, 2, 3)},
			want:  []float64{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, shape: []int64{2, 3, 2}, dtype: onnx.Float},
		{name: "Tile rank 2",
			model: unaryModel(13, "Tile", f32("x", []int64{2, 2}), []*onnx.Tensor{i64("r", []int64{2}, 2, 1)}),
			in:    []*onnx.Tensor{f32("x", []int64{2, 2}, 1, 2, 3, 4)},
			want:  []float64{1, 2, 3, 4, 1, 2, 3, 4}, shape: []int64{4, 2}, dtype: onnx.Float},
		{name: "Tile rank 4 of int32",
			model: unaryModel(13, "Tile", i32("x", []int64{1, 2, 1, 1}), []*onnx.Tensor{i64("r", []int64{4}, 2, 1, 1, 2)}),
			in:    []*onnx.Tensor{i32("x", []int64{1, 2, 1, 1}, 5, -6)},
			want:  []float64{5, 5, -6, -6, 5, 5, -6, -6}, shape: []int64{2, 2, 1, 2}, dtype: onnx.Int32},
		{name: "Tile by zero",
			model: unaryModel(13, "Tile", f32("x", []int64{2}), []*onnx.Tensor{i64("r", []int64{1}, 0)}),
			in:    []*onnx.Tensor{f32("x", []int64{2}, 1, 2)},
			want:  []float64{}, shape: []int64{0}, dtype: onnx.Float},
		{name: "Transpose of bool",
			model: unaryModel(13, "Transpose", bl("x", []int64{2, 3}), nil, aInts("perm", 1, 0)),
			in:    []*onnx.Tensor{bl("x", []int64{2, 3}, true, false, false, false, true, true)},
			want:  []float64{1, 0, 0, 1, 0, 1}, shape: []int64{3, 2}, dtype: onnx.Bool},
		{name: "Reshape of int64",
			model: unaryModel(13, "Reshape", i64("x", []int64{2, 2}), []*onnx.Tensor{i64("s", []int64{1}, -1)}),
			in:    []*onnx.Tensor{i64("x", []int64{2, 2}, 1, 2, 3, 1<<62)},
			want:  []float64{1, 2, 3, 1 << 62}, shape: []int64{4}, dtype: onnx.Int64},
	})
}

func TestSplitKernel(t *testing.T) {
	for _, c := range []struct {
		name  string
		model func() *onnx.Model
		x     *onnx.Tensor
		want  [][]float64
	}{
		{"sizes along -1", func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 5)
			initT(m, i64("s", []int64{2}, 2, 3))
			addNode(m, "Split", l("x", "s"), l("a", "b"), aInt("axis", -1))
			output(m, "a", "b")
			return m
		}, f32("x", []int64{5}, ramp(5)...), [][]float64{{0, 1}, {2, 3, 4}}},
		{"equal parts along 1 of int64, rank 3", func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Int64, 2, 4, 1)
			addNode(m, "Split", l("x"), l("a", "b"), aInt("axis", 1))
			output(m, "a", "b")
			return m
		}, i64("x", []int64{2, 4, 1}, 0, 1, 2, 3, 4, 5, 6, 7), [][]float64{{0, 1, 4, 5}, {2, 3, 6, 7}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := build(t, c.model())
			outs, err := Eval(g, []*onnx.Tensor{c.x}, Options{Precision: Device})
			if err != nil {
				t.Fatal(err)
			}
			for k, o := range outs {
				got, err := valuesOf(o)
				if err != nil {
					t.Fatal(err)
				}
				if graph.ShapeString([]int64{int64(len(got))}) != graph.ShapeString([]int64{int64(len(c.want[k]))}) {
					t.Fatalf("output %d: %v, want %v", k, got, c.want[k])
				}
				for i := range got {
					if got[i] != c.want[k][i] {
						t.Fatalf("output %d: %v, want %v", k, got, c.want[k])
					}
				}
			}
		})
	}
}

func TestLogicKernels(t *testing.T) {
	nan := float32(math.NaN())
	runKernelCases(t, []kcase{
		{name: "Where broadcast of a [2,1] condition, a [1,3] and a scalar",
			model: inputsModel(13, "Where", []*onnx.Tensor{bl("c", []int64{2, 1}), f32("a", []int64{1, 3}), f32("b", []int64{})}),
			in:    []*onnx.Tensor{bl("c", []int64{2, 1}, true, false), f32("a", []int64{1, 3}, 1, 2, 3), f32("b", []int64{}, -1)},
			want:  []float64{1, 2, 3, -1, -1, -1}, shape: []int64{2, 3}, dtype: onnx.Float},
		{name: "Where on int64",
			model: inputsModel(13, "Where", []*onnx.Tensor{bl("c", []int64{3}), i64("a", []int64{3}), i64("b", []int64{1})}),
			in:    []*onnx.Tensor{bl("c", []int64{3}, false, true, false), i64("a", []int64{3}, 1, 1<<61, 3), i64("b", []int64{1}, -(1 << 59))},
			want:  []float64{-(1 << 59), 1 << 61, -(1 << 59)}, shape: []int64{3}, dtype: onnx.Int64},
		{name: "Equal of int64 beyond 2^53",
			model: inputsModel(13, "Equal", []*onnx.Tensor{i64("a", []int64{2}), i64("b", []int64{})}),
			in:    []*onnx.Tensor{i64("a", []int64{2}, 1<<60, 1<<60+1), i64("b", []int64{}, 1<<60+1)},
			want:  []float64{0, 1}, shape: []int64{2}, dtype: onnx.Bool},
		{name: "Greater with NaN and broadcast",
			model: inputsModel(13, "Greater", []*onnx.Tensor{f32("a", []int64{2, 1}), f32("b", []int64{3})}),
			in:    []*onnx.Tensor{f32("a", []int64{2, 1}, 1, nan), f32("b", []int64{3}, 0, 1, 2)},
			want:  []float64{1, 0, 0, 0, 0, 0}, shape: []int64{2, 3}, dtype: onnx.Bool},
		{name: "GreaterOrEqual of int32",
			model: inputsModel(13, "GreaterOrEqual", []*onnx.Tensor{i32("a", []int64{3}), i32("b", []int64{3})}),
			in:    []*onnx.Tensor{i32("a", []int64{3}, -1, 2, 3), i32("b", []int64{3}, 0, 2, 2)},
			want:  []float64{0, 1, 1}, shape: []int64{3}, dtype: onnx.Bool},
		{name: "Less", model: inputsModel(13, "Less", []*onnx.Tensor{f32("a", []int64{3}), f32("b", []int64{3})}),
			in:   []*onnx.Tensor{f32("a", []int64{3}, -1, 2, nan), f32("b", []int64{3}, 0, 2, 2)},
			want: []float64{1, 0, 0}, shape: []int64{3}, dtype: onnx.Bool},
		{name: "LessOrEqual", model: inputsModel(13, "LessOrEqual", []*onnx.Tensor{i64("a", []int64{3}), i64("b", []int64{3})}),
			in:   []*onnx.Tensor{i64("a", []int64{3}, -1, 2, 3), i64("b", []int64{3}, 0, 2, 2)},
			want: []float64{1, 1, 0}, shape: []int64{3}, dtype: onnx.Bool},
		{name: "And", model: inputsModel(13, "And", []*onnx.Tensor{bl("a", []int64{2, 2}), bl("b", []int64{2})}),
			in:   []*onnx.Tensor{bl("a", []int64{2, 2}, true, true, false, false), bl("b", []int64{2}, true, false)},
			want: []float64{1, 0, 0, 0}, shape: []int64{2, 2}, dtype: onnx.Bool},
		{name: "Or", model: inputsModel(13, "Or", []*onnx.Tensor{bl("a", []int64{2, 2}), bl("b", []int64{2})}),
			in:   []*onnx.Tensor{bl("a", []int64{2, 2}, true, true, false, false), bl("b", []int64{2}, true, false)},
			want: []float64{1, 1, 1, 0}, shape: []int64{2, 2}, dtype: onnx.Bool},
		{name: "Not", model: inputsModel(13, "Not", []*onnx.Tensor{bl("a", []int64{2})}),
			in:   []*onnx.Tensor{bl("a", []int64{2}, true, false)},
			want: []float64{0, 1}, shape: []int64{2}, dtype: onnx.Bool},
		{name: "int32 Add wraps", model: inputsModel(13, "Add", []*onnx.Tensor{i32("a", []int64{2}), i32("b", []int64{})}),
			in:   []*onnx.Tensor{i32("a", []int64{2}, math.MaxInt32, -5), i32("b", []int64{}, 1)},
			want: []float64{math.MinInt32, -4}, shape: []int64{2}, dtype: onnx.Int32},
		{name: "int64 Div truncates toward zero", model: inputsModel(13, "Div", []*onnx.Tensor{i64("a", []int64{4}), i64("b", []int64{4})}),
			in:   []*onnx.Tensor{i64("a", []int64{4}, -7, 7, -7, 1<<62+1), i64("b", []int64{4}, 2, -2, -2, 1)},
			want: []float64{-3, -3, 3, 1<<62 + 1}, shape: []int64{4}, dtype: onnx.Int64},
		{name: "int64 Mul and Sub", model: inputsModel(13, "Mul", []*onnx.Tensor{i64("a", []int64{2, 1}), i64("b", []int64{2})}),
			in:   []*onnx.Tensor{i64("a", []int64{2, 1}, 3, -1), i64("b", []int64{2}, 1<<40, 5)},
			want: []float64{3 << 40, 15, -(1 << 40), -5}, shape: []int64{2, 2}, dtype: onnx.Int64},
	})
}

func TestCastKernel(t *testing.T) {
	nan := float32(math.NaN())
	cast := func(x *onnx.Tensor, to onnx.DataType) func() *onnx.Model {
		return unaryModel(13, "Cast", x, nil, aInt("to", int64(to)))
	}
	fx := f32("x", []int64{6}, -1.5, -0.5, 0.5, 2.7, -2.7, 1e9)
	bx := f32("x", []int64{4}, 0, float32(math.Copysign(0, -1)), 0.1, nan)
	big := i64("x", []int64{3}, 1<<53+1, 1<<24+1, -3)
	wrap := i64("x", []int64{3}, 1<<32+5, 1<<31, -1)
	runKernelCases(t, []kcase{
		{name: "float to int32 truncates", model: cast(fx, onnx.Int32), in: []*onnx.Tensor{fx},
			want: []float64{-1, 0, 0, 2, -2, 1e9}, shape: []int64{6}, dtype: onnx.Int32},
		{name: "float to bool", model: cast(bx, onnx.Bool), in: []*onnx.Tensor{bx},
			want: []float64{0, 0, 1, 1}, shape: []int64{4}, dtype: onnx.Bool},
		{name: "int64 to float rounds once", model: cast(big, onnx.Float), in: []*onnx.Tensor{big},
			want: []float64{1 << 53, 1 << 24, -3}, shape: []int64{3}, dtype: onnx.Float},
		{name: "int64 to int32 wraps", model: cast(wrap, onnx.Int32), in: []*onnx.Tensor{wrap},
			want: []float64{5, math.MinInt32, -1}, shape: []int64{3}, dtype: onnx.Int32},
		{name: "int64 to bool", model: cast(wrap, onnx.Bool), in: []*onnx.Tensor{wrap},
			want: []float64{1, 1, 1}, shape: []int64{3}, dtype: onnx.Bool},
		{name: "bool to float16", model: cast(bl("x", []int64{2}), onnx.Float16), in: []*onnx.Tensor{bl("x", []int64{2}, true, false)},
			want: []float64{1, 0}, shape: []int64{2}, dtype: onnx.Float16},
		{name: "int32 to int64", model: cast(i32("x", []int64{2}), onnx.Int64), in: []*onnx.Tensor{i32("x", []int64{2}, -7, math.MaxInt32)},
			want: []float64{-7, math.MaxInt32}, shape: []int64{2}, dtype: onnx.Int64},
	})
	// A NaN gives 0 and an out-of-range float its type's nearest end (ONNX
	// leaves both undefined; the device does the same within int32).
	for _, c := range []struct {
		v    float32
		to   onnx.DataType
		want int64
	}{{nan, onnx.Int32, 0}, {3e9, onnx.Int32, math.MaxInt32}, {float32(math.Inf(-1)), onnx.Int32, math.MinInt32},
		{3e9, onnx.Int64, 3e9}, {float32(math.Inf(-1)), onnx.Int64, math.MinInt64}, {1e30, onnx.Int64, math.MaxInt64}} {
		x := f32("x", []int64{1}, c.v)
		g := build(t, cast(x, c.to)())
		out, err := Eval(g, []*onnx.Tensor{x}, Options{Precision: FP32})
		if err != nil {
			t.Fatalf("cast of %v to %v: %v", c.v, c.to, err)
		}
		v, _ := out[0].Int64s()
		if c.to == onnx.Int32 {
			w, _ := out[0].Int32s()
			v = []int64{int64(w[0])}
		}
		if len(v) != 1 || v[0] != c.want {
			t.Errorf("cast of %v to %v: %v, want %d", c.v, c.to, v, c.want)
		}
	}
}

func TestKernelErrorsNameTheNode(t *testing.T) {
	// A computed index out of range and a division by zero are errors.
	g := build(t, inputsModel(13, "Gather", []*onnx.Tensor{f32("x", []int64{3}), i64("i", []int64{1})})())
	_, err := Eval(g, []*onnx.Tensor{f32("x", []int64{3}, 1, 2, 3), i64("i", []int64{1}, -4)}, Options{})
	if err == nil || !strings.Contains(err.Error(), `node "Gather_y"`) || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("Gather: error %v", err)
	}
	g = build(t, inputsModel(13, "Div", []*onnx.Tensor{i64("a", []int64{2}), i64("b", []int64{2})})())
	_, err = Eval(g, []*onnx.Tensor{i64("a", []int64{2}, 1, 2), i64("b", []int64{2}, 1, 0)}, Options{})
	if err == nil || !strings.Contains(err.Error(), `node "Div_y"`) {
		t.Errorf("Div: error %v", err)
	}
	// A graph inconsistent with its attributes gives an error, not a
	// panic.
	g = build(t, unaryModel(13, "Transpose", f32("x", []int64{2, 3}), nil, aInts("perm", 1, 0))())
	g.Nodes[0].Attrs = &graph.Transpose{Perm: []int{0, 0}}
	if _, err := Eval(g, []*onnx.Tensor{f32("x", []int64{2, 3}, ramp(6)...)}, Options{}); err == nil || !strings.Contains(err.Error(), "Transpose_y") {
		t.Errorf("bad perm: error %v", err)
	}
	g.Nodes[0].Attrs = nil
	if _, err := Eval(g, []*onnx.Tensor{f32("x", []int64{2, 3}, ramp(6)...)}, Options{}); err == nil || !strings.Contains(err.Error(), "Transpose_y") {
		t.Errorf("no attributes: error %v", err)
	}
}

func TestActivationKernels(t *testing.T) {
	e1 := math.Exp(-1)
	x := f32("x", []int64{3}, -1, 0, 2)
	const tol = 1e-6
	run := func(op string, want []float64, attrs ...onnx.Attr) kcase {
		return kcase{name: op, model: unaryModel(14, op, x, nil, attrs...), in: []*onnx.Tensor{x}, want: want, shape: []int64{3}, dtype: onnx.Float, tol: tol}
	}
	selu := func(v float64) float64 {
		const a, g = 1.6732632423543772, 1.0507009873554805
		if v > 0 {
			return g * v
		}
		return g * a * (math.Exp(v) - 1)
	}
	big := f32("x", []int64{3}, -80, 100, 0)
	halves := f32("x", []int64{3}, -2.5, 0.5, 1.5)
	runKernelCases(t, []kcase{
		run("Erf", []float64{math.Erf(-1), 0, math.Erf(2)}),
		run("LeakyRelu", []float64{-0.25, 0, 2}, aF("alpha", 0.25)),
		run("LeakyRelu", []float64{-0.01, 0, 2}),
		run("Elu", []float64{0.5 * (e1 - 1), 0, 2}, aF("alpha", 0.5)),
		run("Selu", []float64{selu(-1), 0, selu(2)}),
		run("HardSigmoid", []float64{0.3, 0.5, 0.9}),
		run("HardSigmoid", []float64{0, 0.25, 1}, aF("alpha", 1), aF("beta", 0.25)),
		run("HardSwish", []float64{-1 * (1.0/-6 + 0.5), 0, 2 * (2.0/6 + 0.5)}),
		run("Softplus", []float64{math.Log1p(e1), math.Ln2, 2 + math.Log1p(math.Exp(-2))}),
		{name: "Softplus far out", model: unaryModel(13, "Softplus", big, nil), in: []*onnx.Tensor{big},
			want: []float64{math.Exp(-80), 100, math.Ln2}, shape: []int64{3}, dtype: onnx.Float, tol: tol},
		{name: "Log", model: unaryModel(13, "Log", f32("x", []int64{3}, 1, 0, -1), nil),
			in:   []*onnx.Tensor{f32("x", []int64{3}, 1, 0, -1)},
			want: []float64{0, math.Inf(-1), math.NaN()}, shape: []int64{3}, dtype: onnx.Float, tol: tol},
		{name: "Clip with bounds", model: unaryModel(13, "Clip", x, []*onnx.Tensor{f32("lo", []int64{}, -0.5), f32("hi", []int64{}, 1)}),
			in: []*onnx.Tensor{x}, want: []float64{-0.5, 0, 1}, shape: []int64{3}, dtype: onnx.Float},
		{name: "Floor", model: unaryModel(13, "Floor", halves, nil), in: []*onnx.Tensor{halves}, want: []float64{-3, 0, 1}, shape: []int64{3}, dtype: onnx.Float},
		{name: "Ceil", model: unaryModel(13, "Ceil", halves, nil), in: []*onnx.Tensor{halves}, want: []float64{-2, 1, 2}, shape: []int64{3}, dtype: onnx.Float},
		{name: "Round", model: unaryModel(13, "Round", halves, nil), in: []*onnx.Tensor{halves}, want: []float64{-2, 0, 2}, shape: []int64{3}, dtype: onnx.Float},
		{name: "Sign", model: unaryModel(13, "Sign", x, nil), in: []*onnx.Tensor{x}, want: []float64{-1, 0, 1}, shape: []int64{3}, dtype: onnx.Float},
	})
}

func TestVariadicAndReduceKernels(t *testing.T) {
	nan := float32(math.NaN())
	ins := []*onnx.Tensor{f32("a", []int64{2, 1}, 1, 2), f32("b", []int64{3}, 10, 20, 30), f32("c", []int64{}, 0.5)}
	decl := []*onnx.Tensor{f32("a", []int64{2, 1}), f32("b", []int64{3}), f32("c", []int64{})}
	x := f32("x", []int64{2, 3}, 3, -1, 7, 2, nan, 0)
	xi := i64("x", []int64{2, 1, 3}, 5, -(1 << 60), 7, 1<<60, 0, -2)
	runKernelCases(t, []kcase{
		{name: "Sum broadcast", model: inputsModel(13, "Sum", decl), in: ins,
			want: []float64{11.5, 21.5, 31.5, 12.5, 22.5, 32.5}, shape: []int64{2, 3}, dtype: onnx.Float, tol: 1e-7},
		{name: "Mean broadcast", model: inputsModel(13, "Mean", decl), in: ins,
			want: []float64{11.5 / 3, 21.5 / 3, 31.5 / 3, 12.5 / 3, 22.5 / 3, 32.5 / 3}, shape: []int64{2, 3}, dtype: onnx.Float, tol: 1e-6},
		{name: "Sum of one", model: inputsModel(13, "Sum", decl[:1]), in: ins[:1],
			want: []float64{1, 2}, shape: []int64{2, 1}, dtype: onnx.Float},
		{name: "ReduceMax axis -1 keepdims 0 with NaN", model: unaryModel(13, "ReduceMax", x, nil, aInts("axes", -1), aInt("keepdims", 0)),
			in: []*onnx.Tensor{x}, want: []float64{7, math.NaN()}, shape: []int64{2}, dtype: onnx.Float},
		{name: "ReduceMin axis 0", model: unaryModel(13, "ReduceMin", x, nil, aInts("axes", 0)),
			in: []*onnx.Tensor{x}, want: []float64{2, math.NaN(), 0}, shape: []int64{1, 3}, dtype: onnx.Float},
		{name: "ReduceMax of int64, axes -1 and 0", model: unaryModel(13, "ReduceMax", xi, nil, aInts("axes", -1, 0), aInt("keepdims", 0)),
			in: []*onnx.Tensor{xi}, want: []float64{1 << 60}, shape: []int64{1}, dtype: onnx.Int64},
		{name: "ReduceMin of int64, all axes (opset 18, no axes operand)", model: unaryModel(18, "ReduceMin", xi, nil),
			in: []*onnx.Tensor{xi}, want: []float64{-(1 << 60)}, shape: []int64{1, 1, 1}, dtype: onnx.Int64},
		{name: "ReduceMax of an empty axis", model: unaryModel(13, "ReduceMax", f32("x", []int64{2, 0}), nil, aInts("axes", 1)),
			in: []*onnx.Tensor{f32("x", []int64{2, 0})}, want: []float64{math.Inf(-1), math.Inf(-1)}, shape: []int64{2, 1}, dtype: onnx.Float},
	})
}

// ifModel: y = If(c) then x + k (an outer input and a branch constant,
// with an int64 second output computed from an outer int64 input) else
// Neg(x) (and the outer int64 input as is); c is computed at run time
// from the input flag.
func ifModel() *onnx.Model {
	m := newModel(13)
	input(m, "x", onnx.Float, 2, 2)
	input(m, "ids", onnx.Int64, 2)
	input(m, "flag", onnx.Float)
	initT(m, f32("zero", []int64{}, 0))
	then := &onnx.Graph{Name: "then", Nodes: []onnx.Node{
		{Name: "k", OpType: "Constant", Outputs: l("k"), Attrs: []onnx.Attr{aT("value", f32("", []int64{2}, 10, 20))}},
		{Name: "tadd", OpType: "Add", Inputs: l("x", "k"), Outputs: l("t")},
		{Name: "tone", OpType: "Constant", Outputs: l("one"), Attrs: []onnx.Attr{aT("value", i64("", []int64{}, 1))}},
		{Name: "tids", OpType: "Add", Inputs: l("ids", "one"), Outputs: l("ti")},
	}, Outputs: []onnx.ValueInfo{{Name: "t"}, {Name: "ti"}}}
	els := &onnx.Graph{Name: "else", Nodes: []onnx.Node{
		{Name: "eneg", OpType: "Neg", Inputs: l("x"), Outputs: l("e")},
		{Name: "eid", OpType: "Identity", Inputs: l("ids"), Outputs: l("ei")},
	}, Outputs: []onnx.ValueInfo{{Name: "e"}, {Name: "ei"}}}
	addNode(m, "Greater", l("flag", "zero"), l("c"))
	addNode(m, "If", l("c"), l("y", "yi"), aG("then_branch", then), aG("else_branch", els))
	output(m, "y", "yi")
	return m
}

func TestIfRuntimeCondition(t *testing.T) {
	g := build(t, ifModel())
	isIf := false
	for _, n := range g.Nodes {
		isIf = isIf || n.Op == "If"
	}
	if !isIf {
		t.Fatalf("the If was not kept as a node:\n%s", g)
	}
	x := f32("x", []int64{2, 2}, 1, 2, 3, 4)
	ids := i64("ids", []int64{2}, 1<<60, -1)
	for _, c := range []struct {
		flag     float32
		want     []float64
		wantInts []int64
	}{
		{1, []float64{11, 22, 13, 24}, []int64{1<<60 + 1, 0}},
		{-1, []float64{-1, -2, -3, -4}, []int64{1 << 60, -1}},
	} {
		for _, p := range []Precision{FP32, Device, FP64} {
			outs, err := Eval(g, []*onnx.Tensor{x, ids, f32("flag", []int64{}, c.flag)}, Options{Precision: p})
			if err != nil {
				t.Fatalf("flag %v %v: %v", c.flag, p, err)
			}
			y := floats(t, outs[0])
			v, err := outs[1].Int64s()
			if err != nil {
				t.Fatalf("flag %v %v: second output: %v", c.flag, p, err)
			}
			if len(y) != len(c.want) || len(v) != len(c.wantInts) {
				t.Fatalf("flag %v %v: %v %v, want %v %v", c.flag, p, y, v, c.want, c.wantInts)
			}
			for i := range c.want {
				if y[i] != c.want[i] || v[i/2] != c.wantInts[i/2] {
					t.Fatalf("flag %v %v: %v %v, want %v %v", c.flag, p, y, v, c.want, c.wantInts)
				}
			}
		}
		b, err := ErrorBounds(g, []*onnx.Tensor{x, ids, f32("flag", []int64{}, c.flag)})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range b[1].Err {
			if e != 0 || b[1].Ref[i] != float64(c.wantInts[i]) {
				t.Errorf("flag %v: bound of int output %d: %g around %g", c.flag, i, e, b[1].Ref[i])
			}
		}
		if math.IsInf(b[0].Err[0], 1) {
			t.Errorf("flag %v: the taken branch's output is unbounded", c.flag)
		}
	}
}
