package graph

import (
	"fmt"
	"strings"

	"ipu.local/libs/onnx"
)

// inferConv builds Conv (any group count, any number of spatial axes,
// strides, dilations, pads or auto_pad) through the builder as im2col and
// a product: the input padded with zeros (Pad's slabs), the windows
// gathered along each spatial axis by constant indices (gatherWindows),
// transposed to the columns [N, C, k..., out...] and viewed as [N, G,
// C/G*k, L] (for each group's input channels and kernel offsets, the
// element every output position reads), the weight reshaped to [G, M/G,
// C/G*k] times them (MatMul, batched over the images and groups), the
// bias added, the result reshaped to [N, M, out...]. A depthwise Conv
// (G = C) multiplies each channel's windows by its own kernels. Windows
// that tile the input (ViT's patch embedding) take buildPatches instead:
// the gather would move every element alone.
func inferConv(c *nodeCtx) error {
	x, w, err := convInputs(c, "[M, C, kernel...]")
	if err != nil {
		return err
	}
	cv, err := convAttrs(c, x.Shape, w.Shape)
	if err != nil {
		return err
	}
	if err := checkConvBias(c, x, cv.m); err != nil {
		return err
	}
	return buildConv(c, x, cv)
}

// convInputs checks a convolution's input and weight (of the shape
// want names): float or float16 alike, [N, C, spatial...] and a weight
// of the same rank, at least 3.
func convInputs(c *nodeCtx, want string) (x, w *Value, err error) {
	if err := c.arity(2, 3); err != nil {
		return nil, nil, err
	}
	if x, err = c.arith(0); err != nil {
		return nil, nil, err
	}
	if w, err = c.arith(1); err != nil {
		return nil, nil, err
	}
	if w.DType != x.DType {
		return nil, nil, c.inErrf(1, "element type %v does not match the input's %v", w.DType, x.DType)
	}
	if r := len(x.Shape) - 2; r < 1 || len(w.Shape) != r+2 {
		return nil, nil, c.errf("input %s and weight %s: want [N, C, spatial...] and %s of the same rank, at least 3", ShapeString(x.Shape), ShapeString(w.Shape), want)
	}
	return x, w, nil
}

// checkConvBias checks a convolution's bias, when given: [m] of x's
// type.
func checkConvBias(c *nodeCtx, x *Value, m int64) error {
	if !c.has(2) {
		return nil
	}
	b, err := c.arith(2)
	if err != nil {
		return err
	}
	if len(b.Shape) != 1 || b.Shape[0] != m || b.DType != x.DType {
		return c.inErrf(2, "bias %s of %v: want [%d] of %v", ShapeString(b.Shape), b.DType, m, x.DType)
	}
	return nil
}

// conv is a Conv's geometry: per spatial axis the kernel, stride,
// dilation, begin and end pads and output size.
type conv struct {
	n, ch, m, g              int64 // images, input channels, output channels, groups
	in, k, s, d, pb, pe, out []int64
}

// convAttrs reads a Conv's attributes and computes its output sizes.
func convAttrs(c *nodeCtx, xs, ws []int64) (*conv, error) {
	group, err := c.attrInt("group", 1)
	if err != nil {
		return nil, err
	}
	if group < 1 || xs[1]%group != 0 || ws[0]%group != 0 {
		return nil, c.errf("group %d does not divide the input's %d channels and the weight's %d", group, xs[1], ws[0])
	}
	if ws[1]*group != xs[1] {
		return nil, c.inErrf(1, "weight %s has %d input channels per group, the input %s has %d in %d groups", ShapeString(ws), ws[1], ShapeString(xs), xs[1], group)
	}
	if ks, ok, err := c.attrInts("kernel_shape"); err != nil {
		return nil, err
	} else if ok && fmt.Sprint(ks) != fmt.Sprint(ws[2:]) {
		return nil, c.errf("kernel_shape %v does not match the weight's %v", ks, ws[2:])
	}
	cv := &conv{n: xs[0], ch: xs[1], m: ws[0], g: group, in: xs[2:], k: ws[2:]}
	return cv, windows(c, cv, false)
}

