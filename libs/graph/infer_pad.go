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
// 18, axes (a constant input) are read as the operator defines them; the
// edge, reflect and wrap modes are refused in one line.
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
	if mode != "constant" {
		return c.errf("mode %q is not supported (only constant)", mode)
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
	p := &padBuild{c: c, dt: x.DType, fill: fill, shape: copyShape(x.Shape)}
	cur := c.n.Inputs[0]
	for k, a := range axes {
		begin, end := pads[k], pads[k+len(axes)]
		if cur, err = p.axis(cur, int(a), begin, end); err != nil {
			return err
		}
	}
	return c.builtNode("Identity", c.name, []string{cur}, c.n.Outputs[0])
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

// padBuild appends a Pad's steps, tracking the shape.
type padBuild struct {
	c     *nodeCtx
	dt    onnx.DataType
	fill  []byte
	shape []int64
	n     int
}

func (p *padBuild) name(what string) string {
	p.n++
	return fmt.Sprintf("%s/%s%d", p.c.name, what, p.n)
}

// constant makes a constant and returns its name.
func (p *padBuild) constant(what string, t *onnx.Tensor) (string, error) {
	v, err := p.c.b.freshConst(p.name(what), t)
	if err != nil {
		return "", p.c.errf("%v", err)
	}
	return v.Name, nil
}

// axis pads x along axis a by begin and end elements (negative: crops).
func (p *padBuild) axis(x string, a int, begin, end int64) (string, error) {
	d := p.shape[a]
	if begin < 0 || end < 0 {
		lo, hi := max(-begin, 0), d-max(-end, 0)
		if lo > hi {
			return "", p.c.errf("pads crop axis %d of %d by %d and %d", a, d, -min(begin, 0), -min(end, 0))
		}
		var names [3]string
		for i, v := range []int64{lo, hi, int64(a)} {
			var err error
			if names[i], err = p.constant("crop", onnx.NewInt64("", []int64{1}, []int64{v})); err != nil {
				return "", err
			}
		}
		out := p.c.b.freshName(p.name("cropped"))
		if err := p.c.builtNode("Slice", p.name("crop"), []string{x, names[0], names[1], names[2]}, out); err != nil {
			return "", err
		}
		x, d = out, hi-lo
		p.shape[a] = d
		begin, end = max(begin, 0), max(end, 0)
	}
	if begin == 0 && end == 0 {
		return x, nil
	}
	parts := []string{x}
	for _, side := range []struct {
		n     int64
		first bool
	}{{begin, true}, {end, false}} {
		if side.n == 0 {
			continue
		}
		s := copyShape(p.shape)
		s[a] = side.n
		n := NumElements(s)
		if _, err := checkedElements(s); err != nil {
			return "", p.c.errf("pads along axis %d: %v", a, err)
		}
		raw := make([]byte, 0, n*int64(len(p.fill)))
		for i := int64(0); i < n; i++ {
			raw = append(raw, p.fill...)
		}
		slab, err := p.constant("fill", &onnx.Tensor{DType: p.dt, Dims: s, Raw: raw})
		if err != nil {
			return "", err
		}
		if side.first {
			parts = append([]string{slab}, parts...)
		} else {
			parts = append(parts, slab)
		}
	}
	out := p.c.b.freshName(p.name("padded"))
	p.shape[a] += begin + end
	return out, p.c.builtNode("Concat", p.name("pad"), parts, out, onnx.IntAttr("axis", int64(a)))
}
