// Package hostref evaluates a graph on the host: the reference the device's
// results are checked against.
//
// Three precisions answer three questions:
//
//   - FP64: the exact answer, within float64. Every operator computes in
//     float64; only Cast rounds, because its rounding is part of the
//     model's meaning (a Cast to FP8 and back is the model quantizing).
//     Every output comes back as a double tensor.
//   - FP32: what ONNX float32 arithmetic gives, as onnxruntime computes it
//     on the CPU, for conformance: every elementary operation rounds to
//     float32 (float16 results then round to float16); FP8 casts follow
//     onnxruntime where it departs from the ONNX rules (numfmt.F32ToF8ORT).
//   - Device: the device's roundings. A matrix product's inputs are what
//     their types hold, each product is exact and the accumulation is one
//     FP32 fused multiply-add per k, in k order (what the AMP and FMA
//     instructions do); elementwise operators as FP32.
//
// FP8 casts round as the device's conversion instructions do at every
// precision: the ONNX rules, except onnxruntime's two departures in
// non-saturating overflow (numfmt.F32ToF8ORT), which the device adopts so
// that a model's casts are bit-exact with onnxruntime.
//
// Values of the float types are held as float64 slices; a value of type
// float, float16 or FP8 holds exactly representable numbers under FP32 and
// Device. Values of type int32, int64 and bool are held as int64 slices
// (bools 0 or 1) and computed exactly, at every precision: integer
// arithmetic wraps as two's complement in its type, comparisons, logic,
// selection and data movement are exact, and casts round once, to their
// target type. An If on a computed condition runs the branch the
// condition selects.
package hostref

import (
	"encoding/binary"
	"fmt"
	"math"

	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/par"
)

// Precision selects the arithmetic of an evaluation.
type Precision int

// Precisions.
const (
	FP64 Precision = iota
	FP32
	Device
)

// String returns "fp64", "fp32" or "device", the --reference-precision
// spellings.
func (p Precision) String() string {
	switch p {
	case FP64:
		return "fp64"
	case FP32:
		return "fp32"
	case Device:
		return "device"
	}
	return fmt.Sprintf("precision(%d)", int(p))
}

// ParsePrecision parses "fp64", "fp32" or "device".
func ParsePrecision(s string) (Precision, error) {
	for _, p := range []Precision{FP64, FP32, Device} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown reference precision %q (want fp64, fp32 or device)", s)
}

// Options configure an evaluation.
type Options struct {
	Precision Precision
	// Threads is the number of goroutines that split the rows of matrix
	// products, decode the constants and prepare the products' operands
	// (at least 1). Results do not depend on it.
	Threads int
}

// Eval evaluates g on inputs (in graph input order) and returns the graph
// outputs in order: of the output's type under FP32 and Device, double
// under FP64. Outputs of type int32, int64 or bool keep their type at
// every precision (their values are exact integers).
func Eval(g *graph.Graph, inputs []*onnx.Tensor, opt Options) ([]*onnx.Tensor, error) {
	ev, err := run(g, inputs, opt)
	if err != nil {
		return nil, err
	}
	outs := make([]*onnx.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		var t *onnx.Tensor
		if isIntType(v.DType) {
			t, err = encodeInts(v.Name, v.DType, v.Shape, ev.ints[v.Index])
		} else {
			d := v.DType
			if opt.Precision == FP64 {
				d = onnx.Double
			}
			t, err = Encode(v.Name, d, v.Shape, ev.vals[v.Index])
		}
		if err != nil {
			return nil, err
		}
		outs[i] = t
	}
	return outs, nil
}

// EvalValues is Eval returning the raw float64 values of every graph
// value, indexed by graph.Value.Index (nil for values no node reached);
// int32, int64 and bool values are converted to float64 (exact up to
// 2^53 in magnitude).
func EvalValues(g *graph.Graph, inputs []*onnx.Tensor, opt Options) ([][]float64, error) {
	ev, err := run(g, inputs, opt)
	if err != nil {
		return nil, err
	}
	return ev.floats(), nil
}

// InputsByName orders named input tensors as the graph's inputs.
func InputsByName(g *graph.Graph, named map[string]*onnx.Tensor) ([]*onnx.Tensor, error) {
	out := make([]*onnx.Tensor, len(g.Inputs))
	for i, v := range g.Inputs {
		t, ok := named[v.Name]
		if !ok {
			return nil, fmt.Errorf("no tensor for input %q", v.Name)
		}
		out[i] = t
	}
	if len(named) != len(g.Inputs) {
		for name := range named {
			found := false
			for _, v := range g.Inputs {
				found = found || v.Name == name
			}
			if !found {
				return nil, fmt.Errorf("tensor %q is not a graph input", name)
			}
		}
	}
	return out, nil
}

