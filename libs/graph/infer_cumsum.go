package graph

import "ipu.local/libs/onnx"

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
	a := (ax[0] + r) % r
	L := x.Shape[a]
	n := 0
	for k := int64(1); k < L; k *= 2 {
		n++
	}
	st := c.built("CumSum along axis %d of %d as %d shift-and-add steps", a, L, n)
	// A shift by k towards the axis' end (or start, reverse): the
	// operand cropped by k on that side, k zeros padded on the other.
	shape, zero := copyShape(x.Shape), make([]byte, x.DType.ElemSize())
	shift := func(v string, k int64) (string, error) {
		if reverse {
			return st.pad(v, shape, x.DType, zero, int(a), -k, k)
		}
		return st.pad(v, shape, x.DType, zero, int(a), k, -k)
	}
	out := c.n.Outputs[0]
	cur := c.n.Inputs[0]
	for k := int64(1); k < L; k *= 2 {
		next := ""
		if !exclusive && 2*k >= L {
			next = out
		}
		shifted, err := shift(cur, k)
		if err != nil {
			return err
		}
		if cur, err = st.node("Add", "add", []string{cur, shifted}, next); err != nil {
			return err
		}
	}
	switch {
	case exclusive && L > 0:
		shifted, err := shift(cur, 1)
		if err != nil {
			return err
		}
		return st.last("Identity", []string{shifted})
	case cur != out:
		return st.last("Identity", []string{cur})
	}
	return nil
}