// windows reads the strides, dilations, pads and auto_pad of a Conv or a
// pool over cv.in with kernel cv.k, and computes the pads and output
// sizes; ceil rounds the output sizes up (a pool's ceil_mode), the last
// window's excess added to the end pad.
func windows(c *nodeCtx, cv *conv, ceil bool) error {
	r := len(cv.in)
	list := func(name string, def int64, n int) ([]int64, error) {
		v, ok, err := c.attrInts(name)
		if err != nil {
			return nil, err
		}
		if !ok {
			v = make([]int64, n)
			for i := range v {
				v[i] = def
			}
		}
		if len(v) != n {
			return nil, c.errf("attribute %q %v: %d values, want %d", name, v, len(v), n)
		}
		return v, nil
	}
	var err error
	if cv.s, err = list("strides", 1, r); err != nil {
		return err
	}
	if cv.d, err = list("dilations", 1, r); err != nil {
		return err
	}
	pads, err := list("pads", 0, 2*r)
	if err != nil {
		return err
	}
	autoPad, err := c.n.AttrString("auto_pad", "NOTSET")
	if err != nil {
		return c.errf("%v", err)
	}
	cv.pb, cv.pe, cv.out = make([]int64, r), make([]int64, r), make([]int64, r)
	for i := 0; i < r; i++ {
		k, s, d, in := cv.k[i], cv.s[i], cv.d[i], cv.in[i]
		if k < 1 || s < 1 || d < 1 || in < 1 || k > MaxElements || s > MaxElements || d > MaxElements {
			return c.errf("spatial axis %d: input %d, kernel %d, stride %d, dilation %d: each must be at least 1", i, in, k, s, d)
		}
		span := d*(k-1) + 1
		switch autoPad {
		case "NOTSET":
			cv.pb[i], cv.pe[i] = pads[i], pads[i+r]
		case "VALID":
		case "SAME_UPPER", "SAME_LOWER":
			out := (in + s - 1) / s
			total := max(0, (out-1)*s+span-in)
			cv.pb[i], cv.pe[i] = total/2, total-total/2
			if autoPad == "SAME_LOWER" {
				cv.pb[i], cv.pe[i] = cv.pe[i], cv.pb[i]
			}
		default:
			return c.errf("auto_pad %q is not one of NOTSET, VALID, SAME_UPPER and SAME_LOWER", autoPad)
		}
		if cv.pb[i] < 0 || cv.pe[i] < 0 || cv.pb[i] > MaxElements || cv.pe[i] > MaxElements {
			return c.errf("pads %v: out of range", pads)
		}
		padded := in + cv.pb[i] + cv.pe[i]
		if padded < span {
			return c.errf("spatial axis %d: the kernel spans %d, the padded input %d", i, span, padded)
		}
		cv.out[i] = (padded-span)/s + 1
		if ceil && (padded-span)%s != 0 && (padded-span)/s*s+s < in+cv.pb[i] {
			// ceil_mode: one more window, starting inside the input
			cv.out[i]++
			cv.pe[i] += (cv.out[i]-1)*s + span - padded
		}
	}
	return nil
}

// buildConv appends the im2col steps of inferConv.
func buildConv(c *nodeCtx, x *Value, cv *conv) error {
	st := c.built("Conv of kernel %v, strides %v, %d groups as %s", cv.k, cv.s, cv.g, cv.how())
	bias := ""
	if c.has(2) {
		bias = c.n.Inputs[2]
	}
	return cv.build(c, st, convOperands{x: c.n.Inputs[0], xv: x, w: c.n.Inputs[1], bias: bias})
}

// how names the path build takes.
func (cv *conv) how() string {
	if cv.patches() && cv.g == 1 {
		return "patches (Reshape, Transpose) and MatMul"
	}
	return "im2col (" + cv.im2colSteps() + ") and MatMul"
}

// convOperands are a convolution's input x (its value's type and
// shape xv), weight w ([M, C/G, kernel...]) and bias ("" for none), by
// name.
type convOperands struct {
	x    string
	xv   *Value
	w    string
	bias string
}