// evaluator holds one evaluation's values, indexed by Value.Index:
// vals holds the values of the float types, ints those of int32, int64
// and bool (see values.go).
type evaluator struct {
	opt  Options
	g    *graph.Graph
	vals [][]float64
	ints [][]int64
}

// floats returns every value as float64, integers converted.
func (ev *evaluator) floats() [][]float64 {
	out := make([][]float64, len(ev.vals))
	for i, v := range ev.vals {
		out[i] = v
		if ev.ints[i] != nil {
			out[i] = toFloats(ev.ints[i])
		}
	}
	return out
}

func run(g *graph.Graph, inputs []*onnx.Tensor, opt Options) (*evaluator, error) {
	switch opt.Precision {
	case FP64, FP32, Device:
	default:
		return nil, fmt.Errorf("unknown precision %v", opt.Precision)
	}
	if opt.Threads < 1 {
		opt.Threads = 1
	}
	if len(inputs) != len(g.Inputs) {
		return nil, fmt.Errorf("%d input tensors, the graph has %d inputs", len(inputs), len(g.Inputs))
	}
	ev := &evaluator{opt: opt, g: g, vals: make([][]float64, len(g.Values)), ints: make([][]int64, len(g.Values))}
	for i, v := range g.Inputs {
		t := inputs[i]
		if t == nil {
			return nil, fmt.Errorf("input %d %q: no tensor", i, v.Name)
		}
		if t.DType != v.DType {
			return nil, fmt.Errorf("input %d %q: element type %v, want %v", i, v.Name, t.DType, v.DType)
		}
		if graph.ShapeString(t.Dims) != graph.ShapeString(v.Shape) {
			return nil, fmt.Errorf("input %d %q: shape %s, want %s", i, v.Name, graph.ShapeString(t.Dims), graph.ShapeString(v.Shape))
		}
		d, err := decode(t)
		if err != nil {
			return nil, fmt.Errorf("input %d %q: %w", i, v.Name, err)
		}
		if int64(d.length()) != v.NumElements() {
			return nil, fmt.Errorf("input %d %q: %d elements, want %d", i, v.Name, d.length(), v.NumElements())
		}
		ev.set(v, d)
	}
	if err := ev.constants(); err != nil {
		return nil, err
	}
	if err := ev.nodes(g.Nodes); err != nil {
		return nil, err
	}
	return ev, nil
}

// constants decodes the graph's constants, on opt.Threads goroutines (a
// model's weights are most of its bytes); an error is the first
// constant's in value order.
func (ev *evaluator) constants() error {
	var consts []*graph.Value
	for _, v := range ev.g.Values {
		if v.Const != nil {
			consts = append(consts, v)
		}
	}
	ds, errs := make([]data, len(consts)), make([]error, len(consts))
	par.For(len(consts), ev.opt.Threads, func(_, i int) { ds[i], errs[i] = decode(consts[i].Const) })
	for i, v := range consts {
		d := ds[i]
		if errs[i] != nil {
			return fmt.Errorf("constant %q: %w", v.Name, errs[i])
		}
		if v.Const.DType != v.DType || int64(d.length()) != v.NumElements() {
			return fmt.Errorf("constant %q: %v with %d elements, want %v%s", v.Name, v.Const.DType, d.length(), v.DType, graph.ShapeString(v.Shape))
		}
		ev.set(v, d)
	}
	return nil
}

// set stores a value's elements.
func (ev *evaluator) set(v *graph.Value, d data) {
	if d.i != nil {
		ev.ints[v.Index] = d.i
	} else {
		ev.vals[v.Index] = d.f
	}
}

// get returns a value's elements, and whether it has any yet.
func (ev *evaluator) get(v *graph.Value) (data, bool) {
	if v.Index < 0 || v.Index >= len(ev.vals) {
		return data{}, false
	}
	d := data{f: ev.vals[v.Index], i: ev.ints[v.Index]}
	return d, d.f != nil || d.i != nil
}

