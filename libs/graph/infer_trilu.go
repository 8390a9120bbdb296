package graph

import "ipu.local/libs/onnx"

// inferTrilu builds Trilu (opset 14) as Where(mask, x, 0): mask, a bool
// constant over the input's last two axes [M, N], keeps the elements
// whose column j and row i have j - i >= k (upper, the default) or
// j - i <= k (lower), and the batch axes broadcast over it. k, the
// optional second input (a scalar, 0 when omitted), must be a constant.
// A constant input folds (Where folds), as exporters' causal masks do
// (torch.triu of a torch.full); otherwise the device selects.
func inferTrilu(c *nodeCtx) error {
	if err := c.arity(1, 2); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if !runtimeType(x.DType) {
		return c.inErrf(0, "element type %v of %q is not supported by Trilu", x.DType, x.Name)
	}
	r := len(x.Shape)
	if r < 2 {
		return c.inErrf(0, "%q has rank %d, want at least 2", x.Name, r)
	}
	k := int64(0)
	if t, err := c.constInput(1, "k"); err != nil {
		return err
	} else if t != nil {
		if t.DType != onnx.Int64 || t.NumElements() != 1 || len(t.Dims) > 1 {
			return c.inErrf(1, "k %q: %v%s, want an int64 scalar", t.Name, t.DType, ShapeString(t.Dims))
		}
		ks, err := t.Int64s()
		if err != nil {
			return c.inErrf(1, "k %q: %v", t.Name, err)
		}
		k = ks[0]
	}
	upper, err := c.attrInt("upper", 1)
	if err != nil {
		return err
	}
	if upper != 0 && upper != 1 {
		return c.errf("upper %d, want 0 or 1", upper)
	}
	m, n := x.Shape[r-2], x.Shape[r-1]
	if _, err := checkedElements([]int64{m, n}); err != nil {
		// An empty batch axis leaves x small whatever M and N are.
		return c.inErrf(0, "mask of %q: %v", x.Name, err)
	}
	mask := make([]byte, m*n)
	for i := int64(0); i < m; i++ {
		for j := int64(0); j < n; j++ {
			// j-i is within ±(M+N), so the comparison cannot overflow.
			if d := j - i; upper == 1 && d >= k || upper == 0 && d <= k {
				mask[i*n+j] = 1
			}
		}
	}
	st := c.built("Trilu as Where over a constant mask %s", ShapeString([]int64{m, n}))
	keep, err := st.constant("mask", &onnx.Tensor{DType: onnx.Bool, Dims: []int64{m, n}, Raw: mask})
	if err != nil {
		return err
	}
	zero, err := st.constant("zero", &onnx.Tensor{DType: x.DType, Dims: []int64{}, Raw: make([]byte, x.DType.ElemSize())})
	if err != nil {
		return err
	}
	return st.last("Where", []string{keep, c.n.Inputs[0], zero})
}
