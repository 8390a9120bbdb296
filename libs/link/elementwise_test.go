package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/lower"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"ipu.local/libs/prog"
	"ipu.local/libs/sim"
	"ipu.local/libs/verdict"
)

// checkVerdict runs a linked model on the simulator with generated
// inputs and checks every output against the host reference at device
// precision with ipu-check's rule (verdict.Compare with the output's
// Accumulate: bit equality when 0), and every device superstep's cycles
// against the linker's.
func checkVerdict(t *testing.T, o *obj.Object, st *Stats, g *graph.Graph, seed uint64) {
	t.Helper()
	outs, res, want := runWithReference(t, o, g, seed)
	for i, w := range want {
		ot := o.Host.Outputs[i]
		r, err := verdict.Compare(ot.Name, ot.DType, ot.Accumulate, outs[i], w.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Pass {
			t.Errorf("output %q (accumulate %d): %d of %d elements wrong, first %d: got %s want %s (max error %g, tolerance %g)",
				ot.Name, ot.Accumulate, r.Bad, r.Elements, r.FirstBad, r.Got, r.Want, r.MaxAbsError, r.Tolerance.Abs)
		}
	}
	checkCyclesOnly(t, st, res)
}

// linkedInputs plans and links data on tiles, failing the test on an
// error, and generates its inputs from seed: the object, the link's
// figures, the graph, the inputs and their bytes (the tensors' own).
func linkedInputs(t *testing.T, data []byte, tiles int, seed uint64) (*obj.Object, *Stats, *graph.Graph, []*onnx.Tensor, [][]byte) {
	t.Helper()
	o, st, g, err := planLink(t, data, tiles)
	if err != nil {
		t.Fatal(err)
	}
	ins := hostref.GenerateInputs(g, seed)
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	return o, st, g, ins, raw
}

// runWithReference simulates a linked model on inputs generated from
// seed and computes the host reference at device precision on the same
// inputs.
func runWithReference(t *testing.T, o *obj.Object, g *graph.Graph, seed uint64) ([][]byte, *sim.RunResult, []*onnx.Tensor) {
	t.Helper()
	ins := hostref.GenerateInputs(g, seed)
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	outs, res := runObject(t, o, raw)
	want, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return outs, res, want
}

// checkCyclesOnly checks every simulated device superstep's cycles
// against the linker's.
func checkCyclesOnly(t *testing.T, st *Stats, res *sim.RunResult) {
	t.Helper()
	if len(res.Phases) != len(st.Supersteps) {
		t.Fatalf("simulator ran %d supersteps, the linker costed %d", len(res.Phases), len(st.Supersteps))
	}
	var simCycles int64
	for i, ph := range res.Phases {
		s := st.Supersteps[i]
		if s.Kind == obj.HostExchange {
			continue
		}
		simCycles += ph.Cycles + ph.SyncCycles
		if ph.Cycles != s.Cycles {
			t.Errorf("superstep %d (%s): simulated %d cycles, costed %d", i, s.Name, ph.Cycles, s.Cycles)
		}
	}
	if simCycles != st.FinalCycles {
		t.Errorf("simulated final cycles %d, costed %d", simCycles, st.FinalCycles)
	}
}

// planLink plans and links an in-memory model (2 search attempts),
// returning the link error.
func planLink(t *testing.T, data []byte, tiles int) (*obj.Object, *Stats, *graph.Graph, error) {
	t.Helper()
	_, o, st, g, err := planLinkN(t, data, tiles, 2)
	return o, st, g, err
}

// planLinkN plans an in-memory model over tiles of ipu21 with attempts
// search moves and links it, returning the link error.
func planLinkN(t testing.TB, data []byte, tiles, attempts int) (*plan.Plan, *obj.Object, *Stats, *graph.Graph, error) {
	t.Helper()
	g := modelGraph(t, data)
	p, _ := arch.Lookup("ipu21")
	pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: attempts})
	if err != nil {
		return nil, nil, nil, g, err
	}
	o, st, err := Link(pl, "test", Options{})
	return pl, o, st, g, err
}

func ramp(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = scale * float32((i*37)%23-11)
	}
	return v
}

func int64s(name string, v ...int64) *onnx.Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Int64, Dims: []int64{int64(len(v))}, Raw: raw}
}

func scalar(name string, x float32) *onnx.Tensor {
	return onnx.NewFloat32(name, []int64{}, []float32{x})
}

