package main

// The tcnn_* cases: a small ResNet as torch.onnx.export writes
// torchvision's resnet in eval mode: a stem (Conv without bias,
// BatchNormalization, Relu, MaxPool 3/2/1), one BasicBlock (two 3x3
// Conv and BatchNormalization pairs, the identity added, Relu), a
// global average pool, Flatten and the Gemm head.

import (
	"math"

	"ipu.local/libs/onnx"
)

// convBN appends Conv (no bias) and BatchNormalization over x with in
// and out channels, kernel k, stride s and pad p.
func (t *torchBuilder) convBN(scope, x string, in, out, k, s, p int64) string {
	a := 1 / math.Sqrt(float64(in*k*k))
	w := t.param(paramName(scope)+".conv.weight", []int64{out, in, k, k}, -a, a)
	y := t.node(scope+"/conv", "Conv", []string{x, w}, onnx.IntsAttr("dilations", 1, 1), onnx.IntAttr("group", 1),
		onnx.IntsAttr("kernel_shape", k, k), onnx.IntsAttr("pads", p, p, p, p), onnx.IntsAttr("strides", s, s))
	bn := paramName(scope) + ".bn"
	g := t.param(bn+".weight", []int64{out}, 0.5, 1.5)
	b := t.param(bn+".bias", []int64{out}, -0.2, 0.2)
	m := t.param(bn+".running_mean", []int64{out}, -0.2, 0.2)
	v := t.param(bn+".running_var", []int64{out}, 0.5, 1.5)
	return t.node(scope+"/bn", "BatchNormalization", []string{y, g, b, m, v},
		onnx.FloatAttr("epsilon", 1e-5), onnx.FloatAttr("momentum", 0.9))
}

// cnn appends the network over input [B, 3, Img, Img].
func (t *torchBuilder) cnn(x string) string {
	c := t.c
	w := c.Hidden
	h := t.node("/relu", "Relu", []string{t.convBN("/stem", x, 3, w, 3, 2, 1)})
	h = t.node("/maxpool", "MaxPool", []string{h}, onnx.IntAttr("ceil_mode", 0), onnx.IntsAttr("kernel_shape", 3, 3),
		onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("strides", 2, 2))
	r := t.node("/layer1/0/relu", "Relu", []string{t.convBN("/layer1/0/1", h, w, w, 3, 1, 1)})
	r = t.convBN("/layer1/0/2", r, w, w, 3, 1, 1)
	h = t.node("/layer1/0/relu_1", "Relu", []string{t.node("/layer1/0", "Add", []string{r, h})})
	h = t.node("/avgpool", "GlobalAveragePool", []string{h})
	h = t.node("", "Flatten", []string{h}, onnx.IntAttr("axis", 1))
	return t.gemm("/fc", h, w, c.Classes)
}
