package main

// The tllama_* cases: one LLaMA-style decoder layer as torch.onnx.export
// writes transformers' LlamaDecoderLayer: RMSNorm, projections without
// bias, rotary position embeddings computed from the int64 position_ids
// (the inverse frequencies times the positions, Cos and Sin) applied
// with rotate_half, a causal mask, the SwiGLU MLP.

import (
	"math"

	"ipu.local/libs/onnx"
)

// rmsEpsilon is LlamaRMSNorm's variance_epsilon.
const rmsEpsilon = 1e-6

// rmsNorm appends LlamaRMSNorm over the last axis of x (width h):
// x * rsqrt(mean(x^2) + eps) * weight, computed in float (a float16
// x is cast up and the result back), rsqrt as torch exports it (Sqrt,
// then Div of 1 by it).
func (t *torchBuilder) rmsNorm(scope, x string, h int64) string {
	g := t.param(paramName(scope)+".weight", []int64{h}, 0.8, 1.2)
	f16 := t.c.DType != onnx.Float
	if f16 {
		x = t.node(scope, "Cast", []string{x}, onnx.IntAttr("to", int64(onnx.Float)))
	}
	two := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewFloat32("", nil, []float32{2})))
	eps := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewFloat32("", nil, []float32{rmsEpsilon})))
	one := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewFloat32("", nil, []float32{1})))
	v := t.reduceMean(scope, t.node(scope, "Pow", []string{x, two}), -1, true)
	v = t.node(scope, "Add", []string{v, eps})
	r := t.node(scope, "Div", []string{one, t.node(scope, "Sqrt", []string{v})})
	y := t.node(scope, "Mul", []string{x, r})
	if f16 {
		y = t.node(scope, "Cast", []string{y}, onnx.IntAttr("to", int64(t.c.DType)))
	}
	return t.node(scope, "Mul", []string{g, y})
}

// project appends nn.Linear(in, out, bias=False) on x: MatMul by the
// transposed weight.
func (t *torchBuilder) project(scope, x string, in, out int64) string {
	a := 1 / math.Sqrt(float64(in))
	w := t.param(paramName(scope)+".weight", []int64{in, out}, -a, a)
	return t.node(scope, "MatMul", []string{x, w})
}

// rotary appends LlamaRotaryEmbedding.forward: inv_freq[None, :, None]
// expanded over the batch, times position_ids[:, None, :] as float
// (MatMul), transposed to [B, S, dh/2], concatenated with itself; it
// returns cos and sin unsqueezed to [B, 1, S, dh].
func (t *torchBuilder) rotary(scope, pos string, dh int64) (cos, sin string) {
	c := t.c
	inv := make([]float64, dh/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(10000, float64(2*i)/float64(dh))
	}
	t.b.AddInitializer(onnx.NewFloat32("model.rotary_emb.inv_freq", []int64{dh / 2}, f32s(inv)))
	ie := t.unsqueeze(scope, "model.rotary_emb.inv_freq", 0, 2)
	ie = t.node(scope, "Expand", []string{ie, t.constI(scope, []int64{3}, c.Batch, 1, 1)})
	pe := t.node(scope, "Cast", []string{t.unsqueeze(scope, pos, 1)}, onnx.IntAttr("to", int64(onnx.Float)))
	f := t.node(scope, "MatMul", []string{ie, pe})
	f = t.node(scope, "Transpose", []string{f}, onnx.IntsAttr("perm", 0, 2, 1))
	emb := t.node(scope, "Concat", []string{f, f}, onnx.IntAttr("axis", -1))
	cos, sin = t.node(scope, "Cos", []string{emb}), t.node(scope, "Sin", []string{emb})
	if c.DType != onnx.Float {
		cos = t.node(scope, "Cast", []string{cos}, onnx.IntAttr("to", int64(c.DType)))
		sin = t.node(scope, "Cast", []string{sin}, onnx.IntAttr("to", int64(c.DType)))
	}
	return t.unsqueeze(scope, cos, 1), t.unsqueeze(scope, sin, 1)
}

// rope appends apply_rotary_pos_emb on x [B, h, S, dh]: x * cos +
// rotate_half(x) * sin, rotate_half = cat(-x[..., dh/2:], x[..., :dh/2]).
func (t *torchBuilder) rope(scope, x, cos, sin string, dh int64) string {
	axis := t.constI(scope, []int64{1}, -1)
	one := t.constI(scope, []int64{1}, 1)
	x1 := t.node(scope, "Slice", []string{x, t.constI(scope, []int64{1}, 0), t.constI(scope, []int64{1}, dh/2), axis, one})
	x2 := t.node(scope, "Slice", []string{x, t.constI(scope, []int64{1}, dh/2), t.constI(scope, []int64{1}, math.MaxInt64), axis, one})
	rot := t.node(scope, "Concat", []string{t.node(scope, "Neg", []string{x2}), x1}, onnx.IntAttr("axis", -1))
	return t.node(scope, "Add", []string{t.node(scope, "Mul", []string{x, cos}), t.node(scope, "Mul", []string{rot, sin})})
}

