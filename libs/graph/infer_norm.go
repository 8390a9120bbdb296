package graph

// inferInstanceNorm builds InstanceNormalization through the builder:
// each image's channel normalized over its spatial axes, y = scale * (x -
// mean) / sqrt(var + epsilon) + B, var the mean of the squared
// differences (as onnxruntime computes it), scale and B per channel
// (reshaped to [C, 1, ...]). Exporters write GroupNorm as it too, over
// a view of [N, G, -1].
func inferInstanceNorm(c *nodeCtx) error {
	if err := c.arity(3, 3); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	r := len(x.Shape)
	if r < 3 {
		return c.inErrf(0, "shape %s: want [N, C, D1, ...]", ShapeString(x.Shape))
	}
	for i := 1; i < 3; i++ {
		p, err := c.arith(i)
		if err != nil {
			return err
		}
		if p.DType != x.DType || len(p.Shape) != 1 || p.Shape[0] != x.Shape[1] {
			return c.inErrf(i, "%q %v%s: want [%d] of %v", p.Name, p.DType, ShapeString(p.Shape), x.Shape[1], x.DType)
		}
	}
	eps, err := c.attrFloat("epsilon", 1e-5)
	if err != nil {
		return err
	}
	st := c.built("InstanceNormalization as ReduceMean, Sub, Mul, Sqrt and Div over the spatial axes, then the per-channel scale and bias")
	axes := make([]int64, r-2)
	for i := range axes {
		axes[i] = int64(2 + i)
	}
	in := c.n.Inputs
	mean, err := st.reduce("ReduceMean", in[0], axes, true, "")
	if err != nil {
		return err
	}
	d, err := st.node("Sub", "centred", []string{in[0], mean}, "")
	if err != nil {
		return err
	}
	sq, err := st.node("Mul", "squared", []string{d, d}, "")
	if err != nil {
		return err
	}
	v, err := st.reduce("ReduceMean", sq, axes, true, "")
	if err != nil {
		return err
	}
	e, err := st.constant("epsilon", floatTensor(x.DType, []int64{}, []float64{float64(eps)}))
	if err != nil {
		return err
	}
	if v, err = st.node("Add", "var", []string{v, e}, ""); err != nil {
		return err
	}
	if v, err = st.node("Sqrt", "sd", []string{v}, ""); err != nil {
		return err
	}
	if d, err = st.node("Div", "normalized", []string{d, v}, ""); err != nil {
		return err
	}
	pshape := make([]int64, r-1)
	for i := range pshape {
		pshape[i] = 1
	}
	pshape[0] = x.Shape[1]
	ps, err := st.ints("pshape", pshape...)
	if err != nil {
		return err
	}
	s, err := st.node("Reshape", "scale", []string{in[1], ps}, "")
	if err != nil {
		return err
	}
	b, err := st.node("Reshape", "bias", []string{in[2], ps}, "")
	if err != nil {
		return err
	}
	if d, err = st.node("Mul", "scaled", []string{d, s}, ""); err != nil {
		return err
	}
	return st.last("Add", []string{d, b})
}
