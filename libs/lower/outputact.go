package lower

import (
	"slices"

	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// A product's output activation: the unary operator (Gelu, Relu, ...)
// that is the only reader of a product's FP16 result as the product
// writes it, after its folded cast, Add of a bias or Mul by a constant
// (a linear layer and its activation). The product step writes the
// activation's output itself. With a k split whose sum writes the FP16
// result, the sum applies it (codegen.SumParts.Act: the values are not
// stored and loaded again, and the activation has no launch of its
// own); otherwise a Unary runs on the result in place, after the cast
// and the bias. Either way the bits are the Unary's. The planner folds
// the operator (it has no step of its own).

// OutputAct returns the unary node that reads a product's FP16 result,
// as above, when it is that result's only reader, the result is no
// graph output, no If may read it, its other inputs (Clip's bounds) are
// constants, its FP16 output has the result's shape and a Unary kernel
// computes it; nil otherwise.
func OutputAct(g *graph.Graph, n *graph.Node) *graph.Node {
	if n.Op != "MatMul" && n.Op != "Gemm" {
		return nil
	}
	last := n
	if c := OutputCast(g, n); c != nil {
		last = c
	} else if a := OutputBias(g, n); a != nil {
		last = a
	} else if m := OutputScale(g, n); m != nil {
		last = m
	}
	out := last.Outputs[0]
	if out.DType != onnx.Float16 {
		return nil
	}
	for _, m := range g.Nodes {
		if _, ok := m.Attrs.(*graph.If); ok {
			return nil // a branch may read it
		}
	}
	r := onlyReader(g, out)
	if r == nil || len(r.Inputs) < 1 || r.Inputs[0] != out || len(r.Outputs) != 1 {
		return nil
	}
	for _, v := range r.Inputs[1:] {
		if v != nil && v.Const == nil {
			return nil
		}
	}
	if _, why := unaryParams(r, codegen.F16); why != "" {
		return nil
	}
	if y := r.Outputs[0]; y.DType != onnx.Float16 || !slices.Equal(y.Shape, out.Shape) {
		return nil
	}
	return r
}

// fuseAct makes the sum k, which writes the FP16 result, apply the
// activation u.
func fuseAct(k *prog.Kernel, u codegen.Unary) {
	p := k.Params.(*codegen.SumParts)
	p.Act = codegen.ActivationOf(u)
	k.ClearCost()
}

// actF16 applies the activation u to the n FP16 values at y, in place.
func actF16(what string, s *prog.Superstep, tile int, y prog.Ref, u codegen.Unary, n int) {
	p := u
	p.Type, p.N, p.Workers = codegen.F16, n, codegen.Slots
	s.Work[tile] = append(s.Work[tile], &prog.Kernel{What: what, Params: &p, Fixes: []prog.Fix{
		{Field: &p.X, Ref: y}, {Field: &p.Y, Ref: y, Write: true}}})
}