// nodeModels are small models of every node kind the linker lowers
// outside products, with the tile counts to link them for.
var nodeModels = []struct {
	name  string
	opset int64
	tiles []int
	build func(b *onnx.ModelBuilder)
}{
	{"unary-chain", 21, []int{1, 4, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{6, 10})
		for i, op := range []string{"Neg", "Abs", "Relu", "Exp", "Tanh", "Sigmoid"} {
			in := "x"
			if i > 0 {
				in = fmt.Sprint("u", i-1)
			}
			b.AddNode(op, op, []string{in}, []string{fmt.Sprint("u", i)})
		}
		b.AddOutput("u2", onnx.Float, []int64{6, 10})
		b.AddOutput("u5", onnx.Float, []int64{6, 10})
	}},
	{"sqrt-gelu-clip", 21, []int{3, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{7, 9})
		b.AddNode("Sqrt", "sq", []string{"x"}, []string{"s"})
		b.AddNode("Gelu", "ge", []string{"x"}, []string{"ge"})
		b.AddNode("Gelu", "gt", []string{"x"}, []string{"gt"}, onnx.StringAttr("approximate", "tanh"))
		b.AddInitializer(scalar("lo", -0.25))
		b.AddInitializer(scalar("hi", 0.5))
		b.AddNode("Clip", "cl", []string{"x", "lo", "hi"}, []string{"cl"})
		for _, o := range []string{"s", "ge", "gt", "cl"} {
			b.AddOutput(o, onnx.Float, []int64{7, 9})
		}
	}},
	{"broadcast", 21, []int{1, 5, 1472}, func(b *onnx.ModelBuilder) {
		// ort/elementwise_broadcast at another size.
		b.AddInput("x", onnx.Float, []int64{5, 12})
		b.AddInput("row", onnx.Float, []int64{12})
		b.AddInput("col", onnx.Float, []int64{5, 1})
		b.AddNode("Mul", "a", []string{"x", "row"}, []string{"a"})
		b.AddNode("Sub", "b", []string{"a", "col"}, []string{"b"})
		b.AddNode("Relu", "c", []string{"b"}, []string{"c"})
		b.AddNode("Div", "d", []string{"c", "row"}, []string{"d"})
		b.AddNode("Tanh", "e", []string{"d"}, []string{"e"})
		b.AddNode("Add", "y", []string{"e", "x"}, []string{"y"})
		b.AddOutput("y", onnx.Float, []int64{5, 12})
		b.AddOutput("b", onnx.Float, []int64{5, 12})
	}},
	{"scalars-consts", 21, []int{2, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{4, 6})
		b.AddInput("s", onnx.Float, []int64{1})
		b.AddInitializer(scalar("c", 1.5))
		b.AddInitializer(onnx.NewFloat32("w", []int64{4, 1}, ramp(4, 0.25)))
		b.AddInitializer(onnx.NewFloat32("w3", []int64{3, 4, 1}, ramp(12, 0.25)))
		b.AddInitializer(scalar("two", 2))
		b.AddNode("Add", "a", []string{"x", "c"}, []string{"a"})
		b.AddNode("Div", "d", []string{"c", "a"}, []string{"d"})     // constant scalar on the left
		b.AddNode("Mul", "m", []string{"s", "d"}, []string{"m"})     // input scalar on the left
		b.AddNode("Sub", "w", []string{"m", "w"}, []string{"ws"})    // [4,6] - [4,1]
		b.AddNode("Pow", "p2", []string{"ws", "two"}, []string{"p"}) // constant exponent
		b.AddNode("Sub", "w3", []string{"x", "w3"}, []string{"w3y"}) // [4,6] - [3,4,1] -> [3,4,6]
		b.AddNode("Abs", "ab", []string{"x"}, []string{"ax"})
		b.AddNode("Pow", "pa", []string{"ax", "x"}, []string{"pa"})  // arrays
		b.AddNode("Add", "one", []string{"s", "c"}, []string{"one"}) // one element
		b.AddOutput("p", onnx.Float, []int64{4, 6})
		b.AddOutput("w3y", onnx.Float, []int64{3, 4, 6})
		b.AddOutput("pa", onnx.Float, []int64{4, 6})
		b.AddOutput("one", onnx.Float, []int64{1})
	}},
	{"variadic", 21, []int{1, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("a", onnx.Float, []int64{3, 8})
		b.AddInput("b", onnx.Float, []int64{8})
		b.AddInitializer(onnx.NewFloat32("c", []int64{3, 1}, []float32{0.25, -0.5, 0}))
		b.AddNode("Max", "mx", []string{"a", "b", "c"}, []string{"mx"})
		b.AddNode("Min", "mn", []string{"b", "a"}, []string{"mn"})
		b.AddNode("Max", "one", []string{"mn"}, []string{"id"})
		b.AddOutput("mx", onnx.Float, []int64{3, 8})
		b.AddOutput("id", onnx.Float, []int64{3, 8})
	}},
	{"casts", 21, []int{1, 7, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{6, 16})
		b.AddInput("h", onnx.Float16, []int64{6, 16})
		b.AddNode("Cast", "xh", []string{"x"}, []string{"xh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddNode("Cast", "xf", []string{"xh"}, []string{"xf"}, onnx.IntAttr("to", int64(onnx.Float)))
		b.AddNode("Cast", "x8", []string{"x"}, []string{"x8"}, onnx.IntAttr("to", int64(onnx.Float8E5M2)), onnx.IntAttr("saturate", 0))
		b.AddNode("Cast", "x8f", []string{"x8"}, []string{"x8f"}, onnx.IntAttr("to", int64(onnx.Float)))
		b.AddNode("Cast", "hf", []string{"h"}, []string{"hf"}, onnx.IntAttr("to", int64(onnx.Float)))
		b.AddNode("Relu", "hr", []string{"hf"}, []string{"hr"})
		b.AddNode("Cast", "h8", []string{"h"}, []string{"h8"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
		b.AddNode("Cast", "same", []string{"hr"}, []string{"same"}, onnx.IntAttr("to", int64(onnx.Float)))
		b.AddOutput("xh", onnx.Float16, []int64{6, 16})
		b.AddOutput("xf", onnx.Float, []int64{6, 16})
		b.AddOutput("x8", onnx.Float8E5M2, []int64{6, 16})
		b.AddOutput("x8f", onnx.Float, []int64{6, 16})
		b.AddOutput("same", onnx.Float, []int64{6, 16})
		b.AddOutput("h8", onnx.Float8E4M3FN, []int64{6, 16})
	}},
	{"cast-odd-rows", 21, []int{4, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{8, 3})
		b.AddNode("Cast", "c", []string{"x"}, []string{"y"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
		b.AddOutput("y", onnx.Float8E4M3FN, []int64{8, 3})
	}},
	{"cast-1d", 21, []int{16, 1472}, func(b *onnx.ModelBuilder) {
		// ort/cast_fp8_*, smaller: one row, spread in pieces.
		b.AddInput("x", onnx.Float, []int64{4100})
		b.AddNode("Cast", "q", []string{"x"}, []string{"q"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FNUZ)), onnx.IntAttr("saturate", 0))
		b.AddNode("Cast", "y", []string{"q"}, []string{"y"}, onnx.IntAttr("to", int64(onnx.Float)))
		b.AddOutput("y", onnx.Float, []int64{4100})
	}},
	{"softmax", 21, []int{1, 4, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{10, 20})
		b.AddInput("z", onnx.Float, []int64{2, 3, 4, 5})
		b.AddNode("Softmax", "sm", []string{"x"}, []string{"sm"})
		b.AddNode("LogSoftmax", "ls", []string{"x"}, []string{"ls"})
		b.AddNode("Neg", "nz", []string{"z"}, []string{"nz"})
		b.AddNode("Softmax", "sz", []string{"nz"}, []string{"sz"}) // odd rows
		b.AddNode("LogSoftmax", "lz", []string{"z"}, []string{"lz"})
		b.AddOutput("sm", onnx.Float, []int64{10, 20})
		b.AddOutput("ls", onnx.Float, []int64{10, 20})
		b.AddOutput("sz", onnx.Float, []int64{2, 3, 4, 5})
		b.AddOutput("lz", onnx.Float, []int64{2, 3, 4, 5})
	}},
	{"softmax-coerce2d", 11, []int{1, 3, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{2, 3, 5})
		b.AddNode("Softmax", "sm", []string{"x"}, []string{"sm"}, onnx.IntAttr("axis", 1)) // rows of 15
		b.AddNode("Relu", "r", []string{"x"}, []string{"r"})
		b.AddNode("LogSoftmax", "ls", []string{"r"}, []string{"ls"}, onnx.IntAttr("axis", 0)) // one row of 30
		b.AddOutput("sm", onnx.Float, []int64{2, 3, 5})
		b.AddOutput("ls", onnx.Float, []int64{2, 3, 5})
	}},
	{"layernorm", 21, []int{1, 4, 1472}, func(b *onnx.ModelBuilder) {
		// ort/layernorm_residual, and odd rows with an input scale and
		// the statistics.
		b.AddInput("x", onnx.Float, []int64{8, 32})
		b.AddInput("res", onnx.Float, []int64{8, 32})
		b.AddInitializer(onnx.NewFloat32("gamma", []int64{32}, ramp(32, 0.125)))
		b.AddInitializer(onnx.NewFloat32("beta", []int64{32}, ramp(32, -0.0625)))
		b.AddNode("Add", "a", []string{"x", "res"}, []string{"a"})
		b.AddNode("LayerNormalization", "ln", []string{"a", "gamma", "beta"}, []string{"y"}, onnx.FloatAttr("epsilon", 1e-5))
		b.AddInput("z", onnx.Float, []int64{2, 3, 5})
		b.AddInput("g", onnx.Float, []int64{5})
		b.AddNode("LayerNormalization", "lz", []string{"z", "g"}, []string{"yz"})
		b.AddInitializer(onnx.NewFloat32("g2", []int64{3, 1}, []float32{0.5, -1, 2}))
		b.AddNode("LayerNormalization", "l2", []string{"z", "g2"}, []string{"y2"}, onnx.IntAttr("axis", -2))
		b.AddOutput("y", onnx.Float, []int64{8, 32})
		b.AddOutput("yz", onnx.Float, []int64{2, 3, 5})
		b.AddOutput("y2", onnx.Float, []int64{2, 3, 5})
	}},
	{"layernorm-spread", 21, []int{16, 1472}, func(b *onnx.ModelBuilder) {
		// Rows few against the tiles: each spread over a group of tiles
		// (FP32 in blocks of 64 columns; FP16 in 68, 68 and 64, its
		// scale and bias FP16 constants, TestLayerNormSpreadF32Vectors).
		b.AddInput("x", onnx.Float, []int64{4, 256})
		b.AddInput("res", onnx.Float, []int64{4, 256})
		b.AddInitializer(onnx.NewFloat32("gamma", []int64{256}, ramp(256, 0.125)))
		b.AddInitializer(onnx.NewFloat32("beta", []int64{256}, ramp(256, -0.0625)))
		b.AddNode("Add", "a", []string{"x", "res"}, []string{"a"})
		b.AddNode("LayerNormalization", "ln", []string{"a", "gamma", "beta"}, []string{"y"}, onnx.FloatAttr("epsilon", 1e-5))
		b.AddInput("z", onnx.Float, []int64{3, 200})
		b.AddInitializer(onnx.NewFloat32("g", []int64{200}, ramp(200, 0.25)))
		b.AddNode("Cast", "zh", []string{"z"}, []string{"zh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddNode("Cast", "gh", []string{"g"}, []string{"gh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddInitializer(onnx.NewFloat32("bz", []int64{200}, ramp(200, -0.5)))
		b.AddNode("Cast", "bh", []string{"bz"}, []string{"bh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddNode("LayerNormalization", "lh", []string{"zh", "gh", "bh"}, []string{"yh"})
		b.AddNode("LayerNormalization", "lh2", []string{"zh", "gh"}, []string{"yh2"}) // no bias
		b.AddOutput("y", onnx.Float, []int64{4, 256})
		b.AddOutput("yh", onnx.Float16, []int64{3, 200})
		b.AddOutput("yh2", onnx.Float16, []int64{3, 200})
	}},
	{"layernorm-broadcast", 21, []int{1, 16, 1472}, func(b *onnx.ModelBuilder) {
		// Scale and bias that broadcast to the row (graph's
		// canonicalization expands them): constants of one element,
		// FP32 and FP16 (spread over tiles on 16 and 1472), and a
		// scale of one element given as an input.
		b.AddInput("x", onnx.Float, []int64{3, 200})
		b.AddInitializer(onnx.NewFloat32("g1", []int64{1}, []float32{0.75}))
		b.AddInitializer(onnx.NewFloat32("b1", []int64{1}, []float32{-0.25}))
		b.AddNode("LayerNormalization", "ln", []string{"x", "g1", "b1"}, []string{"y"})
		b.AddNode("Cast", "xh", []string{"x"}, []string{"xh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddNode("Cast", "gh", []string{"g1"}, []string{"gh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddNode("Cast", "bh", []string{"b1"}, []string{"bh"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.AddNode("LayerNormalization", "lh", []string{"xh", "gh", "bh"}, []string{"yh"})
		b.AddInput("s", onnx.Float, []int64{1})
		b.AddNode("LayerNormalization", "ls", []string{"x", "s"}, []string{"ys"})
		b.AddOutput("y", onnx.Float, []int64{3, 200})
		b.AddOutput("yh", onnx.Float16, []int64{3, 200})
		b.AddOutput("ys", onnx.Float, []int64{3, 200})
	}},
	{"layernorm-spread-groups", 21, []int{60}, func(b *onnx.ModelBuilder) {
		// Rows too many for one a group of tiles: groups of 8 rows (a
		// multiple of the product's pack alignment) on 4 tiles each.
		b.AddInput("x", onnx.Float, []int64{64, 256})
		b.AddInitializer(onnx.NewFloat32("gamma", []int64{256}, ramp(256, 0.125)))
		b.AddInitializer(onnx.NewFloat32("w", []int64{256, 16}, ramp(256*16, 0.001)))
		b.AddNode("LayerNormalization", "ln", []string{"x", "gamma"}, []string{"h"})
		b.AddNode("MatMul", "mm", []string{"h", "w"}, []string{"y"})
		b.AddOutput("y", onnx.Float, []int64{64, 16})
	}},
	{"reduce", 21, []int{1, 3, 1472}, func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{4, 6})
		b.AddInput("z", onnx.Float, []int64{3, 4, 5})
		b.AddInput("w", onnx.Float, []int64{1, 2, 3, 4})
		b.AddInitializer(int64s("last", -1))
		b.AddInitializer(int64s("two", 1, 2))
		b.AddInitializer(int64s("mid", 2))
		b.AddNode("ReduceSum", "rs", []string{"x", "last"}, []string{"rs"})
		b.AddNode("ReduceMean", "rm", []string{"z", "two"}, []string{"rm"}, onnx.IntAttr("keepdims", 0))
		b.AddNode("ReduceSum", "ms", []string{"w", "mid"}, []string{"ms"}, onnx.IntAttr("keepdims", 0))
		b.AddNode("ReduceMean", "mm", []string{"w", "mid"}, []string{"mm"})
		b.AddOutput("rs", onnx.Float, []int64{4, 1})
		b.AddOutput("rm", onnx.Float, []int64{3})
		b.AddOutput("ms", onnx.Float, []int64{1, 2, 4})
		b.AddOutput("mm", onnx.Float, []int64{1, 2, 1, 4})
	}},
	{"reshapes", 21, []int{1, 3, 4, 1472}, func(b *onnx.ModelBuilder) {
		// Flatten of an input straight to an output; a flat elementwise
		// result reshaped into rows for a softmax (an exchange, or local
		// copies on one tile); size-1 transposes.
		b.AddInput("x", onnx.Float, []int64{1, 2, 3, 4})
		b.AddNode("Flatten", "f", []string{"x"}, []string{"f"})
		b.AddInput("v", onnx.Float, []int64{3, 8})
		b.AddNode("Relu", "r", []string{"v"}, []string{"r"})
		b.AddInitializer(int64s("shape", 6, 4))
		b.AddNode("Reshape", "rs", []string{"r", "shape"}, []string{"rs"})
		b.AddNode("Softmax", "sm", []string{"rs"}, []string{"sm"})
		b.AddInput("w", onnx.Float, []int64{4, 6})
		b.AddNode("Relu", "rw", []string{"w"}, []string{"rw"})
		b.AddNode("Softmax", "s6", []string{"rw"}, []string{"s6"}) // rows of 6
		b.AddNode("Reshape", "r4", []string{"rw", "shape"}, []string{"r4"})
		b.AddNode("LogSoftmax", "s4", []string{"r4"}, []string{"s4"}) // rows of 4: moved
		b.AddOutput("s6", onnx.Float, []int64{4, 6})
		b.AddOutput("s4", onnx.Float, []int64{6, 4})
		b.AddNode("Transpose", "t", []string{"x"}, []string{"t"}, onnx.IntsAttr("perm", 1, 0, 2, 3))
		b.AddNode("Exp", "e", []string{"t"}, []string{"e"})
		b.AddOutput("f", onnx.Float, []int64{1, 24})
		b.AddOutput("r", onnx.Float, []int64{3, 8})
		b.AddOutput("sm", onnx.Float, []int64{6, 4})
		b.AddOutput("e", onnx.Float, []int64{2, 1, 3, 4})
	}},
	{"node-broadcast", 21, []int{1, 3, 1472}, func(b *onnx.ModelBuilder) {
		// Node outputs broadcast: a row mean subtracted in place, a
		// row vector gathered to every tile, row sums of another layout.
		b.AddInput("x", onnx.Float, []int64{5, 8})
		b.AddInput("bin", onnx.Float, []int64{8})
		b.AddInput("z", onnx.Float, []int64{5, 2, 8})
		b.AddInitializer(int64s("last", -1))
		b.AddInitializer(int64s("two", 1, 2))
		b.AddNode("ReduceMean", "m", []string{"x", "last"}, []string{"m"}) // [5,1]
		b.AddNode("Sub", "d", []string{"x", "m"}, []string{"d"})
		b.AddNode("Mul", "q", []string{"d", "d"}, []string{"q"})
		b.AddNode("ReduceMean", "var", []string{"q", "last"}, []string{"var"})
		b.AddNode("Div", "nd", []string{"d", "var"}, []string{"nd"})
		b.AddNode("Relu", "rb", []string{"bin"}, []string{"rb"})
		b.AddNode("Add", "y", []string{"nd", "rb"}, []string{"y"})
		b.AddNode("ReduceSum", "zs", []string{"z", "two"}, []string{"zs"}) // [5,1,1]
		b.AddInitializer(int64s("s51", 5, 1))
		b.AddNode("Reshape", "zr", []string{"zs", "s51"}, []string{"zr"})
		b.AddNode("Max", "mx", []string{"zr", "rb", "x"}, []string{"mx"})
		b.AddNode("Sub", "ms", []string{"rb", "zr"}, []string{"ms"})
		b.AddOutput("y", onnx.Float, []int64{5, 8})
		b.AddOutput("mx", onnx.Float, []int64{5, 8})
		b.AddOutput("ms", onnx.Float, []int64{5, 8})
	}},
	{"node-scalar", 21, []int{1, 5, 1472}, func(b *onnx.ModelBuilder) {
		// A one-element node output as a scalar operand on every tile.
		b.AddInput("x", onnx.Float, []int64{1, 8})
		b.AddInput("z", onnx.Float, []int64{5, 8})
		b.AddInitializer(int64s("all", 0, 1))
		b.AddNode("ReduceSum", "s", []string{"x", "all"}, []string{"s"}) // [1,1]
		b.AddNode("Mul", "m", []string{"z", "s"}, []string{"m"})
		b.AddNode("Sub", "d", []string{"s", "m"}, []string{"d"})
		b.AddOutput("d", onnx.Float, []int64{5, 8})
	}},
}

func TestNodes(t *testing.T) {
	for _, tc := range nodeModels {
		b := onnx.NewModel(tc.opset)
		tc.build(b)
		data := b.Marshal()
		for _, tiles := range tc.tiles {
			t.Run(fmt.Sprintf("%s@%d", tc.name, tiles), func(t *testing.T) {
				o, st, g, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%d tiles, %d supersteps, final %d cycles (exchange %d)", st.Tiles, len(st.Supersteps), st.FinalCycles, st.FinalExchange)
				checkVerdict(t, o, st, g, 1)
				checkVerdict(t, o, st, g, 2)
			})
		}
	}
}

// TestConformanceNodes links the conformance cases made of the nodes
// lowered here and checks them against the device-precision reference.
func TestConformanceNodes(t *testing.T) {
	cases := []string{
		"onnx-pytorch/test_LogSoftmax", "onnx-pytorch/test_ReLU", "onnx-pytorch/test_Sigmoid",
		"onnx-pytorch/test_Softmax", "onnx-pytorch/test_Softmin", "onnx-pytorch/test_Softsign",
		"onnx-pytorch/test_Tanh", "onnx-pytorch/test_log_softmax_dim3", "onnx-pytorch/test_log_softmax_lastdim",
		"onnx-pytorch/test_operator_basic", "onnx-pytorch/test_operator_clip", "onnx-pytorch/test_operator_exp",
		"onnx-pytorch/test_operator_flatten", "onnx-pytorch/test_operator_max", "onnx-pytorch/test_operator_min",
		"onnx-pytorch/test_operator_params", "onnx-pytorch/test_operator_permute2", "onnx-pytorch/test_operator_pow",
		"onnx-pytorch/test_operator_reduced_mean", "onnx-pytorch/test_operator_reduced_mean_keepdim",
		"onnx-pytorch/test_operator_reduced_sum", "onnx-pytorch/test_operator_reduced_sum_keepdim",
		"onnx-pytorch/test_operator_sqrt", "onnx-pytorch/test_operator_view", "onnx-pytorch/test_softmax_functional_dim3",
		"onnx-pytorch/test_softmax_lastdim",
		"ort/cast_fp8_nosaturate", "ort/cast_fp8_saturate", "ort/elementwise_broadcast", "ort/layernorm_residual",
	}
	for _, c := range cases {
		for _, tiles := range []int{1472, 16} {
			t.Run(fmt.Sprintf("%s@%d", filepath.Base(c), tiles), func(t *testing.T) {
				_, o, st, g := linkModel(t, conformanceModel(t, c), "ipu21", tiles)
				checkVerdict(t, o, st, g, 1)
			})
		}
	}
}

// TestNotLowered checks that what the nodes cannot do is a
// NotLoweredError naming why.
// TestAnyLayout links models that the linker once refused (transposes
// that move elements, softmax along a leading axis, FLOAT16 arithmetic,
// broadcasts of single values from nodes, FP8 rows, reductions over
// scattered axes) and checks them against the host reference at several
// tile counts.
func TestAnyLayout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *onnx.ModelBuilder)
		why   string
	}{
		{"transpose", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{3, 4})
			b.AddNode("Transpose", "t", []string{"x"}, []string{"y"}, onnx.IntsAttr("perm", 1, 0))
			b.AddOutput("y", onnx.Float, []int64{4, 3})
		}, "a transpose that moves elements"},
		{"softmax-axis", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{3, 4})
			b.AddNode("Softmax", "s", []string{"x"}, []string{"y"}, onnx.IntAttr("axis", 0))
			b.AddOutput("y", onnx.Float, []int64{3, 4})
		}, "along axis 0 of 2"},
		{"float16-add", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float16, []int64{3, 4})
			b.AddNode("Add", "a", []string{"x", "x"}, []string{"y"})
			b.AddOutput("y", onnx.Float16, []int64{3, 4})
		}, "output \"y\" of type float16"},
		{"node-broadcast-singles", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{3, 1})
			b.AddInput("s", onnx.Float, []int64{1})
			b.AddInput("z", onnx.Float, []int64{3, 4})
			b.AddNode("Exp", "e", []string{"x"}, []string{"e"})
			b.AddNode("Exp", "f", []string{"s"}, []string{"f"})
			b.AddNode("Max", "m", []string{"e", "f", "z"}, []string{"y"})
			b.AddOutput("y", onnx.Float, []int64{3, 4})
		}, "both operands of its first kernel are single values in each row"},
		{"fp8-rows", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{8, 3})
			b.AddNode("Softmax", "s", []string{"x"}, []string{"s"})
			b.AddNode("Cast", "c", []string{"s"}, []string{"y"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
			b.AddOutput("y", onnx.Float8E4M3FN, []int64{8, 3})
		}, "output \"y\": a stretch of 3 float8e4m3fn elements at element 0 is not a whole number of aligned 32-bit words"},
		{"reduce-axes", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{2, 3, 4})
			b.AddInitializer(int64s("axes", 0, 2))
			b.AddNode("ReduceSum", "r", []string{"x", "axes"}, []string{"y"})
			b.AddOutput("y", onnx.Float, []int64{1, 3, 1})
		}, "axes [0 2] are not consecutive"},
	} {
		for _, tiles := range []int{1, 4, 64} {
			t.Run(fmt.Sprintf("%s@%d", tc.name, tiles), func(t *testing.T) {
				b := onnx.NewModel(21)
				tc.build(b)
				o, st, g, err := planLink(t, b.Marshal(), tiles)
				if err != nil {
					t.Fatal(err)
				}
				checkModel(t, o, st, g)
			})
		}
	}
}

