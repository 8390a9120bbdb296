package graph

import (
	"fmt"

	"ipu.local/libs/onnx"
)

// inferCumSum builds CumSum (opset 11) of integers (int32, int64: the
// position ids exporters compute from an attention mask) from operators
// the device has: a scan of ceil(log2 L) steps along the axis (Hillis and
// Steele), each adding to y its copy shifted by 1, 2, 4, ... with zeros
// shifted in (a Slice, a Concat with zeros, an Add), then, when
// exclusive, one more shift by 1; reverse shifts the other way. Integers
// sum exactly in any order, as the operator's sequential sum does
// (within the device's int32 range, beyond which its int64 arithmetic
// faults). Floats are refused: the tree's order rounds otherwise than a
// sequential sum, by more than a tree's rounding count lets a check
// against onnxruntime's outputs allow (measured: 18 of 8,192 elements of
// 512-term rows). Every step goes through the builder, so a constant
// input folds.
func inferCumSum(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if x.DType != onnx.Int32 && x.DType != onnx.Int64 {
		return c.inErrf(0, "element type %v of %q is not supported by CumSum (int32 and int64 are: a float running sum on the device would not round as the sequential one does)", x.DType, x.Name)
	}
	t, err := c.constInput(1, "axis")
	if err != nil {
		return err
	}
	if t.DType != onnx.Int32 && t.DType != onnx.Int64 || t.NumElements() != 1 || len(t.Dims) > 1 {
		return c.inErrf(1, "axis %q: %v%s, want an int32 or int64 scalar", t.Name, t.DType, ShapeString(t.Dims))
	}
	ax, err := t.Int64s()
	if err != nil {
		return c.inErrf(1, "axis %q: %v", t.Name, err)
	}
	r := int64(len(x.Shape))
	if ax[0] < -r || ax[0] >= r {
		return c.inErrf(1, "axis %d out of range for rank %d", ax[0], r)
	}
	exclusive, err := c.attrBool("exclusive", false)
	if err != nil {
		return err
	}
	reverse, err := c.attrBool("reverse", false)
	if err != nil {
		return err
	}
	s := &scan{c: c, x: x, axis: (ax[0] + r) % r, reverse: reverse}
	L := x.Shape[s.axis]
	out := c.n.Outputs[0]
	cur, steps := c.n.Inputs[0], 0
	for k := int64(1); k < L; k *= 2 {
		next := out
		if exclusive || 2*k < L {
			next = s.fresh(fmt.Sprintf("%s/sum%d", c.name, k))
		}
		shifted, err := s.shift(cur, k)
		if err != nil {
			return err
		}
		if err := s.node("Add", fmt.Sprintf("%s/add%d", c.name, k), []string{cur, shifted}, next); err != nil {
			return err
		}
		cur, steps = next, steps+1
	}
	switch {
	case exclusive && L > 0:
		shifted, err := s.shift(cur, 1)
		if err != nil {
			return err
		}
		if err := s.node("Identity", c.name+"/exclusive", []string{shifted}, out); err != nil {
			return err
		}
	case cur != out:
		if err := s.node("Identity", c.name, []string{cur}, out); err != nil {
			return err
		}
	}
	c.b.g.Folded = append(c.b.g.Folded, Rewrite{Node: c.name, What: fmt.Sprintf("CumSum along axis %d of %d built as %d shift-and-add steps", s.axis, L, steps)})
	c.done = true
	return nil
}

// scan builds the steps of one CumSum.
type scan struct {
	c       *nodeCtx
	x       *Value
	axis    int64
	reverse bool
}

// fresh returns a value name that neither the model nor the graph so
// far holds (freshName).
func (s *scan) fresh(name string) string { return s.c.b.freshName(name) }

// node builds one step node through the builder (inference and folding).
func (s *scan) node(op, name string, inputs []string, out string, attrs ...onnx.Attr) error {
	return s.c.b.node(&onnx.Node{Name: name, OpType: op, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
}

// constant makes a constant of the current scope and returns its name.
func (s *scan) constant(name string, t *onnx.Tensor) (string, error) {
	v, err := s.c.b.freshConst(name, t)
	if err != nil {
		return "", s.c.errf("%v", err)
	}
	return v.Name, nil
}

// shift returns the name of v (the shape of x) shifted by k along the
// axis, towards its end (or its start, reverse), zeros shifted in.
func (s *scan) shift(v string, k int64) (string, error) {
	L := s.x.Shape[s.axis]
	start, end := int64(0), L-k
	if s.reverse {
		start, end = k, L
	}
	zshape := copyShape(s.x.Shape)
	zshape[s.axis] = k
	n := NumElements(zshape)
	zeros, err := s.constant(fmt.Sprintf("%s/zeros%d", s.c.name, k), &onnx.Tensor{DType: s.x.DType, Dims: zshape, Raw: make([]byte, n*int64(s.x.DType.ElemSize()))})
	if err != nil {
		return "", err
	}
	var names [3]string
	for i, v := range []int64{start, end, s.axis} {
		if names[i], err = s.constant(fmt.Sprintf("%s/slice%d_%d", s.c.name, k, i), onnx.NewInt64("", []int64{1}, []int64{v})); err != nil {
			return "", err
		}
	}
	kept := s.fresh(fmt.Sprintf("%s/kept%d", s.c.name, k))
	if err := s.node("Slice", fmt.Sprintf("%s/slice%d", s.c.name, k), []string{v, names[0], names[1], names[2]}, kept); err != nil {
		return "", err
	}
	parts := []string{zeros, kept}
	if s.reverse {
		parts = []string{kept, zeros}
	}
	shifted := s.fresh(fmt.Sprintf("%s/shifted%d", s.c.name, k))
	return shifted, s.node("Concat", fmt.Sprintf("%s/shift%d", s.c.name, k), parts, shifted, onnx.IntAttr("axis", s.axis))
}
