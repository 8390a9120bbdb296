package graph

// Shape inference of the layout operators and Cast, Constant.

import (
	"fmt"
	"slices"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

func inferTranspose(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	r := len(x.Shape)
	perm := make([]int, r)
	p, ok, err := c.attrInts("perm")
	if err != nil {
		return err
	}
	if !ok {
		for i := range perm {
			perm[i] = r - 1 - i
		}
	} else {
		if len(p) != r {
			return c.errf("perm %v has %d entries, input rank is %d", p, len(p), r)
		}
		seen := make([]bool, r)
		for i, v := range p {
			if v < 0 || v >= int64(r) || seen[v] {
				return c.errf("perm %v is not a permutation of 0..%d", p, r-1)
			}
			seen[v] = true
			perm[i] = int(v)
		}
	}
	shape := make([]int64, r)
	for i, ax := range perm {
		shape[i] = x.Shape[ax]
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Transpose{Perm: perm}
	return c.one(x.DType, shape)
}

func inferCast(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if c.n.Attr("to") == nil {
		return c.errf("missing attribute \"to\"")
	}
	to, err := c.attrInt("to", 0)
	if err != nil {
		return err
	}
	d := onnx.DataType(to)
	switch {
	case int64(d) == to && d == onnx.Double && c.b.opt.DowncastFP64:
		d = onnx.Float
		c.b.downcast[c.n.Outputs[0]] = true
	case int64(d) == to && d == onnx.Double:
		return c.errf("output %q: %s", c.n.Outputs[0], doubleMsg)
	case int64(d) != to || !runtimeType(d):
		return c.errf("cast to %v is not supported", onnx.DataType(int32(to)))
	}
	if isFP8(d) && c.b.opset < 19 {
		return c.errf("cast to %v needs opset 19, the model imports %d", d, c.b.opset)
	}
	sat, err := c.attrBool("saturate", true)
	if err != nil {
		return err
	}
	if (x.DType == onnx.Float16 || isFP8(x.DType)) && isInt(d) {
		// The device truncates FP32 words: the value goes to float first
		// (exact), then to the integer.
		st := c.built("Cast from %s to %s as Cast to float, then to %s", x.DType, d, d)
		f, err := st.node("Cast", "float", []string{c.n.Inputs[0]}, "", onnx.IntAttr("to", int64(onnx.Float)))
		if err != nil {
			return err
		}
		return st.last("Cast", []string{f}, onnx.IntAttr("to", int64(d)))
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Cast{To: d, Saturate: sat}
	return c.one(d, copyShape(x.Shape))
}

func isFP8(d onnx.DataType) bool {
	switch d {
	case onnx.Float8E4M3FN, onnx.Float8E4M3FNUZ, onnx.Float8E5M2, onnx.Float8E5M2FNUZ:
		return true
	}
	return false
}

// FP8Format returns the numfmt format of an FP8 element type.
func FP8Format(d onnx.DataType) (numfmt.Format, bool) {
	switch d {
	case onnx.Float8E4M3FN:
		return numfmt.E4M3FN, true
	case onnx.Float8E4M3FNUZ:
		return numfmt.E4M3FNUZ, true
	case onnx.Float8E5M2:
		return numfmt.E5M2, true
	case onnx.Float8E5M2FNUZ:
		return numfmt.E5M2FNUZ, true
	}
	return 0, false
}

func inferReshape(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	t, err := c.constInput(1, "shape")
	if err != nil {
		return err
	}
	want, err := c.int64s(1, t, "shape")
	if err != nil {
		return err
	}
	allowZero := false
	if c.b.opset >= 14 {
		if allowZero, err = c.attrBool("allowzero", false); err != nil {
			return err
		}
	}
	shape, err := ReshapeShape(x.Shape, want, allowZero)
	if err != nil {
		return c.inErrf(1, "%v", err)
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Reshape{Shape: copyShape(shape)}
	return c.one(x.DType, shape)
}

// ReshapeShape resolves an ONNX Reshape shape operand against the input
// shape: 0 copies the input's dimension (unless allowZero), one -1 takes
// what remains.
func ReshapeShape(in, want []int64, allowZero bool) ([]int64, error) {
	total, err := checkedElements(in)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(want))
	infer := -1
	known := int64(1)
	for i, d := range want {
		switch {
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", want)
			}
			infer = i
			continue
		case d < -1:
			return nil, fmt.Errorf("shape %v has a negative dimension %d", want, d)
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("shape %v copies dimension %d, input %s has rank %d", want, i, ShapeString(in), len(in))
			}
			d = in[i]
		case d == 0 && slices.Contains(want, -1):
			return nil, fmt.Errorf("shape %v has both 0 and -1 with allowzero", want)
		}
		out[i] = d
		if d > MaxElements {
			return nil, fmt.Errorf("shape %v has a dimension above %d", want, MaxElements)
		}
		if known *= d; known > MaxElements {
			return nil, fmt.Errorf("shape %v has more than %d elements", want, MaxElements)
		}
	}
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v", ShapeString(in), total, want)
		}
		out[infer] = total / known
		known = total
	}
	if known != total {
		return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v (%d elements)", ShapeString(in), total, want, known)
	}
	return out, nil
}