// llama appends one decoder layer over x [B, S, H] with position_ids
// pos [B, S].
func (t *torchBuilder) llama(scope, x, pos string) string {
	c := t.c
	dh := c.Hidden / c.Heads
	sa := scope + "/self_attn"
	h := t.rmsNorm(scope+"/input_layernorm", x, c.Hidden)
	kvh := c.KVHeads
	if kvh == 0 {
		kvh = c.Heads
	}
	heads := func(name string, n int64) string {
		p := t.project(sa+"/"+name, h, c.Hidden, n*dh)
		r := t.node(sa, "Reshape", []string{p, t.constI(sa, []int64{4}, c.Batch, c.Seq, n, dh)})
		return t.node(sa, "Transpose", []string{r}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	}
	q, k, v := heads("q_proj", c.Heads), heads("k_proj", kvh), heads("v_proj", kvh)
	cos, sin := t.rotary(scope+"/rotary_emb", pos, dh)
	q, k = t.rope(sa, q, cos, sin, dh), t.rope(sa, k, cos, sin, dh)
	if kvh != c.Heads {
		k, v = t.repeatKV(sa, k, kvh, dh), t.repeatKV(sa, v, kvh, dh)
	}
	kt := t.node(sa, "Transpose", []string{k}, onnx.IntsAttr("perm", 0, 1, 3, 2))
	sc := t.node(sa, "Div", []string{t.node(sa, "MatMul", []string{q, kt}), t.constF(sa, math.Sqrt(float64(dh)))})
	lowest := -math.MaxFloat32
	if c.DType == onnx.Float16 {
		lowest = -65504
	}
	full := t.node(sa, "ConstantOfShape", []string{t.constI(sa, []int64{2}, c.Seq, c.Seq)},
		onnx.TensorAttr("value", t.floatTensor("", []int64{1}, []float64{lowest})))
	sc = t.node(sa, "Add", []string{sc, t.node(sa, "Trilu", []string{full, t.constI(sa, nil, 1)})})
	p := t.softmaxFloat(sa, sc)
	ctx := t.node(sa, "Transpose", []string{t.node(sa, "MatMul", []string{p, v})}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	ctx = t.node(sa, "Reshape", []string{ctx, t.constI(sa, []int64{3}, c.Batch, c.Seq, c.Hidden)})
	r := t.node(scope, "Add", []string{x, t.project(sa+"/o_proj", ctx, c.Hidden, c.Hidden)})
	m := t.rmsNorm(scope+"/post_attention_layernorm", r, c.Hidden)
	gate := t.project(scope+"/mlp/gate_proj", m, c.Hidden, c.FFN)
	silu := t.node(scope+"/mlp/act_fn", "Mul", []string{gate, t.node(scope+"/mlp/act_fn", "Sigmoid", []string{gate})})
	up := t.project(scope+"/mlp/up_proj", m, c.Hidden, c.FFN)
	down := t.project(scope+"/mlp/down_proj", t.node(scope+"/mlp", "Mul", []string{silu, up}), c.FFN, c.Hidden)
	return t.node(scope, "Add", []string{r, down})
}

// repeatKV appends transformers' repeat_kv on x [B, kvh, S, dh]:
// x[:, :, None].expand(B, kvh, n_rep, S, dh).reshape(B, kvh*n_rep, S,
// dh).
func (t *torchBuilder) repeatKV(scope, x string, kvh, dh int64) string {
	c := t.c
	rep := c.Heads / kvh
	e := t.node(scope, "Expand", []string{t.unsqueeze(scope, x, 2), t.constI(scope, []int64{5}, c.Batch, kvh, rep, c.Seq, dh)})
	return t.node(scope, "Reshape", []string{e, t.constI(scope, []int64{4}, c.Batch, c.Heads, c.Seq, dh)})
}

// softmaxFloat appends Softmax over the last axis of the scores sc as
// transformers computes it, softmax(sc, dtype=torch.float32) then .to
// the case's type: in float, with casts around it for float16.
func (t *torchBuilder) softmaxFloat(scope, sc string) string {
	c := t.c
	if c.DType != onnx.Float {
		sc = t.node(scope, "Cast", []string{sc}, onnx.IntAttr("to", int64(onnx.Float)))
	}
	p := t.node(scope, "Softmax", []string{sc}, onnx.IntAttr("axis", -1))
	if c.DType != onnx.Float {
		p = t.node(scope, "Cast", []string{p}, onnx.IntAttr("to", int64(c.DType)))
	}
	return p
}

// f32s rounds v to float32.
func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
