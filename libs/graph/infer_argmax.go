package graph

import "ipu.local/libs/onnx"

// inferArgMax builds ArgMax and ArgMin from operators the device has,
// through the builder: the extreme along the axis (ReduceMax or
// ReduceMin, keepdims), the elements equal to it (Equal), their indices
// where equal and L elsewhere (Where over a constant arange along the
// axis), and the least of those (ReduceMin; with select_last_index the
// greatest, -1 elsewhere). An int64 result, keepdims as the operator
// says. A row holding a NaN has no element equal to its extreme and gets
// L, an index out of range (a Gather with it faults the device), where
// the operator's definition is silent.
func inferArgMax(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.numeric(0)
	if err != nil {
		return err
	}
	r := len(x.Shape)
	if r == 0 {
		return c.inErrf(0, "%q is a scalar: want rank 1 or more", x.Name)
	}
	axis, err := c.attrInt("axis", 0)
	if err != nil {
		return err
	}
	if axis < -int64(r) || axis >= int64(r) {
		return c.errf("axis %d out of range for rank %d", axis, r)
	}
	a := (axis + int64(r)) % int64(r)
	keep, err := c.attrBool("keepdims", true)
	if err != nil {
		return err
	}
	last, err := c.attrBool("select_last_index", false)
	if err != nil {
		return err
	}
	L := x.Shape[a]
	extreme, other, pick := "ReduceMax", L, "ReduceMin"
	if c.n.OpType == "ArgMin" {
		extreme = "ReduceMin"
	}
	if last {
		other, pick = -1, "ReduceMax"
	}
	st := c.built("%s along axis %d as %s, Equal, Where over an arange and %s", c.n.OpType, a, extreme, pick)
	m, err := st.reduce(extreme, c.n.Inputs[0], []int64{a}, true, "")
	if err != nil {
		return err
	}
	eq, err := st.node("Equal", "equal", []string{c.n.Inputs[0], m}, "")
	if err != nil {
		return err
	}
	idx := make([]int64, L)
	for i := range idx {
		idx[i] = int64(i)
	}
	shape := make([]int64, r)
	for d := range shape {
		shape[d] = 1
	}
	shape[a] = L
	ar, err := st.constant("arange", onnx.NewInt64("", shape, idx))
	if err != nil {
		return err
	}
	none, err := st.constant("none", onnx.NewInt64("", nil, []int64{other}))
	if err != nil {
		return err
	}
	w, err := st.node("Where", "where", []string{eq, ar, none}, "")
	if err != nil {
		return err
	}
	_, err = st.reduce(pick, w, []int64{a}, keep, c.n.Outputs[0])
	return err
}
