package graph

import (
	"fmt"
	"math"
	"slices"

	"ipu.local/libs/onnx"
)

// inferResize builds Resize (opset 10 on) and Upsample (7 to 9) in mode
// nearest or linear through the builder, one resized axis at a time
// from the last: nearest a Gather of each output position's input
// element by constant indices; linear two Gathers (the neighbours
// below and above each position) weighted by constants along the axis
// and added. The source coordinate of output position o is, in float32
// as onnxruntime computes it, with scale the axis's output over input
// length (the given scale when scales are given):
//
//	half_pixel          (o + 0.5) / scale - 0.5 (Resize's default from opset 11)
//	pytorch_half_pixel  the same, 0 when the output has one element
//	align_corners       o * (in - 1) / (out - 1), 0 when out is 1
//	asymmetric          o / scale (Upsample's and Resize-10's)
//	tf_half_pixel_for_nn (o + 0.5) / scale
//
// Nearest rounds it by nearest_mode (round_prefer_floor, the default,
// round_prefer_ceil, floor or ceil; Upsample and Resize-10 truncate when
// enlarging and round up when shrinking, as onnxruntime does), then
// clamps it into the axis. An axis of scale 1 keeping its length is
// left as it is (in every coordinate mode). Linear clamps the coordinate into [0, in-1]
// and weighs its floor by 1 - f and the next element (the last at the
// end) by f, f its fraction. Cubic mode, tf_crop_and_resize,
// half_pixel_symmetric, antialias and a keep_aspect_ratio_policy other
// than stretch are refused in one line.
func inferResize(c *nodeCtx) error {
	rz, err := resizeAttrs(c)
	if err != nil {
		return err
	}
	x := rz.x
	out, scales, err := rz.outputShape(c)
	if err != nil {
		return err
	}
	if err := c.one(x.DType, out); err != nil {
		return err
	}
	// The axes are resized from the last: the tensor in between holds the
	// output's lengths on the axes done and the input's on the others.
	span := int64(1)
	for i := range out {
		if out[i] > maxBuiltIndices {
			return c.errf("the index table of axis %d, %d elements, is more than %d", i, out[i], maxBuiltIndices)
		}
		span *= max(out[i], x.Shape[i])
		if span > MaxElements {
			return c.errf("resizing %s to %s: an intermediate of more than %d elements", ShapeString(x.Shape), ShapeString(out), MaxElements)
		}
	}
	how := "a Gather along each resized axis"
	if rz.mode == "linear" {
		how = "two Gathers along each resized axis, weighted and added"
	}
	st := c.built("%s (%s, %s) as %s", c.n.OpType, rz.mode, rz.coord, how)
	cur := c.n.Inputs[0]
	for a := len(out) - 1; a >= 0; a-- {
		in, n := x.Shape[a], out[a]
		if n == in && scales[a] == 1 {
			continue // not resized, whatever its coordinate mode would shift
		}
		coords := make([]float32, n)
		for o := range coords {
			coords[o] = rz.source(int64(o), in, n, scales[a])
		}
		if rz.mode == "nearest" {
			idx := make([]int64, n)
			for o, f := range coords {
				idx[o] = min(max(rz.nearest(f, scales[a]), 0), in-1)
			}
			if n == in && isIota(idx) {
				continue
			}
			if cur, err = resizeGather(st, cur, idx, a); err != nil {
				return err
			}
			continue
		}
		if cur, err = rz.linear(st, cur, coords, in, a, len(out)); err != nil {
			return err
		}
	}
	shape, err := st.ints("out", out...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{cur, shape})
}

// resize is a Resize's or an Upsample's input and attributes.
type resize struct {
	x                  *Value
	mode, coord, round string
	legacy             bool // Upsample or Resize-10: truncate enlarging, round up shrinking
	axes               []int
}

