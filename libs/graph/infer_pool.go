package graph

import (
	"encoding/binary"
	"math"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// inferPool builds MaxPool and AveragePool through the builder: the
// input padded (MaxPool with -Inf, which no window's maximum takes;
// AveragePool with 0), each window gathered and reduced one spatial axis
// at a time (gatherWindows: ReduceMax, or ReduceSum then a division by
// each window's count, its elements inside the input, or all of them
// with count_include_pad), and a Reshape to [N, C, out...]. MaxPool's Indices
// output and AveragePool's ceil_mode are refused in one line.
func inferPool(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	op := c.n.OpType
	if len(c.n.Outputs) > 1 && c.n.Outputs[1] != "" {
		return c.errf("the Indices output is not supported")
	}
	r := len(x.Shape) - 2
	if r < 1 {
		return c.inErrf(0, "shape %s: want [N, C, spatial...]", ShapeString(x.Shape))
	}
	k, ok, err := c.attrInts("kernel_shape")
	if err != nil {
		return err
	}
	if !ok || len(k) != r {
		return c.errf("kernel_shape %v: want %d values", k, r)
	}
	ceil, err := c.attrBool("ceil_mode", false)
	if err != nil {
		return err
	}
	if ceil && op == "AveragePool" {
		return c.errf("ceil_mode 1 is not supported for AveragePool")
	}
	cv := &conv{n: x.Shape[0], ch: x.Shape[1], in: x.Shape[2:], k: k}
	if err := windows(c, cv, ceil); err != nil {
		return err
	}
	if op == "AveragePool" {
		if d, ok, _ := c.attrInts("dilations"); ok && NumElements(d) != 1 {
			return c.errf("dilations %v are not supported for AveragePool", d)
		}
	}
	includePad, err := c.attrBool("count_include_pad", false)
	if err != nil {
		return err
	}
	return buildPool(c, x, cv, includePad)
}

// buildPool appends the steps of inferPool.
func buildPool(c *nodeCtx, x *Value, cv *conv, includePad bool) error {
	op := c.n.OpType
	pad := ""
	if cv.padded() {
		pad = "Pad, then "
	}
	st := c.built("%s of kernel %v, strides %v as %sa Gather and a reduction along each spatial axis", op, cv.k, cv.s, pad)
	fill := make([]byte, x.DType.ElemSize())
	if op == "MaxPool" {
		if x.DType == onnx.Float16 {
			binary.LittleEndian.PutUint16(fill, 0xFC00)
		} else {
			binary.LittleEndian.PutUint32(fill, math.Float32bits(float32(math.Inf(-1))))
		}
	}
	_, l, err := cv.windowSizes(c, "windows", []int64{cv.n, cv.ch}, 1)
	if err != nil {
		return err
	}
	cur, shape, err := cv.padInput(st, c.n.Inputs[0], x, fill)
	if err != nil {
		return err
	}
	red := "ReduceMax"
	if op == "AveragePool" {
		red = "ReduceSum"
	}
	if cur, err = cv.gatherWindows(st, cur, len(shape)-1, red); err != nil {
		return err
	}
	if op == "AveragePool" {
		counts, err := st.constant("counts", floatTensor(x.DType, cv.out, cv.counts(includePad, l)))
		if err != nil {
			return err
		}
		if cur, err = st.node("Div", "mean", []string{cur, counts}, ""); err != nil {
			return err
		}
	}
	out, err := st.ints("out", append([]int64{cv.n, cv.ch}, cv.out...)...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{cur, out})
}

// counts returns each output position's number of window elements
// inside the input (all of them inside the padded input when
// includePad).
func (cv *conv) counts(includePad bool, l int64) []float64 {
	r := len(cv.in)
	pos := make([]int64, r)
	out := make([]float64, l)
	for o := int64(0); o < l; o++ {
		unflatten(o, cv.out, pos)
		n := 1.0
		for i := 0; i < r; i++ {
			lo, hi := -cv.pb[i], cv.in[i]+cv.pe[i]
			if !includePad {
				lo, hi = 0, cv.in[i]
			}
			var in int64
			for k := int64(0); k < cv.k[i]; k++ {
				if p := pos[i]*cv.s[i] + k*cv.d[i] - cv.pb[i]; p >= lo && p < hi {
					in++
				}
			}
			n *= float64(in)
		}
		out[o] = n
	}
	return out
}

// floatTensor encodes v as a float or float16 tensor (exact integers
// here).
func floatTensor(d onnx.DataType, dims []int64, v []float64) *onnx.Tensor {
	if d == onnx.Float16 {
		raw := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(raw[2*i:], numfmt.F64ToF16(x))
		}
		return &onnx.Tensor{DType: d, Dims: dims, Raw: raw}
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return onnx.NewFloat32("", dims, f)
}

// inferGlobalPool builds GlobalAveragePool and GlobalMaxPool as
// ReduceMean and ReduceMax over the spatial axes, kept.
func inferGlobalPool(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	if len(x.Shape) < 3 {
		return c.inErrf(0, "shape %s: want [N, C, spatial...]", ShapeString(x.Shape))
	}
	axes := make([]int64, len(x.Shape)-2)
	for i := range axes {
		axes[i] = int64(i + 2)
	}
	red := "ReduceMean"
	if c.n.OpType == "GlobalMaxPool" {
		red = "ReduceMax"
	}
	st := c.built("%s as %s over the spatial axes", c.n.OpType, red)
	_, err = st.reduce(red, c.n.Inputs[0], axes, true, c.n.Outputs[0])
	return err
}

// inferBatchNorm builds BatchNormalization at inference as onnxruntime
// computes it: x * s + b with s = scale / sqrt(var + epsilon) and b = B -
// mean * s, per channel (the parameters reshaped to [C, 1, ...]; they
// fold when constant). Training mode is refused.
func inferBatchNorm(c *nodeCtx) error {
	x, err := normInput(c, 5, 2, "[N, C, ...]")
	if err != nil {
		return err
	}
	if err := normParams(c, x, x.Shape[1], 1, 5); err != nil {
		return err
	}
	if train, err := c.attrBool("training_mode", false); err != nil {
		return err
	} else if train || len(c.n.Outputs) > 1 {
		return c.errf("training mode (running statistics as outputs) is not supported")
	}
	eps, err := c.attrFloat("epsilon", 1e-5)
	if err != nil {
		return err
	}
	st := c.built("BatchNormalization as x * s + b, s = scale / sqrt(var + epsilon), b = B - mean * s")
	e, err := st.constant("epsilon", floatTensor(x.DType, []int64{}, []float64{float64(eps)}))
	if err != nil {
		return err
	}
	in := c.n.Inputs
	v, err := st.node("Add", "var", []string{in[4], e}, "")
	if err != nil {
		return err
	}
	if v, err = st.node("Sqrt", "sd", []string{v}, ""); err != nil {
		return err
	}
	s, err := st.node("Div", "scale", []string{in[1], v}, "")
	if err != nil {
		return err
	}
	b, err := st.node("Mul", "shift", []string{in[3], s}, "")
	if err != nil {
		return err
	}
	if b, err = st.node("Sub", "bias", []string{in[2], b}, ""); err != nil {
		return err
	}
	pshape := make([]int64, len(x.Shape)-1)
	pshape[0] = x.Shape[1]
	for i := 1; i < len(pshape); i++ {
		pshape[i] = 1
	}
	ps, err := st.ints("pshape", pshape...)
	if err != nil {
		return err
	}
	if s, err = st.node("Reshape", "scale", []string{s, ps}, ""); err != nil {
		return err
	}
	if b, err = st.node("Reshape", "bias", []string{b, ps}, ""); err != nil {
		return err
	}
	y, err := st.node("Mul", "scaled", []string{in[0], s}, "")
	if err != nil {
		return err
	}
	return st.last("Add", []string{y, b})
}
