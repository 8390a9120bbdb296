package main

// The tt5_* cases: one T5 encoder layer as torch.onnx.export writes
// transformers' T5Block: the relative position bias from the buckets of
// _relative_position_bucket (Range, Sub, Greater, Abs, Less, Log, a cast
// of log(0) = -Inf to int64 that Where then discards, Min), gathered from
// the bias table; T5LayerNorm (an RMSNorm), unscaled attention, a ReLU
// FFN.

import (
	"math"

	"ipu.local/libs/onnx"
)

// T5's bucket parameters (t5-small's).
const (
	t5Buckets     = 32
	t5MaxDistance = 128
)

// t5Buckets appends _relative_position_bucket(memory - context,
// bidirectional=True) over S positions; it returns int64 [S, S].
func (t *torchBuilder) t5RelativeBuckets(scope string) string {
	c := t.c
	i64 := func(v int64) string { return t.constI(scope, nil, v) }
	r := t.node(scope, "Range", []string{i64(0), i64(c.Seq), i64(1)})
	ctx := t.unsqueeze(scope, r, 1)
	mem := t.unsqueeze(scope, r, 0)
	rel := t.node(scope, "Sub", []string{mem, ctx})
	nb := int64(t5Buckets / 2)
	buckets := t.node(scope, "Mul", []string{
		t.node(scope, "Cast", []string{t.node(scope, "Greater", []string{rel, i64(0)})}, onnx.IntAttr("to", int64(onnx.Int64))), i64(nb)})
	rel = t.node(scope, "Abs", []string{rel})
	exact := nb / 2
	small := t.node(scope, "Less", []string{rel, i64(exact)})
	f := t.node(scope, "Cast", []string{rel}, onnx.IntAttr("to", int64(onnx.Float)))
	fconst := func(v float64) string {
		return t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewFloat32("", nil, []float32{float32(v)})))
	}
	l := t.node(scope, "Log", []string{t.node(scope, "Div", []string{f, fconst(float64(exact))})})
	l = t.node(scope, "Div", []string{l, fconst(math.Log(float64(t5MaxDistance) / float64(exact)))})
	l = t.node(scope, "Mul", []string{l, fconst(float64(nb - exact))})
	large := t.node(scope, "Add", []string{i64(exact), t.node(scope, "Cast", []string{l}, onnx.IntAttr("to", int64(onnx.Int64)))})
	large = t.node(scope, "Min", []string{large, i64(nb - 1)})
	return t.node(scope, "Add", []string{buckets, t.node(scope, "Where", []string{small, rel, large})})
}

// t5 appends one encoder layer over x [B, S, H].
func (t *torchBuilder) t5(scope, x string) string {
	c := t.c
	dk := c.Hidden / c.Heads
	sa := scope + "/layer.0/SelfAttention"
	bias := t.param("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", []int64{t5Buckets, c.Heads}, -0.5, 0.5)
	pb := t.node(sa, "Gather", []string{bias, t.t5RelativeBuckets(sa)})
	pb = t.unsqueeze(sa, t.node(sa, "Transpose", []string{pb}, onnx.IntsAttr("perm", 2, 0, 1)), 0)

	h := t.rmsNorm(scope+"/layer.0/layer_norm", x, c.Hidden)
	heads := func(name string) string {
		p := t.project(sa+"/"+name, h, c.Hidden, c.Hidden)
		r := t.node(sa, "Reshape", []string{p, t.constI(sa, []int64{4}, c.Batch, -1, c.Heads, dk)})
		return t.node(sa, "Transpose", []string{r}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	}
	q, k, v := heads("q"), heads("k"), heads("v")
	sc := t.node(sa, "MatMul", []string{q, t.node(sa, "Transpose", []string{k}, onnx.IntsAttr("perm", 0, 1, 3, 2))})
	sc = t.node(sa, "Add", []string{sc, pb})
	p := t.softmaxFloat(sa, sc)
	ctx := t.node(sa, "Transpose", []string{t.node(sa, "MatMul", []string{p, v})}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	ctx = t.node(sa, "Reshape", []string{ctx, t.constI(sa, []int64{3}, c.Batch, -1, c.Hidden)})
	r := t.node(scope+"/layer.0", "Add", []string{x, t.project(sa+"/o", ctx, c.Hidden, c.Hidden)})

	ff := scope + "/layer.1/DenseReluDense"
	m := t.rmsNorm(scope+"/layer.1/layer_norm", r, c.Hidden)
	m = t.node(ff+"/act", "Relu", []string{t.project(ff+"/wi", m, c.Hidden, c.FFN)})
	return t.node(scope+"/layer.1", "Add", []string{r, t.project(ff+"/wo", m, c.FFN, c.Hidden)})
}
