package graph

import (
	"fmt"

	"ipu.local/libs/onnx"
)

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
	k := &argBuild{c: c, axis: a}
	extreme := "ReduceMax"
	if c.n.OpType == "ArgMin" {
		extreme = "ReduceMin"
	}
	m, err := k.reduce(extreme, "extreme", c.n.Inputs[0], true, "")
	if err != nil {
		return err
	}
	eq, err := k.step("Equal", "equal", []string{c.n.Inputs[0], m}, "")
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
	ar, err := k.constant("arange", onnx.NewInt64("", shape, idx))
	if err != nil {
		return err
	}
	other, pick := L, "ReduceMin"
	if last {
		other, pick = -1, "ReduceMax"
	}
	none, err := k.constant("none", onnx.NewInt64("", nil, []int64{other}))
	if err != nil {
		return err
	}
	w, err := k.step("Where", "where", []string{eq, ar, none}, "")
	if err != nil {
		return err
	}
	_, err = k.reduce(pick, "index", w, keep, c.n.Outputs[0])
	return err
}

// argBuild appends an ArgMax's steps.
type argBuild struct {
	c    *nodeCtx
	axis int64
}

// step builds one node through the builder into out (a fresh name when
// out is empty) and returns its output's name.
func (k *argBuild) step(op, what string, ins []string, out string, attrs ...onnx.Attr) (string, error) {
	name := fmt.Sprintf("%s/%s", k.c.name, what)
	if out == "" {
		out = k.c.b.freshName(name)
	}
	return out, k.c.builtNode(op, name, ins, out, attrs...)
}

// constant makes a constant and returns its name.
func (k *argBuild) constant(what string, t *onnx.Tensor) (string, error) {
	v, err := k.c.b.freshConst(fmt.Sprintf("%s/%s", k.c.name, what), t)
	if err != nil {
		return "", k.c.errf("%v", err)
	}
	return v.Name, nil
}

// reduce reduces x along the axis with op (ReduceMax or ReduceMin), its
// axes an attribute or, from opset 18, an input.
func (k *argBuild) reduce(op, what, x string, keep bool, out string) (string, error) {
	keepdims := onnx.IntAttr("keepdims", b2i(keep))
	if k.c.b.opset < 18 {
		return k.step(op, what, []string{x}, out, onnx.IntsAttr("axes", k.axis), keepdims)
	}
	axes, err := k.constant("axes", onnx.NewInt64("", []int64{1}, []int64{k.axis}))
	if err != nil {
		return "", err
	}
	return k.step(op, what, []string{x, axes}, out, keepdims)
}