// build appends a convolution's steps, the last one the node's own.
func (cv *conv) build(c *nodeCtx, st *steps, op convOperands) error {
	kk, l, err := cv.windowSizes(c, "columns", []int64{cv.n}, cv.ch)
	if err != nil {
		return err
	}
	kc := cv.ch * kk
	cur, padded, err := cv.padInput(st, op.x, op.xv, make([]byte, op.xv.DType.ElemSize()))
	if err != nil {
		return err
	}
	if cv.patches() && cv.g == 1 {
		return cv.buildPatches(st, cur, op, kc, l)
	}
	if cur, err = cv.gatherWindows(st, cur, len(padded)-1, ""); err != nil {
		return err
	}
	// [N, C, k1, o1, ..., kr, or] to channel-major rows [N, C, k1..kr,
	// o1..or], then group g's rows g*kc/G..(g+1)*kc/G
	if r := len(cv.in); r > 1 {
		perm := []int64{0, 1}
		for i := 0; i < r; i++ {
			perm = append(perm, int64(2+2*i))
		}
		for i := 0; i < r; i++ {
			perm = append(perm, int64(3+2*i))
		}
		if cur, err = st.node("Transpose", "columns", []string{cur}, "", onnx.IntsAttr("perm", perm...)); err != nil {
			return err
		}
	}
	cols, err := st.ints("columns", cv.n, cv.g, kc/cv.g, l)
	if err != nil {
		return err
	}
	if cur, err = st.node("Reshape", "columns", []string{cur, cols}, ""); err != nil {
		return err
	}
	wshape, err := st.ints("wshape", cv.g, cv.m/cv.g, kc/cv.g)
	if err != nil {
		return err
	}
	wr, err := st.node("Reshape", "weight", []string{op.w, wshape}, "")
	if err != nil {
		return err
	}
	if cur, err = st.node("MatMul", "product", []string{wr, cur}, ""); err != nil {
		return err
	}
	if op.bias != "" {
		bshape, err := st.ints("bshape", cv.g, cv.m/cv.g, 1)
		if err != nil {
			return err
		}
		b, err := st.node("Reshape", "bias", []string{op.bias, bshape}, "")
		if err != nil {
			return err
		}
		if cur, err = st.node("Add", "bias", []string{cur, b}, ""); err != nil {
			return err
		}
	}
	out, err := st.ints("out", append([]int64{cv.n, cv.m}, cv.out...)...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{cur, out})
}

// padded reports whether any spatial axis has a pad (a negative one
// crops).
func (cv *conv) padded() bool {
	for i := range cv.in {
		if cv.pb[i] != 0 || cv.pe[i] != 0 {
			return true
		}
	}
	return false
}

// im2colSteps names the steps that build the columns: Pad when there
// are pads, a Gather of each spatial axis, and a Transpose with more than
// one.
func (cv *conv) im2colSteps() string {
	var parts []string
	if cv.padded() {
		parts = append(parts, "Pad")
	}
	parts = append(parts, fmt.Sprintf("a Gather along each of %d spatial axes", len(cv.in)))
	if len(cv.in) > 1 {
		parts = append(parts, "Transpose")
	}
	return strings.Join(parts, ", ")
}

// gatherWindows gathers x's windows along its spatial axes from the
// last to the first (i, at tensor axis 2+i, with a constant [k_i, o_i]:
// the element each kernel offset of each output position reads, o*s +
// k*d), so that x [N, C, D1..Dr] becomes [N, C, k1, o1, ..., kr, or].
// One axis at a time, a gather along an outer axis moves whole runs of
// the inner axes: one index table over the flattened image moved a
// strided window's every element alone (a stride-2 stem on a 64x64
// image was 26k single-word transfers, whose exchange took seconds to
// schedule). With a reduction (ReduceMax or ReduceSum; "" for none),
// each axis's kernel offsets are reduced as soon as they are gathered,
// leaving [N, C, o1..or]: a pool's window reduced axis by axis.
func (cv *conv) gatherWindows(st *steps, x string, last int, red string) (string, error) {
	for i := last; i >= 0; i-- {
		idx := make([]int64, 0, cv.k[i]*cv.out[i])
		for k := int64(0); k < cv.k[i]; k++ {
			for o := int64(0); o < cv.out[i]; o++ {
				idx = append(idx, o*cv.s[i]+k*cv.d[i])
			}
		}
		ind, err := st.constant("windows", onnx.NewInt64("", []int64{cv.k[i], cv.out[i]}, idx))
		if err != nil {
			return "", err
		}
		if x, err = st.node("Gather", "windows", []string{x, ind}, "", onnx.IntAttr("axis", int64(2+i))); err != nil {
			return "", err
		}
		if red != "" {
			if x, err = st.reduce(red, x, []int64{int64(2 + i)}, false, ""); err != nil {
				return "", err
			}
		}
	}
	return x, nil
}

// unflatten writes the row-major coordinates of flat index f in dims
// into to.
func unflatten(f int64, dims, to []int64) {
	for i := len(dims) - 1; i >= 0; i-- {
		to[i] = f % dims[i]
		f /= dims[i]
	}
}

