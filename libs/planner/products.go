package planner

// The matrix products of a graph as the planner sees them: each operand
// traced back from the product's input through the nodes a pack or a
// cast step absorbs (casts, transposes of the last two axes) to the
// value the chain starts from.

import (
	"fmt"

	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
)

// operand is one side of a product.
type operand struct {
	input *graph.Value // the product node's input
	root  *graph.Value // where the chain starts
	// w is the value the operand's panel tensor holds: the first value on
	// the chain (from the root) of the product's element type.
	w *graph.Value
	// x is the value a cast after the exchange reads (the rounding cast's
	// input), nil when the chain has no rounding cast.
	x     *graph.Value
	cast  *graph.Node   // the rounding cast, nil: none
	nodes []*graph.Node // every folded node of the chain
	// flips is the transposes between w and the product's view of the
	// operand (Gemm's trans attributes included): the panel tensor holds
	// w transposed when odd.
	flips int
	typ   codegen.AMPType // the element type the chain ends in
}

// hostRoot reports whether a value is a graph input (hostRoot) or
// constant seen through data movement.
func dataRoot(v *graph.Value) *graph.Value {
	for v.Producer != nil {
		switch v.Producer.Op {
		case "Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze", "Transpose":
			v = v.Producer.Inputs[0]
		default:
			return nil
		}
	}
	return v
}

func isHost(v *graph.Value) bool {
	r := dataRoot(v)
	return r != nil && r.Const == nil
}

func isConst(v *graph.Value) bool {
	r := dataRoot(v)
	return r != nil && r.Const != nil
}

func isFP8(d onnx.DataType) bool {
	_, ok := graph.FP8Format(d)
	return ok
}

func ampOf(d onnx.DataType) (codegen.AMPType, bool) {
	switch {
	case d == onnx.Float16:
		return codegen.AMPFP16, true
	case isFP8(d):
		return codegen.AMPFP8, true
	case d == onnx.Float:
		return codegen.AMPFP32, true
	}
	return 0, false
}

// lastTwoSwap reports whether a transpose only swaps its last two axes.
func lastTwoSwap(perm []int) bool {
	r := len(perm)
	if r < 2 || perm[r-1] != r-2 || perm[r-2] != r-1 {
		return false
	}
	for i := 0; i < r-2; i++ {
		if perm[i] != i {
			return false
		}
	}
	return true
}

// trace follows a product input back through the nodes only it reads.
func trace(v *graph.Value, uses map[*graph.Value]int) operand {
	o := operand{input: v}
	cur := v
	for cur.Producer != nil && uses[cur] == 1 {
		n := cur.Producer
		in := n.Inputs[0]
		switch a := n.Attrs.(type) {
		case *graph.Cast:
			widening := a.To == onnx.Float && (in.DType == onnx.Float16 || isFP8(in.DType)) || a.To == onnx.Float16 && isFP8(in.DType) || a.To == in.DType
			rounding := (isFP8(a.To) || a.To == onnx.Float16) && (in.DType == onnx.Float || in.DType == onnx.Float16 && isFP8(a.To))
			switch {
			case widening:
			case rounding && o.cast == nil:
				o.cast = n
			default:
				goto done
			}
		case *graph.Transpose:
			if !lastTwoSwap(a.Perm) {
				goto done
			}
		default:
			goto done
		}
		o.nodes = append([]*graph.Node{n}, o.nodes...)
		cur = in
	}
done:
	o.root = cur
	return o
}

// cutAtWidened starts a chain with a rounding cast at the first FP32
// value after the cast (its widening back), leaving the cast and the
// nodes up to that value to the graph: for an FP32 product, whose other
// operand has no such cast (an FP8-rounded operand shared with other
// products stops that operand's chain at the shared FP32 value). A chain
// without an FP32 value after its cast stays whole.
func (o *operand) cutAtWidened() {
	for i, c := range o.nodes {
		if c != o.cast {
			continue
		}
		for j := i + 1; j < len(o.nodes); j++ {
			if v := o.nodes[j].Outputs[0]; v.DType == onnx.Float {
				o.root, o.nodes, o.cast, o.x = v, o.nodes[j+1:], nil, nil
				return
			}
		}
	}
}

