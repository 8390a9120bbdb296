package cost

import (
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// Chain is a matrix product operand traced back through the nodes that
// only change its element type or orientation: Cast to float from FP16 or
// FP8 (exact), Cast from float to FP8, Transpose [1,0]. The product runs
// on the root's data; the chain's nodes fold into it.
type Chain struct {
	Root      *graph.Value
	Nodes     []*graph.Node // folded nodes, root side first
	Transpose bool          // the operand is the root transposed
	Type      codegen.AMPType
	Cast      codegen.CastKind
	HasCast   bool
	FP8       numfmt.Format
	Exact     bool // the AMP input equals the operand exactly
}

// TraceOperand follows v back to its chain's root.
func TraceOperand(v *graph.Value) Chain {
	var c Chain
	var toFP8, toF16 *graph.Node
	for v.Producer != nil {
		n := v.Producer
		switch a := n.Attrs.(type) {
		case *graph.Cast:
			in := n.Inputs[0]
			switch {
			case a.To == onnx.Float && (in.DType == onnx.Float16 || isFP8(in.DType)):
			case isFP8(a.To) && in.DType == onnx.Float && toFP8 == nil && toF16 == nil:
				toFP8 = n
			case a.To == onnx.Float16 && in.DType == onnx.Float && toFP8 == nil && toF16 == nil:
				toF16 = n
			default:
				goto done
			}
		case *graph.Transpose:
			if len(a.Perm) != 2 || a.Perm[0] != 1 {
				goto done
			}
			c.Transpose = !c.Transpose
		default:
			goto done
		}
		c.Nodes = append([]*graph.Node{n}, c.Nodes...)
		v = n.Inputs[0]
	}
done:
	c.Root = v
	c.Exact = true
	switch {
	case v.DType == onnx.Float16:
		c.Type = codegen.AMPFP16
	case isFP8(v.DType):
		c.Type = codegen.AMPFP8
		c.FP8, _ = graph.FP8Format(v.DType)
	case toFP8 != nil:
		c.Type = codegen.AMPFP8
		c.FP8, _ = graph.FP8Format(toFP8.Attrs.(*graph.Cast).To)
		c.Cast, c.HasCast = codegen.F32ToF8, true
	case toF16 != nil:
		// The model rounds the operand to FP16: the AMP takes it.
		c.Type = codegen.AMPFP16
		c.Cast, c.HasCast = codegen.F32ToF16, true
	default:
		// FP32: the product runs on the vector unit (no FP32 AMP).
		c.Type = codegen.VecFP32
	}
	if toFP8 == nil && c.Type == codegen.AMPFP8 {
		c.Exact = true
	}
	return c
}

func isFP8(d onnx.DataType) bool {
	_, ok := graph.FP8Format(d)
	return ok
}

// Product is a MatMul or Gemm node as the AMP computes it.
type Product struct {
	Node    *graph.Node
	M, K, N int
	Type    codegen.AMPType
	A, B    Chain
	// Align is the row alignment its result's pieces need (ResultAlign;
	// 0 until set).
	Align int
}

// ProductOf returns the AMP view of a 2-D MatMul or Gemm node.
func ProductOf(n *graph.Node) (*Product, error) {
	if n.Op != "MatMul" && n.Op != "Gemm" {
		return nil, fmt.Errorf("node %q: %s is not a matrix product", n.Name, n.Op)
	}
	a, b := n.Inputs[0], n.Inputs[1]
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, fmt.Errorf("node %q: only 2-D products are planned (got %s x %s)", n.Name, graph.ShapeString(a.Shape), graph.ShapeString(b.Shape))
	}
	pr := &Product{Node: n, A: TraceOperand(a), B: TraceOperand(b)}
	ta, tb := false, false
	if g, ok := n.Attrs.(*graph.Gemm); ok {
		ta, tb = g.TransA, g.TransB
	}
	pr.A.Transpose = pr.A.Transpose != ta
	pr.B.Transpose = pr.B.Transpose != tb
	am, ak := int(a.Shape[0]), int(a.Shape[1])
	if ta {
		am, ak = ak, am
	}
	bn := int(b.Shape[1])
	if tb {
		bn = int(b.Shape[0])
	}
	pr.M, pr.K, pr.N = am, ak, bn
	pr.Type = pr.A.Type
	if pr.A.Type == codegen.VecFP32 || pr.B.Type == codegen.VecFP32 {
		// One FP32 operand: the other converts to FP32 exactly.
		pr.Type = codegen.VecFP32
		for _, c := range []*Chain{&pr.A, &pr.B} {
			switch {
			case c.Type == codegen.VecFP32:
			case c.HasCast:
				// An FP32 root cast to FP8: keep the FP8 rounding, then
				// widen exactly (FP8 -> FP32 happens in the cast kernel
				// pair); not lowered yet.
				c.Type = codegen.VecFP32
			case c.Type == codegen.AMPFP16:
				c.Type, c.Cast, c.HasCast = codegen.VecFP32, codegen.F16ToF32, true
			default:
				c.Type, c.Cast, c.HasCast = codegen.VecFP32, codegen.F8ToF32, true
			}
		}
	} else if pr.A.Type != pr.B.Type {
		// Mixed FP8 and FP16: both go through FP16.
		pr.Type = codegen.AMPFP16
		for _, c := range []*Chain{&pr.A, &pr.B} {
			if c.Type != codegen.AMPFP16 {
				c.Type, c.Cast, c.HasCast, c.Exact = codegen.AMPFP16, codegen.F32ToF16, true, false
			}
		}
	}
	return pr, nil
}