// resizeAttrs reads and checks the attributes.
func resizeAttrs(c *nodeCtx) (*resize, error) {
	up := c.n.OpType == "Upsample"
	rz := &resize{legacy: up || c.b.opset < 11, coord: "half_pixel", round: "round_prefer_floor"}
	if rz.legacy {
		rz.coord = "asymmetric"
	}
	var err error
	if rz.x, err = c.input(0); err != nil {
		return nil, err
	}
	if rz.mode, err = c.n.AttrString("mode", "nearest"); err != nil {
		return nil, c.errf("%v", err)
	}
	switch rz.mode {
	case "nearest":
	case "linear", "bilinear": // bilinear: Upsample-7's name for it
		rz.mode = "linear"
		if rz.x.DType != onnx.Float && rz.x.DType != onnx.Float16 {
			return nil, c.inErrf(0, "element type %v: linear mode needs float or float16", rz.x.DType)
		}
	default:
		return nil, c.errf("mode %q is not supported (nearest and linear are)", rz.mode)
	}
	if !rz.legacy {
		if rz.coord, err = c.n.AttrString("coordinate_transformation_mode", "half_pixel"); err != nil {
			return nil, c.errf("%v", err)
		}
		if rz.round, err = c.n.AttrString("nearest_mode", "round_prefer_floor"); err != nil {
			return nil, c.errf("%v", err)
		}
	}
	switch rz.coord {
	case "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn":
	default:
		return nil, c.errf("coordinate_transformation_mode %q is not supported", rz.coord)
	}
	switch rz.round {
	case "round_prefer_floor", "round_prefer_ceil", "floor", "ceil":
	default:
		return nil, c.errf("nearest_mode %q is not supported", rz.round)
	}
	if aa, err := c.attrInt("antialias", 0); err != nil || aa != 0 {
		if err != nil {
			return nil, err
		}
		return nil, c.errf("antialias %d is not supported", aa)
	}
	if p, err := c.n.AttrString("keep_aspect_ratio_policy", "stretch"); err != nil || p != "stretch" {
		if err != nil {
			return nil, c.errf("%v", err)
		}
		return nil, c.errf("keep_aspect_ratio_policy %q is not supported", p)
	}
	r := len(rz.x.Shape)
	rz.axes = make([]int, r)
	for i := range rz.axes {
		rz.axes[i] = i
	}
	if ax, ok, err := c.attrInts("axes"); err != nil {
		return nil, err
	} else if ok {
		if rz.axes, err = c.normAxes(ax, r); err != nil {
			return nil, err
		}
	}
	return rz, nil
}

// outputShape returns the output's shape and each axis's scale (1 on
// the axes not resized), from sizes or scales.
func (rz *resize) outputShape(c *nodeCtx) ([]int64, []float32, error) {
	in := rz.x.Shape
	out := slices.Clone(in)
	scales := make([]float32, len(in))
	for i := range scales {
		scales[i] = 1
	}
	given, err := rz.scalesGiven(c)
	if err != nil {
		return nil, nil, err
	}
	var sizes []int64
	if c.n.OpType == "Resize" && c.b.opset >= 11 {
		t, err := c.constInput(3, "sizes")
		if err != nil {
			return nil, nil, err
		}
		if t != nil {
			if sizes, err = c.int64s(3, t, "sizes"); err != nil {
				return nil, nil, err
			}
		}
	}
	switch {
	case len(given) > 0 && len(sizes) > 0:
		return nil, nil, c.errf("both scales and sizes are given")
	case len(sizes) > 0:
		if len(sizes) != len(rz.axes) {
			return nil, nil, c.inErrf(3, "%d sizes for %d axes", len(sizes), len(rz.axes))
		}
		for k, a := range rz.axes {
			if sizes[k] < 1 || sizes[k] > MaxElements {
				return nil, nil, c.inErrf(3, "size %d of axis %d out of range [1, %d]", sizes[k], a, MaxElements)
			}
			out[a] = sizes[k]
			scales[a] = float32(sizes[k]) / float32(in[a])
		}
	case len(given) > 0:
		if len(given) != len(rz.axes) {
			return nil, nil, c.errf("%d scales for %d axes", len(given), len(rz.axes))
		}
		for k, a := range rz.axes {
			s := given[k]
			n := math.Floor(float64(in[a]) * float64(s))
			if !(s > 0) || math.IsInf(float64(s), 0) || n < 1 || n > MaxElements {
				return nil, nil, c.errf("scale %g of axis %d (length %d) out of range", s, a, in[a])
			}
			out[a], scales[a] = int64(n), s
		}
	default:
		return nil, nil, c.errf("neither scales nor sizes are given")
	}
	return out, scales, nil
}