// TestNotLowered checks what the linker still refuses, and that it says
// why.
func TestNotLowered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *onnx.ModelBuilder)
		why   string
	}{
		{"fp8-transpose", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{8, 12})
			b.AddNode("Relu", "r", []string{"x"}, []string{"r"})
			b.AddNode("Cast", "c", []string{"r"}, []string{"c"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
			b.AddNode("Transpose", "t", []string{"c"}, []string{"y"}, onnx.IntsAttr("perm", 1, 0))
			b.AddOutput("y", onnx.Float8E4M3FN, []int64{12, 8})
		}, "a transpose of 1-byte elements that moves the innermost axis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := onnx.NewModel(21)
			tc.build(b)
			_, _, _, err := planLink(t, b.Marshal(), 4)
			var nl *NotLoweredError
			if !errors.As(err, &nl) {
				t.Fatalf("got %v, want a NotLoweredError", err)
			}
			if !contains(nl.Why, tc.why) {
				t.Errorf("why %q, want it to say %q", nl.Why, tc.why)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestLayerNormStats plans and links a LayerNormalization with its Mean
// and InvStdDev outputs.
// TestLayerNormSpreadF32Vectors checks that a LayerNormalization
// spread over tiles with FP16 constant scale and bias loads FP32 copies
// of each tile's columns (lower's spreadVecsF32): the launches read
// FP32 vectors, each tile's copy holds its columns' values exactly, and
// the model checks against the reference on all tiles and on 16.
func TestLayerNormSpreadF32Vectors(t *testing.T) {
	b := onnx.NewModel(21)
	b.AddInput("z", onnx.Float, []int64{3, 200})
	g32, b32 := ramp(200, 0.25), ramp(200, -0.5)
	b.AddInitializer(onnx.NewFloat32("g", []int64{200}, g32))
	b.AddInitializer(onnx.NewFloat32("bz", []int64{200}, b32))
	b.AddNode("Cast", "zh", []string{"z"}, []string{"zh"}, onnx.IntAttr("to", int64(onnx.Float16)))
	b.AddNode("Cast", "gh", []string{"g"}, []string{"gh"}, onnx.IntAttr("to", int64(onnx.Float16)))
	b.AddNode("Cast", "bh", []string{"bz"}, []string{"bh"}, onnx.IntAttr("to", int64(onnx.Float16)))
	b.AddNode("LayerNormalization", "lh", []string{"zh", "gh", "bh"}, []string{"yh"})
	b.AddOutput("yh", onnx.Float16, []int64{3, 200})
	// The FP32 values of the FP16 constants.
	want := map[string][]uint32{}
	for name, v := range map[string][]float32{"lh.scale32": g32, "lh.bias32": b32} {
		for _, x := range v {
			want[name] = append(want[name], numfmt.F16ToF32(numfmt.F32ToF16(math.Float32bits(x))))
		}
	}
	data := b.Marshal()
	for _, tiles := range []int{16, 1472} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			pl, o, st, g, err := planLinkN(t, data, tiles, 2)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := arch.Lookup("ipu21")
			pr, err := lower.Lower(pl, g, p)
			if err != nil {
				t.Fatal(err)
			}
			copies := map[*prog.Buffer]bool{}
			for _, buf := range pr.Buffers {
				w, ok := want[buf.Name]
				if !ok {
					continue
				}
				copies[buf] = true
				if len(buf.Data) < 2 {
					t.Fatalf("%s: data on %d tiles, want a spread's (two or more)", buf.Name, len(buf.Data))
				}
				for tile, d := range buf.Data {
					if !holdsRun(d, w) {
						t.Errorf("%s on tile %d: %d bytes that are not a run of the constant's FP32 values", buf.Name, tile, len(d))
					}
				}
			}
			if len(copies) != 2 {
				t.Fatalf("%d FP32 copies of the scale and bias, want 2", len(copies))
			}
			launches := 0
			for _, s := range pr.Steps {
				for _, ks := range s.Work {
					for _, k := range ks {
						r, ok := k.Params.(*codegen.Rows)
						if !ok || r.Op != codegen.LayerNorm {
							continue
						}
						launches++
						if r.ScaleF16 {
							t.Fatalf("%s: launch reads FP16 scale and bias", k.What)
						}
						for _, f := range k.Fixes {
							if (f.Field == &r.Scale || f.Field == &r.Bias) && !copies[f.Ref.Buf] {
								t.Fatalf("%s: scale or bias from buffer %q", k.What, f.Ref.Buf.Name)
							}
						}
					}
				}
			}
			if launches == 0 {
				t.Fatal("no LayerNormalization launch")
			}
			checkVerdict(t, o, st, g, 1)
			checkVerdict(t, o, st, g, 2)
		})
	}
}