// MACs is the product's multiply-accumulates.
func (pr *Product) MACs() int64 { return int64(pr.M) * int64(pr.K) * int64(pr.N) }

// ComputeBound is the graph's matrix work at the AMP's peak on every
// tile: the sum over products of MACs / (rate x tiles), rounded up.
func ComputeBound(g *graph.Graph, p *arch.Preset, tiles int) int64 {
	var cy float64
	for _, n := range g.Nodes {
		pr, err := ProductOf(n)
		if err != nil {
			continue
		}
		rate := p.MACsFP16
		if pr.Type == codegen.AMPFP8 && p.MACsFP8 > 0 {
			rate = p.MACsFP8
		}
		if pr.Type == codegen.VecFP32 {
			rate = p.MACsFP32
		}
		cy += float64(pr.MACs()) / float64(rate*tiles)
	}
	b := int64(cy)
	if float64(b) < cy {
		b++
	}
	return b
}

// OutputCast returns the Cast to FP16 that a product's FP32 result goes
// through when that cast is the result's only reader and the result is no
// graph output: the product then writes FP16 itself (the cast folds into
// it). Nil otherwise.
func OutputCast(g *graph.Graph, n *graph.Node) *graph.Node {
	out := n.Outputs[0]
	if out.DType != onnx.Float {
		return nil
	}
	for _, v := range g.Outputs {
		if v == out {
			return nil
		}
	}
	var reader *graph.Node
	for _, m := range g.Nodes {
		for _, v := range m.Inputs {
			if v == out {
				if reader != nil {
					return nil
				}
				reader = m
			}
		}
	}
	if reader == nil {
		return nil
	}
	if a, ok := reader.Attrs.(*graph.Cast); ok && a.To == onnx.Float16 {
		return reader
	}
	return nil
}

// ResultAlign returns the row alignment a product's result pieces need:
// ColAlign when a later product packs the result (or a value computed
// from it row for row) as a transposed B operand, whose groups of 16 run
// along the result's rows; 0 (the default RowAlign) otherwise.
func ResultAlign(g *graph.Graph, n *graph.Node) int {
	v := n.Outputs[0]
	if oc := OutputCast(g, n); oc != nil {
		v = oc.Outputs[0]
	}
	roots := map[*graph.Value]int{}
	for _, m := range g.Nodes {
		pr, err := ProductOf(m)
		if err != nil {
			continue
		}
		if pr.B.Transpose {
			roots[pr.B.Root] = ColAlign
		}
	}
	seen := map[*graph.Value]bool{}
	var need func(v *graph.Value) int
	need = func(v *graph.Value) int {
		if seen[v] {
			return 0
		}
		seen[v] = true
		a := roots[v]
		for _, m := range g.Nodes {
			if !keepsRows(m.Op) || len(m.Outputs) == 0 || m.Outputs[0] == nil || m.Outputs[0].NumElements() != v.NumElements() {
				continue
			}
			for _, in := range m.Inputs {
				if in == v {
					a = max(a, need(m.Outputs[0]))
				}
			}
		}
		return a
	}
	return need(v)
}

// keepsRows reports whether an operator's output is laid out like its
// input's when it has as many elements (elementwise, casts, row
// operators).
func keepsRows(op string) bool {
	switch op {
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt", "Gelu", "Clip", "Pow",
		"Add", "Sub", "Mul", "Div", "Max", "Min", "Cast", "Softmax", "LogSoftmax", "LayerNormalization":
		return true
	}
	return false
}
