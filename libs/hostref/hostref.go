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
// Values are held as float64 slices whatever their type; a value of type
// float, float16 or FP8 holds exactly representable numbers under FP32 and
// Device.
package hostref

import (
	"encoding/binary"
	"fmt"
	"math"

	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
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
	// products (at least 1). Results do not depend on it.
	Threads int
}

// Eval evaluates g on inputs (in graph input order) and returns the graph
// outputs in order: of the output's type under FP32 and Device, double
// under FP64.
func Eval(g *graph.Graph, inputs []*onnx.Tensor, opt Options) ([]*onnx.Tensor, error) {
	ev, err := run(g, inputs, opt)
	if err != nil {
		return nil, err
	}
	outs := make([]*onnx.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		d := v.DType
		if opt.Precision == FP64 {
			d = onnx.Double
		}
		t, err := Encode(v.Name, d, v.Shape, ev.vals[v.Index])
		if err != nil {
			return nil, err
		}
		outs[i] = t
	}
	return outs, nil
}

// EvalValues is Eval returning the raw float64 values of every graph
// value, indexed by graph.Value.Index (nil for values no node reached).
func EvalValues(g *graph.Graph, inputs []*onnx.Tensor, opt Options) ([][]float64, error) {
	ev, err := run(g, inputs, opt)
	if err != nil {
		return nil, err
	}
	return ev.vals, nil
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

// evaluator holds one evaluation's values.
type evaluator struct {
	opt  Options
	g    *graph.Graph
	vals [][]float64
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
	ev := &evaluator{opt: opt, g: g, vals: make([][]float64, len(g.Values))}
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
		data, err := graph.DecodeFloats(t)
		if err != nil {
			return nil, fmt.Errorf("input %d %q: %w", i, v.Name, err)
		}
		if int64(len(data)) != v.NumElements() {
			return nil, fmt.Errorf("input %d %q: %d elements, want %d", i, v.Name, len(data), v.NumElements())
		}
		ev.vals[v.Index] = data
	}
	for _, v := range g.Values {
		if v.Const == nil {
			continue
		}
		data, err := graph.DecodeFloats(v.Const)
		if err != nil {
			return nil, fmt.Errorf("constant %q: %w", v.Name, err)
		}
		ev.vals[v.Index] = data
	}
	for _, n := range g.Nodes {
		in := make([][]float64, len(n.Inputs))
		for i, v := range n.Inputs {
			if v != nil {
				in[i] = ev.vals[v.Index]
			}
		}
		outs, err := ev.node(n, in)
		if err != nil {
			return nil, err
		}
		for i, v := range n.Outputs {
			if v == nil {
				continue
			}
			ev.vals[v.Index] = ev.toType(outs[i], v.DType)
		}
	}
	return ev, nil
}

// r rounds an elementary operation's result to the arithmetic of the
// precision: float32, or nothing under FP64.
func (ev *evaluator) r(x float64) float64 {
	if ev.opt.Precision == FP64 {
		return x
	}
	return float64(float32(x))
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
// or Inf for E5M2). Types: double, float, float16 and the FP8 types.
func Encode(name string, d onnx.DataType, shape []int64, v []float64) (*onnx.Tensor, error) {
	t := &onnx.Tensor{Name: name, DType: d, Dims: append([]int64{}, shape...)}
	switch d {
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
