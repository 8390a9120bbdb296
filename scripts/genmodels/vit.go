package main

// The tvit_* cases: a ViT encoder's embeddings and one pre-norm layer as
// torch.onnx.export writes transformers' ViTModel: the patch embedding
// Conv (stride = kernel), flatten(2).transpose(1, 2), the CLS token
// expanded over the batch and concatenated, position embeddings,
// LayerNorm, attention, GELU MLP, residuals, the final LayerNorm.

import (
	"math"

	"ipu.local/libs/onnx"
)

// vit appends the model over pixel_values [B, 3, Img, Img]; it returns
// [B, 1 + (Img/Patch)^2, H].
func (t *torchBuilder) vit(x string) string {
	c := t.c
	const scope = "/vit/embeddings"
	n := (c.Img / c.Patch) * (c.Img / c.Patch)
	a := 1 / math.Sqrt(float64(3*c.Patch*c.Patch))
	w := t.param("vit.embeddings.patch_embeddings.projection.weight", []int64{c.Hidden, 3, c.Patch, c.Patch}, -a, a)
	b := t.param("vit.embeddings.patch_embeddings.projection.bias", []int64{c.Hidden}, -a, a)
	e := t.node(scope+"/patch_embeddings/projection", "Conv", []string{x, w, b},
		onnx.IntsAttr("dilations", 1, 1), onnx.IntAttr("group", 1), onnx.IntsAttr("kernel_shape", c.Patch, c.Patch),
		onnx.IntsAttr("pads", 0, 0, 0, 0), onnx.IntsAttr("strides", c.Patch, c.Patch))
	e = t.node(scope+"/patch_embeddings", "Reshape", []string{e, t.constI(scope, []int64{3}, c.Batch, c.Hidden, -1)})
	e = t.node(scope+"/patch_embeddings", "Transpose", []string{e}, onnx.IntsAttr("perm", 0, 2, 1))
	cls := t.param("vit.embeddings.cls_token", []int64{1, 1, c.Hidden}, -0.5, 0.5)
	cls = t.node(scope, "Expand", []string{cls, t.constI(scope, []int64{3}, c.Batch, 1, 1)})
	e = t.node(scope, "Concat", []string{cls, e}, onnx.IntAttr("axis", 1))
	pos := t.param("vit.embeddings.position_embeddings", []int64{1, n + 1, c.Hidden}, -0.5, 0.5)
	h := t.node(scope, "Add", []string{e, pos})

	l := "/vit/encoder/layer.0"
	sa := l + "/attention/attention"
	dh := c.Hidden / c.Heads
	y := t.layerNorm(l+"/layernorm_before", h, 3, c.Hidden)
	heads := func(name string) string {
		p := t.linear(sa+"/"+name, y, c.Hidden, c.Hidden)
		r := t.node(sa, "Reshape", []string{p, t.constI(sa, []int64{4}, c.Batch, n+1, c.Heads, dh)})
		return t.node(sa, "Transpose", []string{r}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	}
	q, k, v := heads("query"), heads("key"), heads("value")
	sc := t.node(sa, "MatMul", []string{q, t.node(sa, "Transpose", []string{k}, onnx.IntsAttr("perm", 0, 1, 3, 2))})
	sc = t.node(sa, "Div", []string{sc, t.constF(sa, math.Sqrt(float64(dh)))})
	p := t.node(sa, "Softmax", []string{sc}, onnx.IntAttr("axis", -1))
	ctx := t.node(sa, "Transpose", []string{t.node(sa, "MatMul", []string{p, v})}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	ctx = t.node(sa, "Reshape", []string{ctx, t.constI(sa, []int64{3}, c.Batch, n+1, c.Hidden)})
	h = t.node(l, "Add", []string{t.linear(l+"/attention/output/dense", ctx, c.Hidden, c.Hidden), h})
	y = t.layerNorm(l+"/layernorm_after", h, 3, c.Hidden)
	f := t.gelu(l+"/intermediate/intermediate_act_fn", t.linear(l+"/intermediate/dense", y, c.Hidden, c.FFN))
	h = t.node(l+"/output", "Add", []string{t.linear(l+"/output/dense", f, c.FFN, c.Hidden), h})
	return t.layerNorm("/vit/layernorm", h, 3, c.Hidden)
}
