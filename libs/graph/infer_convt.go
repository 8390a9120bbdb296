package graph

import (
	"fmt"
	"slices"

	"ipu.local/libs/onnx"
)

// inferConvTranspose builds ConvTranspose (any groups, spatial axes,
// strides, dilations, pads, output_padding, output_shape or auto_pad)
// as the Conv whose gradient it is: the input with s-1 zeros inserted
// between its elements along each axis of stride s (a zero appended,
// then a Gather that reads it between the elements), convolved at
// stride 1 and the same dilation with the weight [C, M/G, k...] viewed
// as [M, C/G, k...] and flipped along its spatial axes, the input padded
// by d*(k-1) less the begin pad before and d*(k-1) less the end pad plus
// output_padding after (a negative pad crops). Each output length is
// s*(in-1) + output_padding + d*(k-1) + 1 - pads; output_shape gives the
// pads instead (split as the ONNX definition splits them).
func inferConvTranspose(c *nodeCtx) error {
	x, w, err := convInputs(c, "[C, M/group, kernel...]")
	if err != nil {
		return err
	}
	group, err := c.attrInt("group", 1)
	if err != nil {
		return err
	}
	if group < 1 || x.Shape[1]%group != 0 || w.Shape[0] != x.Shape[1] {
		return c.errf("group %d and weight %s: want the input's %d channels, a multiple of the groups, first", group, ShapeString(w.Shape), x.Shape[1])
	}
	cv := &conv{n: x.Shape[0], ch: x.Shape[1], m: w.Shape[1] * group, g: group, k: w.Shape[2:], s: make([]int64, len(x.Shape)-2)}
	if err := checkConvBias(c, x, cv.m); err != nil {
		return err
	}
	strides, err := transposeGeometry(c, cv, x.Shape[2:])
	if err != nil {
		return err
	}
	st := c.built("ConvTranspose of kernel %v, strides %v, %d groups as %s", cv.k, strides, cv.g, transposeSteps(strides, cv))
	cur, shape := c.n.Inputs[0], copyShape(x.Shape)
	for i, s := range strides {
		if s > 1 {
			if cur, err = insertZeros(st, cur, shape, x.DType, 2+i, s); err != nil {
				return err
			}
		}
	}
	wf, err := cv.flippedWeight(st, c.n.Inputs[1], w.Shape)
	if err != nil {
		return err
	}
	bias := ""
	if c.has(2) {
		bias = c.n.Inputs[2]
	}
	return cv.build(c, st, convOperands{x: cur, xv: &Value{DType: x.DType, Shape: shape}, w: wf, bias: bias})
}

// transposeSteps names the steps inferConvTranspose builds: zeros
// inserted only along strided axes, the weight flipped only along
// kernels longer than one.
func transposeSteps(strides []int64, cv *conv) string {
	out := ""
	if slices.ContainsFunc(strides, func(s int64) bool { return s > 1 }) {
		out = "zeros inserted (Pad, Gather), "
	}
	out += "the weight as [M, C/G, k...] (Reshape, Transpose"
	if slices.ContainsFunc(cv.k, func(k int64) bool { return k > 1 }) {
		out += ", a flipping Gather"
	}
	return out + ") and a Conv as " + cv.how()
}

