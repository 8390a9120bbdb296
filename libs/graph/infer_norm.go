package graph

import "ipu.local/libs/onnx"

// inferInstanceNorm builds InstanceNormalization through the builder:
// each image's channel normalized over its spatial axes, y = scale * (x -
// mean) / sqrt(var + epsilon) + B, var the mean of the squared
// differences (as onnxruntime computes it), scale and B per channel
// (reshaped to [C, 1, ...]). Exporters write GroupNorm as it too, over
// a view of [N, G, -1].
func inferInstanceNorm(c *nodeCtx) error {
	x, err := normInput(c, 3, 3, "[N, C, D1, ...]")
	if err != nil {
		return err
	}
	r := len(x.Shape)
	if err := normParams(c, x, x.Shape[1], 1, 3); err != nil {
		return err
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
	d, err := normalized(st, in[0], x.DType, axes, eps)
	if err != nil {
		return err
	}
	if d, err = affine(st, d, in[1], in[2], channelShape(x.Shape[1], r)); err != nil {
		return err
	}
	out, err := st.ints("out", x.Shape...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{d, out})
}

// channelShape is [c, 1, ...]: a per-channel parameter's view against a
// tensor of rank r.
func channelShape(c int64, r int) []int64 {
	s := make([]int64, r-1)
	for i := range s {
		s[i] = 1
	}
	s[0] = c
	return s
}

// affine appends x * scale + bias, the parameters viewed as pshape, and
// returns it.
func affine(st *steps, x, scale, bias string, pshape []int64) (string, error) {
	ps, err := st.ints("pshape", pshape...)
	if err != nil {
		return "", err
	}
	s, err := st.node("Reshape", "scale", []string{scale, ps}, "")
	if err != nil {
		return "", err
	}
	b, err := st.node("Reshape", "bias", []string{bias, ps}, "")
	if err != nil {
		return "", err
	}
	if x, err = st.node("Mul", "scaled", []string{x, s}, ""); err != nil {
		return "", err
	}
	return st.node("Add", "shifted", []string{x, b}, "")
}

// normalized appends (x - mean) / sqrt(var + eps) over axes (kept), var
// the mean of the squared differences, and returns it.
func normalized(st *steps, x string, dt onnx.DataType, axes []int64, eps float32) (string, error) {
	mean, err := st.reduce("ReduceMean", x, axes, true, "")
	if err != nil {
		return "", err
	}
	d, err := st.node("Sub", "centred", []string{x, mean}, "")
	if err != nil {
		return "", err
	}
	sq, err := st.node("Mul", "squared", []string{d, d}, "")
	if err != nil {
		return "", err
	}
	v, err := st.reduce("ReduceMean", sq, axes, true, "")
	if err != nil {
		return "", err
	}
	e, err := st.constant("epsilon", floatTensor(dt, []int64{}, []float64{float64(eps)}))
	if err != nil {
		return "", err
	}
	if v, err = st.node("Add", "var", []string{v, e}, ""); err != nil {
		return "", err
	}
	if v, err = st.node("Sqrt", "sd", []string{v}, ""); err != nil {
		return "", err
	}
	return st.node("Div", "normalized", []string{d, v}, "")
}

// inferGroupNorm builds GroupNormalization through the builder: x [N, C,
// ...] viewed as [N, G, C/G * spatial], normalized over its last axis as
// InstanceNormalization does, then scaled and shifted: per group
// (scale and bias of [G], opset 18) in that view, or per channel ([C],
// opset 21) after the view back to x's shape.
func inferGroupNorm(c *nodeCtx) error {
	x, err := normInput(c, 3, 2, "[N, C, ...]")
	if err != nil {
		return err
	}
	r := len(x.Shape)
	g, err := c.attrInt("num_groups", 0)
	if err != nil {
		return err
	}
	ch := x.Shape[1]
	if g < 1 || ch%g != 0 {
		return c.errf("num_groups %d does not divide the %d channels", g, ch)
	}
	perChannel := c.b.opset >= 21 // opset 18: a scale and bias per group
	per, what := g, "group"
	if perChannel {
		per, what = ch, "channel"
	}
	if err := normParams(c, x, per, 1, 3); err != nil {
		return err
	}
	if stash, err := c.attrInt("stash_type", 1); err != nil || stash != int64(onnx.Float) {
		if err != nil {
			return err
		}
		return c.errf("stash_type %v is not supported (only float)", onnx.DataType(int32(stash)))
	}
	eps, err := c.attrFloat("epsilon", 1e-5)
	if err != nil {
		return err
	}
	st := c.built("GroupNormalization of %d groups as a view of [N, %d, -1], normalized as InstanceNormalization, scaled per %s", g, g, what)
	in := c.n.Inputs
	view, err := st.ints("groups", x.Shape[0], g, -1)
	if err != nil {
		return err
	}
	cur, err := st.node("Reshape", "groups", []string{in[0], view}, "")
	if err != nil {
		return err
	}
	if cur, err = normalized(st, cur, x.DType, []int64{2}, eps); err != nil {
		return err
	}
	pshape := []int64{g, 1}
	if perChannel {
		back, err := st.ints("back", x.Shape...)
		if err != nil {
			return err
		}
		if cur, err = st.node("Reshape", "back", []string{cur, back}, ""); err != nil {
			return err
		}
		pshape = channelShape(ch, r)
	}
	if cur, err = affine(st, cur, in[1], in[2], pshape); err != nil {
		return err
	}
	out, err := st.ints("out", x.Shape...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{cur, out})
}

// normInput checks a normalization's operand count (n) and returns its
// input, float or float16 of rank at least minRank (want names the
// shape in the error).
func normInput(c *nodeCtx, n, minRank int, want string) (*Value, error) {
	if err := c.arity(n, n); err != nil {
		return nil, err
	}
	x, err := c.arith(0)
	if err != nil {
		return nil, err
	}
	if len(x.Shape) < minRank {
		return nil, c.inErrf(0, "shape %s: want %s", ShapeString(x.Shape), want)
	}
	return x, nil
}

// normParams checks inputs from..to-1: each [n] of x's type.
func normParams(c *nodeCtx, x *Value, n int64, from, to int) error {
	for i := from; i < to; i++ {
		p, err := c.arith(i)
		if err != nil {
			return err
		}
		if p.DType != x.DType || len(p.Shape) != 1 || p.Shape[0] != n {
			return c.inErrf(i, "%q %v%s: want [%d] of %v", p.Name, p.DType, ShapeString(p.Shape), n, x.DType)
		}
	}
	return nil
}