// nodes evaluates nodes in order (the graph's, or a branch's).
func (ev *evaluator) nodes(list []*graph.Node) error {
	for _, n := range list {
		if n == nil || len(n.Outputs) == 0 || n.Outputs[0] == nil {
			return fmt.Errorf("node %q: no output", nodeName(n))
		}
		in := make([]data, len(n.Inputs))
		for i, v := range n.Inputs {
			if v == nil {
				continue
			}
			d, ok := ev.get(v)
			if !ok {
				return fmt.Errorf("node %q (%s) input %d: value %q is not computed", n.Name, n.Op, i, v.Name)
			}
			if isIntType(v.DType) != (d.i != nil) || int64(d.length()) != v.NumElements() {
				return fmt.Errorf("node %q (%s) input %d: value %q does not hold %d elements of type %v", n.Name, n.Op, i, v.Name, v.NumElements(), v.DType)
			}
			in[i] = d
		}
		outs, err := ev.node(n, in)
		if err != nil {
			return err
		}
		for i, v := range n.Outputs {
			if v == nil {
				continue
			}
			if i >= len(outs) {
				return fmt.Errorf("node %q (%s): no result for output %d %q", n.Name, n.Op, i, v.Name)
			}
			d := outs[i]
			if isIntType(v.DType) != (d.i != nil) || int64(d.length()) != v.NumElements() {
				return fmt.Errorf("node %q (%s) output %d %q: the kernel gave %d elements, want %d of type %v", n.Name, n.Op, i, v.Name, d.length(), v.NumElements(), v.DType)
			}
			if d.i != nil {
				for k, x := range d.i {
					d.i[k] = wrapInt(x, v.DType)
				}
			} else {
				d.f = ev.toType(d.f, v.DType)
			}
			ev.set(v, d)
		}
	}
	return nil
}

func nodeName(n *graph.Node) string {
	if n == nil {
		return "<nil>"
	}
	return n.Name
}

// r rounds an elementary operation's result to the arithmetic of the
// precision: float32, or nothing under FP64.
func (ev *evaluator) r(x float64) float64 {
	if ev.opt.Precision == FP64 {
		return x
	}
	return float64(float32(x))
}

// fn is a device function of x: fmath's (the exact value rounded to
// float32, the same bits on every host) under FP32 and Device, float64's
// under FP64.
func (ev *evaluator) fn(f32 func(float32) float32, f64 func(float64) float64, x float64) float64 {
	if ev.opt.Precision == FP64 {
		return f64(x)
	}
	return float64(f32(float32(x)))
}

// toType rounds an operator's results to the output's element type, in
// place (float16 under FP32 and Device; FP8 values come only from casts
// and data movement and are already exact).
func (ev *evaluator) toType(v []float64, d onnx.DataType) []float64 {
	if ev.opt.Precision == FP64 || d != onnx.Float16 {
		return v
	}
	for i, x := range v {
		v[i] = numfmt.F16ToF64(numfmt.F64ToF16(x))
	}
	return v
}

// Encode returns a tensor of type d holding v, rounding each value to d
// once (NaNs stay NaNs; values out of an FP8 type's range become its NaN,
// or Inf for E5M2). Types: double, float, float16 and the FP8 types;
// int32, int64 and bool take integral values (bools: v != 0).
func Encode(name string, d onnx.DataType, shape []int64, v []float64) (*onnx.Tensor, error) {
	t := &onnx.Tensor{Name: name, DType: d, Dims: append([]int64{}, shape...)}
	switch d {
	case onnx.Int32, onnx.Int64, onnx.Bool:
		ints := make([]int64, len(v))
		for i, x := range v {
			if x != math.Trunc(x) || math.Abs(x) >= 1<<63 {
				return nil, fmt.Errorf("tensor %q: element %d (%g) is not a %v", name, i, x, d)
			}
			ints[i] = int64(x)
		}
		return encodeInts(name, d, shape, ints)
	case onnx.Double:
		t.Raw = make([]byte, 0, 8*len(v))
		for _, x := range v {
			t.Raw = binary.LittleEndian.AppendUint64(t.Raw, math.Float64bits(x))
		}
	case onnx.Float:
		t.Raw = make([]byte, 0, 4*len(v))
		for _, x := range v {
			t.Raw = binary.LittleEndian.AppendUint32(t.Raw, math.Float32bits(float32(x)))
		}
	case onnx.Float16:
		t.Raw = make([]byte, 0, 2*len(v))
		for _, x := range v {
			t.Raw = binary.LittleEndian.AppendUint16(t.Raw, numfmt.F64ToF16(x))
		}
	default:
		f, ok := graph.FP8Format(d)
		if !ok {
			return nil, fmt.Errorf("tensor %q: cannot encode element type %v", name, d)
		}
		t.Raw = make([]byte, len(v))
		for i, x := range v {
			t.Raw[i] = numfmt.F64ToF8(x, f, 0, numfmt.NaNOnOverflow)
		}
	}
	return t, nil
}