// transposeGeometry reads a ConvTranspose's strides, dilations, pads,
// output_padding, output_shape and auto_pad over the input's spatial
// shape in, and sets cv to the stride-1 Conv over the input with zeros
// inserted: its input lengths, pads (d*(k-1) less the transposed pads)
// and output lengths. It returns the strides.
func transposeGeometry(c *nodeCtx, cv *conv, in []int64) ([]int64, error) {
	r := len(in)
	list := func(name string, def int64, n int) ([]int64, bool, error) {
		v, ok, err := c.attrInts(name)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			v = make([]int64, n)
			for i := range v {
				v[i] = def
			}
		}
		if len(v) != n {
			return nil, false, c.errf("attribute %q %v: %d values, want %d", name, v, len(v), n)
		}
		return v, ok, nil
	}
	strides, _, err := list("strides", 1, r)
	if err != nil {
		return nil, err
	}
	if cv.d, _, err = list("dilations", 1, r); err != nil {
		return nil, err
	}
	pads, _, err := list("pads", 0, 2*r)
	if err != nil {
		return nil, err
	}
	opad, _, err := list("output_padding", 0, r)
	if err != nil {
		return nil, err
	}
	oshape, given, err := list("output_shape", 0, r)
	if err != nil {
		return nil, err
	}
	if ks, ok, err := c.attrInts("kernel_shape"); err != nil {
		return nil, err
	} else if ok && fmt.Sprint(ks) != fmt.Sprint(cv.k) {
		return nil, c.errf("kernel_shape %v does not match the weight's %v", ks, cv.k)
	}
	autoPad, err := c.n.AttrString("auto_pad", "NOTSET")
	if err != nil {
		return nil, c.errf("%v", err)
	}
	switch autoPad {
	case "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER":
	default:
		return nil, c.errf("auto_pad %q is not one of NOTSET, VALID, SAME_UPPER and SAME_LOWER", autoPad)
	}
	cv.in, cv.pb, cv.pe, cv.out = make([]int64, r), make([]int64, r), make([]int64, r), make([]int64, r)
	for i := 0; i < r; i++ {
		k, s, d, n := cv.k[i], strides[i], cv.d[i], in[i]
		if k < 1 || s < 1 || d < 1 || n < 1 || k > MaxElements || s > MaxElements || d > MaxElements {
			return nil, c.errf("spatial axis %d: input %d, kernel %d, stride %d, dilation %d: each must be at least 1", i, n, k, s, d)
		}
		if k > maxBuiltIndices {
			return nil, c.errf("spatial axis %d: a kernel of %d, its flipping table more than %d entries", i, k, maxBuiltIndices)
		}
		if opad[i] < 0 || opad[i] >= max(s, d) {
			return nil, c.errf("output_padding %v: axis %d's must be in [0, %d)", opad, i, max(s, d))
		}
		full := s*(n-1) + opad[i] + d*(k-1) + 1 // the output without pads
		if full > MaxElements {
			return nil, c.errf("spatial axis %d: an output of %d elements, more than %d", i, full, MaxElements)
		}
		pb, pe := pads[i], pads[i+r]
		switch {
		case given || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER":
			target := oshape[i]
			if !given {
				target = n * s
			}
			if target < 1 || target > full {
				return nil, c.errf("spatial axis %d: an output of %d elements, want 1 to the %d the transposed convolution makes", i, target, full)
			}
			total := full - target
			pb, pe = total-total/2, total/2
			if autoPad == "SAME_UPPER" {
				pb, pe = total/2, total-total/2
			}
		case autoPad == "VALID":
			pb, pe = 0, 0
		}
		out := full - pb - pe
		if pb < 0 || pe < 0 || out < 1 {
			return nil, c.errf("spatial axis %d: pads %d and %d leave none of the %d elements the transposed convolution makes", i, pb, pe, full)
		}
		span := d*(k-1) + 1
		cv.in[i], cv.s[i] = s*(n-1)+1, 1
		cv.pb[i], cv.pe[i] = span-1-pb, span-1-pe+opad[i]
		cv.out[i] = out
	}
	return strides, nil
}

// insertZeros inserts s-1 zeros between the elements of x (of shape
// shape, updated) along axis a: a zero appended (Pad), then a Gather
// that reads element p/s at positions p multiple of s and the zero
// elsewhere.
func insertZeros(st *steps, x string, shape []int64, dt onnx.DataType, a int, s int64) (string, error) {
	n := shape[a]
	x, err := st.pad(x, shape, dt, make([]byte, dt.ElemSize()), a, 0, 1)
	if err != nil {
		return "", err
	}
	m := s*(n-1) + 1
	if m > maxBuiltIndices {
		return "", st.c.errf("axis %d with %d zeros between its %d elements: an index table of %d, more than %d", a, s-1, n, m, maxBuiltIndices)
	}
	idx := make([]int64, m)
	for p := range idx {
		idx[p] = n // the zero
		if int64(p)%s == 0 {
			idx[p] = int64(p) / s
		}
	}
	ind, err := st.constant("spread", onnx.NewInt64("", []int64{m}, idx))
	if err != nil {
		return "", err
	}
	shape[a] = m
	return st.node("Gather", "spread", []string{x, ind}, "", onnx.IntAttr("axis", int64(a)))
}

// flippedWeight returns a ConvTranspose's weight w [C, M/G, k...] as a
// Conv's [M, C/G, k...], each group's blocks transposed, flipped along
// the spatial axes (a constant weight folds).
func (cv *conv) flippedWeight(st *steps, w string, ws []int64) (string, error) {
	r := len(ws) - 2
	split := append([]int64{cv.g, cv.ch / cv.g, ws[1]}, ws[2:]...)
	sh, err := st.ints("wgroups", split...)
	if err != nil {
		return "", err
	}
	if w, err = st.node("Reshape", "wgroups", []string{w, sh}, ""); err != nil {
		return "", err
	}
	perm := []int64{0, 2, 1}
	for i := 0; i < r; i++ {
		perm = append(perm, int64(3+i))
	}
	if w, err = st.node("Transpose", "wswap", []string{w}, "", onnx.IntsAttr("perm", perm...)); err != nil {
		return "", err
	}
	back := append([]int64{cv.m, cv.ch / cv.g}, ws[2:]...)
	if sh, err = st.ints("wconv", back...); err != nil {
		return "", err
	}
	if w, err = st.node("Reshape", "wconv", []string{w, sh}, ""); err != nil {
		return "", err
	}
	for i := 0; i < r; i++ {
		k := ws[2+i]
		if k == 1 {
			continue
		}
		rev := make([]int64, k)
		for j := range rev {
			rev[j] = k - 1 - int64(j)
		}
		ind, err := st.constant("flip", onnx.NewInt64("", []int64{k}, rev))
		if err != nil {
			return "", err
		}
		if w, err = st.node("Gather", "flip", []string{w, ind}, "", onnx.IntAttr("axis", int64(2+i))); err != nil {
			return "", err
		}
	}
	return w, nil
}