// product is a planned MatMul or Gemm.
type product struct {
	node   *graph.Node
	idx    int
	a, b   operand
	mm     layout.MatMul
	typ    codegen.AMPType
	out    *graph.Value // the value the product writes (its result, the folded FP16 cast of it, or the folded Add of a bias to it or Mul by a constant of it)
	ocast  *graph.Node  // the folded output cast, nil: none
	obias  *graph.Node  // the folded Add of a bias (lower.OutputBias), nil: none
	oscale *graph.Node  // the folded Mul by a constant (lower.OutputScale), nil: none
	oact   *graph.Node  // the folded activation (lower.OutputAct), nil: none
	align  int          // row alignment its result's pieces need
	nalign int          // column alignment (0: BGroup)
}

// resolve sets the product's element type, each operand's panel value w
// and transposes, and the shape.
func (pr *product) resolve() error {
	n := pr.node
	ta, tb := 0, 0
	if g, ok := n.Attrs.(*graph.Gemm); ok {
		if g.TransA {
			ta = 1
		}
		if g.TransB {
			tb = 1
		}
	}
	typeOf := func(o *operand) (codegen.AMPType, error) {
		d := o.root.DType
		if o.cast != nil {
			d = o.cast.Outputs[0].DType
		}
		t, ok := ampOf(d)
		if !ok {
			return 0, fmt.Errorf("node %q: operand %q of type %s", n.Name, o.input.Name, d)
		}
		return t, nil
	}
	at, err := typeOf(&pr.a)
	if err != nil {
		return err
	}
	bt, err := typeOf(&pr.b)
	if err != nil {
		return err
	}
	switch {
	case at == bt:
		pr.typ = at
	case at == codegen.AMPFP32 || bt == codegen.AMPFP32:
		pr.typ = codegen.AMPFP32
		// The other operand's rounding cast is the graph's work, not the
		// product's: an FP32 product reads the value widened back.
		pr.a.cutAtWidened()
		pr.b.cutAtWidened()
	default:
		return fmt.Errorf("node %q: a product of %s and %s operands", n.Name, at, bt)
	}
	for k, o := range []*operand{&pr.a, &pr.b} {
		o.typ = pr.typ
		want := map[codegen.AMPType]onnx.DataType{codegen.AMPFP16: onnx.Float16, codegen.AMPFP32: onnx.Float}[pr.typ]
		// The chain's values from the root to the input, in order.
		vals := []*graph.Value{o.root}
		for _, c := range o.nodes {
			vals = append(vals, c.Outputs[0])
		}
		start := 0
		if o.cast != nil {
			for i, c := range o.nodes {
				if c == o.cast {
					start = i + 1
					o.x = c.Inputs[0]
				}
			}
		}
		o.w = nil
		for _, v := range vals[start:] {
			if pr.typ == codegen.AMPFP8 && isFP8(v.DType) || pr.typ != codegen.AMPFP8 && v.DType == want {
				o.w = v
				break
			}
		}
		if o.w == nil {
			return fmt.Errorf("node %q: operand %q has no value of the product's type %s on its chain", n.Name, o.input.Name, pr.typ)
		}
		// Transposes between w and the input.
		o.flips = []int{ta, tb}[k] + transposesAfter(o, o.w)
	}
	as, bs := opShape(pr.a), opShape(pr.b)
	ra, rb := len(as), len(bs)
	if ra < 2 || rb < 2 {
		return fmt.Errorf("node %q: operands of rank %d and %d (want at least 2)", n.Name, ra, rb)
	}
	if ta == 1 {
		as[ra-1], as[ra-2] = as[ra-2], as[ra-1]
	}
	if tb == 1 {
		bs[rb-1], bs[rb-2] = bs[rb-2], bs[rb-1]
	}
	if as[ra-1] != bs[rb-2] {
		return fmt.Errorf("node %q: [.., %d, %d] x [.., %d, %d]", n.Name, as[ra-2], as[ra-1], bs[rb-2], bs[rb-1])
	}
	y := n.Outputs[0].Shape
	pr.mm = layout.MatMul{ABatch: as[:ra-2], BBatch: bs[:rb-2], M: as[ra-2], K: as[ra-1], N: bs[rb-1]}
	for _, d := range y[:len(y)-2] {
		pr.mm.Batch = append(pr.mm.Batch, int(d))
	}
	return nil
}

