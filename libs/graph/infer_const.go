package graph

// ConstantOfShape and Range: their output shapes depend on their operands'
// values, which must therefore be constant; both are always folded.

import (
	"fmt"
	"math"

	"ipu.local/libs/onnx"
)

// maxFoldBytes and maxFoldElements bound a folded constant: beyond them
// a node is left to the device (or, when it must fold, refused), so
// that a hostile model cannot make Build allocate gigabytes.
const (
	maxFoldBytes    = 16 << 20
	maxFoldElements = 4 << 20
)

func inferConstantOfShape(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	if len(c.n.Outputs) != 1 {
		return c.errf("%d outputs, want 1", len(c.n.Outputs))
	}
	dims, _, err := c.intList(0, "shape")
	if err != nil {
		return err
	}
	for _, d := range dims {
		if d < 0 {
			return c.inErrf(0, "shape %v has a negative dimension", dims)
		}
	}
	n, err := checkedElements(dims)
	if err != nil {
		return c.inErrf(0, "%v", err)
	}
	value, err := c.n.AttrTensor("value")
	if err != nil {
		return c.errf("%v", err)
	}
	if value == nil {
		value = onnx.NewFloat32("value", []int64{1}, []float32{0})
	}
	if value.NumElements() != 1 {
		return c.errf("value has shape %s, want one element", ShapeString(value.Dims))
	}
	if value.DType == onnx.Double && c.b.opt.DowncastFP64 {
		if value, err = c.b.downcastTensor(value); err != nil {
			return c.errf("value: %v", err)
		}
		c.b.downcast[c.n.Outputs[0]] = true
	}
	if value.DType == onnx.Double {
		return c.errf("output %q: %s", c.n.Outputs[0], doubleMsg)
	}
	if !runtimeType(value.DType) {
		return c.errf("value of element type %v is not supported", value.DType)
	}
	size := int64(value.DType.ElemSize())
	if n*size > maxFoldBytes || n > maxFoldElements {
		return c.errf("output of shape %v is larger than a folded constant may be (%d elements, %d bytes)", dims, maxFoldElements, maxFoldBytes)
	}
	raw := make([]byte, 0, n*size)
	for i := int64(0); i < n; i++ {
		raw = append(raw, value.Raw...)
	}
	t := &onnx.Tensor{DType: value.DType, Dims: dims, Raw: raw}
	c.b.g.Folded = append(c.b.g.Folded, Rewrite{Node: c.name, What: fmt.Sprintf("ConstantOfShape folded: %v%s", t.DType, ShapeString(dims))})
	return c.constOutput(0, t)
}

// rangeScalar returns Range operand i: a constant with one element.
func (c *nodeCtx) rangeScalar(i int, what string) (*onnx.Tensor, error) {
	t, err := c.constInput(i, what)
	if err != nil {
		return nil, err
	}
	if t.NumElements() != 1 {
		return nil, c.inErrf(i, "%s %q has shape %s, want a scalar", what, t.Name, ShapeString(t.Dims))
	}
	return t, nil
}

func inferRange(c *nodeCtx) error {
	if err := c.arity(3, 3); err != nil {
		return err
	}
	if len(c.n.Outputs) != 1 {
		return c.errf("%d outputs, want 1", len(c.n.Outputs))
	}
	var ts [3]*onnx.Tensor
	for i, what := range []string{"start", "limit", "delta"} {
		t, err := c.rangeScalar(i, what)
		if err != nil {
			return err
		}
		if t.DType != onnx.Float && !isInt(t.DType) {
			return c.inErrf(i, "%s %q: element type %v is not supported by Range", what, t.Name, t.DType)
		}
		if i > 0 && t.DType != ts[0].DType {
			return c.inErrf(i, "%s %q: element type %v does not match %v", what, t.Name, t.DType, ts[0].DType)
		}
		ts[i] = t
	}
	var t *onnx.Tensor
	var err error
	if ts[0].DType == onnx.Float {
		t, err = floatRange(ts)
	} else {
		t, err = intRange(ts)
	}
	if err != nil {
		return c.errf("%v", err)
	}
	c.b.g.Folded = append(c.b.g.Folded, Rewrite{Node: c.name, What: fmt.Sprintf("Range folded: %v%s", t.DType, ShapeString(t.Dims))})
	return c.constOutput(0, t)
}

// rangeCount is ONNX's max(ceil((limit-start)/delta), 0), computed in
// float64 as onnxruntime does, bounded as folded constants are.
func rangeCount(diff, delta float64) (int64, error) {
	if delta == 0 {
		return 0, fmt.Errorf("delta is 0")
	}
	n := math.Ceil(diff / delta)
	switch {
	case n != n:
		return 0, fmt.Errorf("the element count is not a number")
	case n <= 0:
		return 0, nil
	case n > maxFoldBytes/8:
		return 0, fmt.Errorf("%g elements, more than the %d a folded constant may hold", n, maxFoldBytes/8)
	}
	return int64(n), nil
}

// floatRange gives start, start+delta, ... accumulating in float32, as
// the ONNX function body and onnxruntime do.
func floatRange(ts [3]*onnx.Tensor) (*onnx.Tensor, error) {
	var v [3]float32
	for i, t := range ts {
		f, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		v[i] = f[0]
	}
	n, err := rangeCount(float64(float32(v[1]-v[0])), float64(v[2]))
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	acc := v[0]
	for i := range out {
		out[i] = acc
		acc = float32(acc + v[2])
	}
	return float32Tensor("", []int64{n}, out), nil
}

func intRange(ts [3]*onnx.Tensor) (*onnx.Tensor, error) {
	var v [3]int64
	for i, t := range ts {
		x, err := constInts(t)
		if err != nil {
			return nil, err
		}
		v[i] = x[0]
	}
	n, err := rangeCount(float64(v[1]-v[0]), float64(v[2]))
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = v[0] + int64(i)*v[2]
	}
	return intTensor("", ts[0].DType, []int64{n}, out), nil
}
