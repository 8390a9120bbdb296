package graph

import (
	"encoding/binary"
	"fmt"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// inferPad builds Pad in constant mode (the default) through the
// builder: along each axis, a negative pad first crops (Slice), then the
// fill value, a constant slab, is concatenated before and after
// (Concat). pads (an attribute before opset 11, then a constant input),
// the constant value (a constant scalar, 0 when omitted) and, from opset
// 18, axes (a constant input) are read as the operator defines them.
// The edge, reflect and wrap modes are a Gather along each padded axis
// with constant indices (padIndices), which crops too.
func inferPad(c *nodeCtx) error {
	if err := c.arity(1, 4); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if !runtimeType(x.DType) {
		return c.inErrf(0, "element type %v of %q is not supported by Pad", x.DType, x.Name)
	}
	mode, err := c.n.AttrString("mode", "constant")
	if err != nil {
		return c.errf("%v", err)
	}
	switch mode {
	case "constant", "edge", "reflect":
	case "wrap":
		if c.b.opset < 19 {
			return c.errf("mode \"wrap\" needs opset 19, the model imports %d", c.b.opset)
		}
	default:
		return c.errf("mode %q is not one of constant, edge, reflect and wrap", mode)
	}
	r := len(x.Shape)
	var pads []int64
	fill := make([]byte, x.DType.ElemSize())
	if c.b.opset < 11 {
		if pads, _, err = c.attrInts("pads"); err != nil {
			return err
		}
		v, err := c.n.AttrFloat("value", 0)
		if err != nil {
			return c.errf("%v", err)
		}
		if v != 0 {
			if fill, err = floatFill(x.DType, float64(v)); err != nil {
				return c.errf("value %v: %v", v, err)
			}
		}
	} else {
		var ok bool
		if pads, ok, err = c.intList(1, "pads"); err != nil {
			return err
		} else if !ok {
			return c.inErrf(1, "pads missing")
		}
		if t, err := c.constInput(2, "constant_value"); err != nil {
			return err
		} else if t != nil {
			if t.DType != x.DType || t.NumElements() != 1 {
				return c.inErrf(2, "constant_value %q: %v%s, want one %v element", t.Name, t.DType, ShapeString(t.Dims), x.DType)
			}
			fill = t.Raw
		}
	}
	axes := make([]int64, r)
	for d := range axes {
		axes[d] = int64(d)
	}
	if c.has(3) {
		given, _, err := c.intList(3, "axes")
		if err != nil {
			return err
		}
		axes = axes[:0]
		seen := make([]bool, r)
		for _, a := range given {
			if a < -int64(r) || a >= int64(r) || seen[(a+int64(r))%int64(r)] {
				return c.inErrf(3, "axes %v: axis %d out of range for rank %d, or twice", given, a, r)
			}
			seen[(a+int64(r))%int64(r)] = true
			axes = append(axes, (a+int64(r))%int64(r))
		}
	}
	if len(pads) != 2*len(axes) {
		return c.errf("pads %v: %d values, want %d (a begin and an end for each of %d axes)", pads, len(pads), 2*len(axes), len(axes))
	}
	for k, a := range axes {
		for _, v := range []int64{pads[k], pads[k+len(axes)]} {
			if v < -x.Shape[a] || v > MaxElements {
				return c.errf("pads %v: %d out of range for axis %d of %d", pads, v, a, x.Shape[a])
			}
		}
	}
	if mode != "constant" {
		return padGathers(c, x, mode, axes, pads)
	}
	st := c.built("Pad of %v as Slice and Concat", pads)
	shape := copyShape(x.Shape)
	cur := c.n.Inputs[0]
	for k, a := range axes {
		if cur, err = st.pad(cur, shape, x.DType, fill, int(a), pads[k], pads[k+len(axes)]); err != nil {
			return err
		}
	}
	return st.last("Identity", []string{cur})
}

// floatFill is v as one element of type d (float or float16).
func floatFill(d onnx.DataType, v float64) ([]byte, error) {
	switch d {
	case onnx.Float:
		return onnx.NewFloat32("", nil, []float32{float32(v)}).Raw, nil
	case onnx.Float16:
		return binary.LittleEndian.AppendUint16(nil, numfmt.F64ToF16(v)), nil
	}
	return nil, fmt.Errorf("a value for %v elements", d)
}

// padGathers builds Pad in edge, reflect or wrap mode: a Gather along
// each padded axis with the constant indices padIndices gives.
func padGathers(c *nodeCtx, x *Value, mode string, axes, pads []int64) error {
	how := "Identity (no pad)"
	for _, p := range pads {
		if p != 0 {
			how = "a Gather along each padded axis"
		}
	}
	st := c.built("Pad of %v in %s mode as %s", pads, mode, how)
	cur := c.n.Inputs[0]
	for k, a := range axes {
		begin, end := pads[k], pads[k+len(axes)]
		if begin == 0 && end == 0 {
			continue
		}
		idx, err := padIndices(mode, x.Shape[a], begin, end)
		if err != nil {
			return c.errf("pads %v, axis %d of %d: %v", pads, a, x.Shape[a], err)
		}
		ind, err := st.ints("index", idx...)
		if err != nil {
			return err
		}
		if cur, err = st.node("Gather", "gather", []string{cur, ind}, "", onnx.IntAttr("axis", a)); err != nil {
			return err
		}
	}
	return st.last("Identity", []string{cur})
}

// padIndices returns, for each element of an axis of n elements padded
// by begin and end, the input element it copies. A negative pad crops
// first, as onnxruntime does; then, from the k elements kept, edge
// repeats the border element, reflect mirrors about it (not repeating
// it; each pad below k, as onnxruntime requires) and wrap continues
// from the other end.
func padIndices(mode string, n, begin, end int64) ([]int64, error) {
	lo := max(-begin, 0)
	k := n - lo - max(-end, 0)
	b, e := max(begin, 0), max(end, 0)
	switch {
	case k <= 0:
		return nil, fmt.Errorf("no element left to pad from")
	case b+k+e > maxBuiltIndices:
		return nil, fmt.Errorf("%d elements along it, more than the %d a gather's index table may hold", b+k+e, maxBuiltIndices)
	case mode == "reflect" && (b >= k || e >= k):
		return nil, fmt.Errorf("reflect pads must be below the axis' size")
	}
	idx := make([]int64, b+k+e)
	for j := range idx {
		i := int64(j) - b
		switch mode {
		case "edge":
			i = min(max(i, 0), k-1)
		case "reflect":
			if i < 0 {
				i = -i
			}
			if i >= k {
				i = 2*(k-1) - i
			}
		case "wrap":
			i = (i%k + k) % k
		}
		idx[j] = lo + i
	}
	return idx, nil
}
