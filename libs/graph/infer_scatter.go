package graph

import "ipu.local/libs/onnx"

// inferScatterND builds ScatterND (opset 11; reduction "none") with
// constant indices, as exporters write a slice assignment (x[..., :n] =
// y, its indices built from shapes): data's slices at the indices take
// the updates' in order, the last of duplicates winning as in
// onnxruntime. It is data movement: with q the indices' last dimension,
// data reshaped to [N, S] (N the product of its first q dimensions) and
// the updates to [U, S] are concatenated, and a Gather with constant
// indices picks each of the N rows, from data or from its last update,
// reshaped back. Through the builder, constant data and updates fold.
func inferScatterND(c *nodeCtx) error {
	if err := c.arity(3, 3); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	upd, err := c.input(2)
	if err != nil {
		return err
	}
	if upd.DType != x.DType {
		return c.inErrf(2, "element type %v does not match %v", upd.DType, x.DType)
	}
	if red, err := c.n.AttrString("reduction", "none"); err != nil {
		return c.errf("%v", err)
	} else if red != "none" {
		return c.errf("reduction %q is not supported (only none)", red)
	}
	t, err := c.constInput(1, "indices")
	if err != nil {
		return err
	}
	if t.DType != onnx.Int64 || len(t.Dims) == 0 {
		return c.inErrf(1, "indices %q: %v%s, want int64 of rank 1 or more", t.Name, t.DType, ShapeString(t.Dims))
	}
	idx, err := t.Int64s()
	if err != nil {
		return c.inErrf(1, "indices %q: %v", t.Name, err)
	}
	r, q := len(x.Shape), int(t.Dims[len(t.Dims)-1])
	if q < 1 || q > r {
		return c.inErrf(1, "indices %q: last dimension %d, want 1 to data's rank %d", t.Name, q, r)
	}
	want := append(copyShape(t.Dims[:len(t.Dims)-1]), x.Shape[q:]...)
	if !equalShapes(upd.Shape, want) {
		return c.inErrf(2, "updates %q: shape %s, want %s (the indices' %s, then data's %s)", upd.Name, ShapeString(upd.Shape), ShapeString(want),
			ShapeString(t.Dims[:len(t.Dims)-1]), ShapeString(x.Shape[q:]))
	}
	n, s := NumElements(x.Shape[:q]), NumElements(x.Shape[q:])
	u := int64(len(idx) / q)
	rows := make([]int64, n)
	for i := range rows {
		rows[i] = int64(i)
	}
	for k := int64(0); k < u; k++ {
		var p int64
		for d := 0; d < q; d++ {
			v, dim := idx[k*int64(q)+int64(d)], x.Shape[d]
			if v < -dim || v >= dim {
				return c.inErrf(1, "indices %q: update %d's index %d along axis %d is out of range [%d, %d)", t.Name, k, v, d, -dim, dim)
			}
			p = p*dim + (v+dim)%dim
		}
		rows[p] = n + k
	}
	st := c.built("ScatterND as a Gather of %d rows of %d elements over the data's and %d updates' rows", n, s, u)
	if u == 0 || n == 0 || s == 0 {
		return st.last("Identity", []string{c.n.Inputs[0]})
	}
	ds, err := st.ints("data_rows", n, s)
	if err != nil {
		return err
	}
	us, err := st.ints("update_rows", u, s)
	if err != nil {
		return err
	}
	a, err := st.node("Reshape", "data", []string{c.n.Inputs[0], ds}, "")
	if err != nil {
		return err
	}
	b, err := st.node("Reshape", "updates", []string{c.n.Inputs[2], us}, "")
	if err != nil {
		return err
	}
	both, err := st.node("Concat", "rows", []string{a, b}, "", onnx.IntAttr("axis", 0))
	if err != nil {
		return err
	}
	pick, err := st.constant("pick", onnx.NewInt64("", []int64{n}, rows))
	if err != nil {
		return err
	}
	picked, err := st.node("Gather", "picked", []string{both, pick}, "", onnx.IntAttr("axis", 0))
	if err != nil {
		return err
	}
	back, err := st.ints("shape", x.Shape...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{picked, back})
}
