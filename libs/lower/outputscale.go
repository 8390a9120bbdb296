package lower

import (
	"math"

	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// A product's output scale: the Mul by a one-element FP16 constant that
// is the only reader of a MatMul's FP16 result (attention's scores times
// 1/sqrt(d)). The product step writes the Mul's output itself: its
// result rounded to FP16, then times the constant in FP16 (f16v4mul, one
// rounding), the two roundings of the MatMul and the Mul. The cast does
// both in one pass (codegen.Cast.MulF16); a result whose cast a k
// split's sum does (fuseCast) is scaled in place after it. The Mul has
// no step of its own (the planner folds it).

// OutputScale returns the Mul of a MatMul's FP16 result by a one-element
// FP16 constant (not zero, not NaN), when it is that result's only
// reader and the result is no graph output; nil otherwise.
func OutputScale(g *graph.Graph, n *graph.Node) *graph.Node {
	if r := foldableReader(g, n, "Mul"); r != nil {
		if _, ok := scaleFactor(r, n.Outputs[0]); ok {
			return r
		}
	}
	return nil
}

// scaleFactor returns the FP16 bits of the Mul's constant operand (the
// one that is not x), when it is one FP16 element, neither zero nor NaN.
func scaleFactor(mul *graph.Node, x *graph.Value) (uint16, bool) {
	v := mul.Inputs[0]
	if v == x {
		v = mul.Inputs[1]
	} else if mul.Inputs[1] != x {
		return 0, false
	}
	if v == nil || v == x || v.Const == nil || v.DType != onnx.Float16 || v.NumElements() != 1 {
		return 0, false
	}
	if len(v.Const.Raw) != 2 {
		return 0, false
	}
	h := uint16(v.Const.Raw[0]) | uint16(v.Const.Raw[1])<<8
	if f := numfmt.F16ToF64(h); f == 0 || math.IsNaN(f) {
		return 0, false
	}
	return h, true
}

// scaleF16 multiplies the FP16 result at y by the factor h in place: the
// Binary of the Mul the product folds.
func scaleF16(what string, s *prog.Superstep, tile int, y prog.Ref, h uint16, n int) {
	c := math.Float32frombits(numfmt.F16ToF32(h))
	p := &codegen.Binary{Op: codegen.Mul, Type: codegen.F16, N: n, B: codegen.Operand{Const: true, Value: c}, Workers: codegen.Slots}
	s.Work[tile] = append(s.Work[tile], &prog.Kernel{What: what, Params: p, Fixes: []prog.Fix{
		{Field: &p.A.Addr, Ref: y}, {Field: &p.Y, Ref: y, Write: true}}})
}