// transposesAfter counts the chain's transposes between w and the
// product's input.
func transposesAfter(o *operand, w *graph.Value) int {
	n := 0
	seen := w == o.root
	for _, c := range o.nodes {
		if c.Inputs[0] == w {
			seen = true
		}
		if _, ok := c.Attrs.(*graph.Transpose); ok && seen {
			n++
		}
	}
	return n
}

// opShape is an operand's shape as the product reads it (the input's,
// before Gemm's trans attributes).
func opShape(o operand) []int {
	out := make([]int, len(o.input.Shape))
	for i, d := range o.input.Shape {
		out[i] = int(d)
	}
	return out
}

// castable reports whether a product's cast order is a decision: an
// operand with a rounding cast whose input the host or the tile images
// can deliver.
// hostBlocks reports whether the host delivers the operand's blocks
// uncast in their matrix view: as the blocks themselves (every copy of a
// block over the host link, a decision's CastOrder "" or after the
// exchange) or, before the exchange, each element once, spread over the
// product's tiles, an exchange copying them to the blocks.
func (o *operand) hostBlocks() bool {
	return o.cast == nil && isHost(o.w) && blockView(o.w)
}

// spreadable reports whether an operand of the product is hostBlocks.
func (pr *product) spreadable() bool {
	return pr.a.hostBlocks() || pr.b.hostBlocks()
}

func (pr *product) castable() bool {
	for _, o := range []operand{pr.a, pr.b} {
		if o.cast != nil && (isHost(o.x) || isConst(o.x)) {
			return true
		}
	}
	return false
}

// outputCast is the Cast to FP16 that is the only reader of a product's
// FP32 result (no graph output): the product writes the FP16 result.
func outputCast(g *graph.Graph, n *graph.Node, uses map[*graph.Value]int) *graph.Node {
	out := n.Outputs[0]
	if out.DType != onnx.Float || uses[out] != 1 {
		return nil
	}
	for _, v := range g.Outputs {
		if v == out {
			return nil
		}
	}
	for _, m := range g.Nodes {
		for _, v := range m.Inputs {
			if v == out {
				if a, ok := m.Attrs.(*graph.Cast); ok && a.To == onnx.Float16 {
					return m
				}
				return nil
			}
		}
	}
	return nil
}

// class is what makes two products plan alike: their shape, types,
// operand chains and sources, alignments and result (a repeated layer's
// products share classes).
func (pr *product) class() string {
	op := func(o operand) string {
		return fmt.Sprintf("%s/%s/%v/%d/%v", sourceOf(o.root), o.w.DType, o.cast != nil, o.flips, shapeOf(o.w))
	}
	act := ""
	if pr.oact != nil {
		act = fmt.Sprintf("%s%+v", pr.oact.Op, pr.oact.Attrs)
	}
	return fmt.Sprintf("%s|%+v|%s|%s|%s|%d|%d|%s|%v|%v|%v|%s", pr.node.Op, pr.mm, pr.typ, op(pr.a), op(pr.b), pr.align, pr.nalign, pr.out.DType, pr.ocast != nil, pr.obias != nil, pr.oscale != nil, act)
}