// holdsRun reports whether d is the little-endian words of a run of w,
// followed by zero words only (a shorter piece's copy).
func holdsRun(d []byte, w []uint32) bool {
	if len(d) == 0 || len(d)%4 != 0 {
		return false
	}
	n := len(d) / 4
	for n > 0 && binary.LittleEndian.Uint32(d[4*(n-1):]) == 0 {
		n--
	}
	for c0 := 0; c0+n <= len(w); c0++ {
		same := true
		for j := 0; j < n && same; j++ {
			same = binary.LittleEndian.Uint32(d[4*j:]) == w[c0+j]
		}
		if same {
			return true
		}
	}
	return false
}

func TestLayerNormStats(t *testing.T) {
	for _, tiles := range []int{1, 4, 1472} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			b := onnx.NewModel(21)
			b.AddInput("z", onnx.Float, []int64{2, 3, 5})
			b.AddInput("g", onnx.Float, []int64{5})
			b.AddNode("LayerNormalization", "lz", []string{"z", "g"}, []string{"yz", "mean", "inv"})
			b.AddOutput("yz", onnx.Float, []int64{2, 3, 5})
			b.AddOutput("mean", onnx.Float, []int64{2, 3, 1})
			b.AddOutput("inv", onnx.Float, []int64{2, 3, 1})
			m, err := onnx.ReadModel(b.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := arch.Lookup("ipu21")
			pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			o, st, err := Link(pl, "test", Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, o, st, g, 1)
		})
	}
}