// scalesGiven returns the scales: Upsample-7's attribute, else the
// constant input (1 for Upsample-9 and Resize-10, 2 from Resize-11; an
// empty tensor is none).
func (rz *resize) scalesGiven(c *nodeCtx) ([]float32, error) {
	if c.n.OpType == "Upsample" && c.b.opset < 9 {
		s, ok, err := c.n.AttrFloats("scales")
		if err != nil {
			return nil, c.errf("%v", err)
		}
		if !ok {
			return nil, c.errf("attribute \"scales\" is missing")
		}
		return s, nil
	}
	i := 1
	if c.n.OpType == "Resize" && c.b.opset >= 11 {
		i = 2
	}
	t, err := c.constInput(i, "scales")
	if err != nil || t == nil {
		return nil, err
	}
	if t.DType != onnx.Float || len(t.Dims) != 1 {
		return nil, c.inErrf(i, "scales %q: %v %s, want a 1-D float tensor", t.Name, t.DType, ShapeString(t.Dims))
	}
	return t.Float32s()
}

// source is output position o's coordinate in the input, of length in
// resized to n at scale s, in float32 (each step rounded, no fused
// operation).
func (rz *resize) source(o, in, n int64, s float32) float32 {
	f := float32(o)
	switch rz.coord {
	case "half_pixel":
		return float32(float32(f+0.5)/s) - 0.5
	case "pytorch_half_pixel":
		if n == 1 {
			return 0
		}
		return float32(float32(f+0.5)/s) - 0.5
	case "align_corners":
		if n == 1 {
			return 0
		}
		return float32(f*float32(in-1)) / float32(n-1)
	case "tf_half_pixel_for_nn":
		return float32(f+0.5) / s
	}
	return f / s // asymmetric
}

// nearest is nearest mode's input index of coordinate f (before clamping).
func (rz *resize) nearest(f, s float32) int64 {
	v := float64(f)
	fl := math.Floor(v)
	half := v == fl+0.5
	switch {
	case rz.legacy && s >= 1:
		return int64(math.Trunc(v))
	case rz.legacy:
		return int64(math.Ceil(v))
	case rz.round == "floor":
		return int64(fl)
	case rz.round == "ceil":
		return int64(math.Ceil(v))
	case half && rz.round == "round_prefer_floor":
		return int64(fl)
	case half:
		return int64(fl) + 1
	}
	return int64(math.Round(v))
}

// linear appends the linear resize of axis a (of rank r; input length
// in) at the coordinates, and returns its output.
func (rz *resize) linear(st *steps, cur string, coords []float32, in int64, a, r int) (string, error) {
	n := len(coords)
	lo, hi := make([]int64, n), make([]int64, n)
	w0, w1 := make([]float64, n), make([]float64, n)
	frac := false
	for o, f := range coords {
		f = min(max(f, 0), float32(in-1))
		i := int64(f)
		lo[o], hi[o] = i, min(i+1, in-1)
		w := f - float32(i)
		w0[o], w1[o] = float64(1-w), float64(w)
		frac = frac || w != 0
	}
	if !frac {
		if int64(n) == in && isIota(lo) {
			return cur, nil
		}
		return resizeGather(st, cur, lo, a)
	}
	dims := make([]int64, r-a)
	for i := range dims {
		dims[i] = 1
	}
	dims[0] = int64(n)
	var terms [2]string
	for k, side := range []struct {
		idx []int64
		w   []float64
	}{{lo, w0}, {hi, w1}} {
		g, err := resizeGather(st, cur, side.idx, a)
		if err != nil {
			return "", err
		}
		w, err := st.constant("weights", floatTensor(rz.x.DType, dims, side.w))
		if err != nil {
			return "", err
		}
		if terms[k], err = st.node("Mul", "weighted", []string{g, w}, ""); err != nil {
			return "", err
		}
	}
	return st.node("Add", "linear", terms[:], "")
}

// resizeGather gathers the elements idx of axis a of x.
func resizeGather(st *steps, x string, idx []int64, a int) (string, error) {
	ind, err := st.constant("indices", onnx.NewInt64("", []int64{int64(len(idx))}, idx))
	if err != nil {
		return "", err
	}
	return st.node("Gather", fmt.Sprintf("axis%d_", a), []string{x, ind}, "", onnx.IntAttr("axis", int64(a)))
}

// isIota reports whether idx is 0, 1, 2, ...
func isIota(idx []int64) bool {
	for i, v := range idx {
		if v != int64(i) {
			return false
		}
	}
	return true
}