// patches reports whether the windows tile the input exactly: no pads,
// no dilation, strides equal to the kernel dividing the input (ViT's
// patch embedding). Then the columns are a Reshape and a Transpose, a
// permutation the planner moves as whole runs, not a gather of single
// elements.
func (cv *conv) patches() bool {
	for i := range cv.in {
		if cv.pb[i] != 0 || cv.pe[i] != 0 || cv.d[i] != 1 || cv.s[i] != cv.k[i] || cv.in[i]%cv.k[i] != 0 {
			return false
		}
	}
	return true
}

// buildPatches appends a patching Conv of one group as patches times
// the weight: x [N, C, D...] as [N, C, O1, k1, ..., Or, kr], transposed
// to [N, O1..Or, C, k1..kr] (each kernel row a contiguous run of the
// input), viewed as [N, L, C*k], times the weight as [C*k, M] (a
// transposed constant), the bias added along M, then transposed to
// [N, M, L] and reshaped to [N, M, O...].
func (cv *conv) buildPatches(st *steps, x string, op convOperands, kc, l int64) error {
	r := len(cv.in)
	split := []int64{cv.n, cv.ch}
	perm := []int64{0}
	for i := 0; i < r; i++ {
		split = append(split, cv.out[i], cv.k[i])
		perm = append(perm, int64(2+2*i))
	}
	perm = append(perm, 1)
	for i := 0; i < r; i++ {
		perm = append(perm, int64(3+2*i))
	}
	node := func(op, what string, ins []string, attrs ...onnx.Attr) (string, error) {
		return st.node(op, what, ins, "", attrs...)
	}
	sh, err := st.ints("patches", split...)
	if err != nil {
		return err
	}
	if x, err = node("Reshape", "patches", []string{x, sh}); err != nil {
		return err
	}
	if x, err = node("Transpose", "patches", []string{x}, onnx.IntsAttr("perm", perm...)); err != nil {
		return err
	}
	rows, err := st.ints("rows", cv.n, l, kc)
	if err != nil {
		return err
	}
	if x, err = node("Reshape", "rows", []string{x, rows}); err != nil {
		return err
	}
	wshape, err := st.ints("wshape", cv.m, kc)
	if err != nil {
		return err
	}
	w, err := node("Reshape", "weight", []string{op.w, wshape})
	if err != nil {
		return err
	}
	if w, err = node("Transpose", "weight", []string{w}, onnx.IntsAttr("perm", 1, 0)); err != nil {
		return err
	}
	if x, err = node("MatMul", "product", []string{x, w}); err != nil {
		return err
	}
	if op.bias != "" {
		if x, err = node("Add", "bias", []string{x, op.bias}); err != nil {
			return err
		}
	}
	if x, err = node("Transpose", "channels", []string{x}, onnx.IntsAttr("perm", 0, 2, 1)); err != nil {
		return err
	}
	out, err := st.ints("out", append([]int64{cv.n, cv.m}, cv.out...)...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{x, out})
}

// windowSizes returns the kernel's and the output's element counts,
// checked before anything is built: the gathered tensor, lead dims then
// chans times the kernel then the output, within MaxElements, and each
// spatial axis's index table (its kernel by its output) within
// maxBuiltIndices. what names them in the errors.
func (cv *conv) windowSizes(c *nodeCtx, what string, lead []int64, chans int64) (kk, l int64, err error) {
	if kk, err = checkedElements(cv.k); err != nil {
		return 0, 0, c.errf("kernel %v: %v", cv.k, err)
	}
	if l, err = checkedElements(cv.out); err != nil {
		return 0, 0, c.errf("output %v: %v", cv.out, err)
	}
	if _, err := checkedElements(append(append([]int64{}, lead...), chans*kk, l)); err != nil {
		return 0, 0, c.errf("the gathered %s: %v", what, err)
	}
	for i, k := range cv.k {
		if k*cv.out[i] > maxBuiltIndices {
			return 0, 0, c.errf("the %s' index table along spatial axis %d, %d x %d, is more than %d elements", what, i, k, cv.out[i], maxBuiltIndices)
		}
	}
	return kk, l, nil
}

// padInput pads x (the value v) along its spatial axes by cv's pads with
// fill (one element), and returns the padded value and its spatial
// shape.
func (cv *conv) padInput(st *steps, x string, v *Value, fill []byte) (string, []int64, error) {
	shape := copyShape(v.Shape)
	for i := range cv.in {
		var err error
		if x, err = st.pad(x, shape, v.DType, fill, i+2, cv.pb[i], cv.pe[i]); err != nil {
			return "", nil, err
		}
	}
	return x, shape[2:], nil
}