func inferFlatten(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	ax, err := c.attrInt("axis", 1)
	if err != nil {
		return err
	}
	if ax < 0 && c.b.opset < 11 {
		return c.errf("negative axis %d needs opset 11", ax)
	}
	axis, err := normAxis(ax, len(x.Shape), true)
	if err != nil {
		return c.errf("%v", err)
	}
	shape := []int64{NumElements(x.Shape[:axis]), NumElements(x.Shape[axis:])}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Flatten{Axis: axis}
	return c.one(x.DType, shape)
}

func inferConstant(c *nodeCtx) error {
	if err := c.arity(0, 0); err != nil {
		return err
	}
	if len(c.n.Outputs) != 1 {
		return c.errf("%d outputs, want 1", len(c.n.Outputs))
	}
	if len(c.n.Attrs) != 1 {
		return c.errf("%d attributes, want exactly one value", len(c.n.Attrs))
	}
	a := &c.n.Attrs[0]
	out := c.n.Outputs[0]
	var t *onnx.Tensor
	switch {
	case a.Name == "value" && a.Type == onnx.AttrTensor && a.T != nil:
		t = &onnx.Tensor{Name: out, DType: a.T.DType, Dims: copyShape(a.T.Dims), Raw: a.T.Raw}
	case a.Name == "value_float" && a.Type == onnx.AttrFloat:
		t = onnx.NewFloat32(out, []int64{}, []float32{a.F})
	case a.Name == "value_floats" && a.Type == onnx.AttrFloats:
		t = onnx.NewFloat32(out, []int64{int64(len(a.Floats))}, a.Floats)
	case a.Name == "value_int" && a.Type == onnx.AttrInt:
		t = newInt64(out, []int64{}, []int64{a.I})
	case a.Name == "value_ints" && a.Type == onnx.AttrInts:
		t = newInt64(out, []int64{int64(len(a.Ints))}, a.Ints)
	default:
		return c.errf("constant attribute %q of type %v is not supported", a.Name, a.Type)
	}
	if t.Dims == nil {
		t.Dims = []int64{}
	}
	if t.DType == onnx.Double && c.b.opt.DowncastFP64 {
		var err error
		if t, err = c.b.downcastTensor(t); err != nil {
			return c.errf("%v", err)
		}
	}
	c.b.sc.consts[out] = t
	c.done = true
	return nil
}

func newInt64(name string, dims, v []int64) *onnx.Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		u := uint64(x)
		raw = append(raw, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Int64, Dims: dims, Raw: raw}
}

// DecodeFloats returns the elements of a float, float16 or FP8 tensor as
// exact float64 values.
func DecodeFloats(t *onnx.Tensor) ([]float64, error) {
	switch t.DType {
	case onnx.Float:
		v, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, nil
	case onnx.Float16:
		v, err := t.Float16Bits()
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, h := range v {
			out[i] = numfmt.F16ToF64(h)
		}
		return out, nil
	}
	if f, ok := FP8Format(t.DType); ok {
		out := make([]float64, len(t.Raw))
		for i, b := range t.Raw {
			out[i] = numfmt.F8ToF64(b, f, 0)
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: element type %v is not a float type", t.Name, t.DType)
}
