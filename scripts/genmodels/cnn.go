package main

// The tcnn_* cases: a small ResNet as torch.onnx.export writes
// torchvision's resnet in eval mode: a stem (Conv without bias,
// BatchNormalization, Relu, MaxPool 3/2/1), one BasicBlock (two 3x3
// Conv and BatchNormalization pairs, the identity added, Relu), a
// global average pool, Flatten and the Gemm head.

import (
	"fmt"
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

// cnn appends the network over input [B, 3, Img, Img]: with Widths, a
// torchvision ResNet-18 (the 7x7 stem, then a stage of two BasicBlocks
// per width, each stage after the first starting with stride 2 and a
// 1x1 downsample); without, the 3x3 stem and one BasicBlock of Hidden.
func (t *torchBuilder) cnn(x string) string {
	c := t.c
	w := c.Hidden
	k, p := int64(3), int64(1)
	if len(c.Widths) > 0 {
		k, p = 7, 3
	}
	h := t.node("/relu", "Relu", []string{t.convBN("/stem", x, 3, w, k, 2, p)})
	h = t.node("/maxpool", "MaxPool", []string{h}, onnx.IntAttr("ceil_mode", 0), onnx.IntsAttr("kernel_shape", 3, 3),
		onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("strides", 2, 2))
	if len(c.Widths) == 0 {
		h = t.basicBlock("/layer1/0", h, w, w, 1)
	}
	for i, out := range c.Widths {
		for b := int64(0); b < 2; b++ {
			s := int64(1)
			if i > 0 && b == 0 {
				s = 2
			}
			h = t.basicBlock(fmt.Sprintf("/layer%d/%d", i+1, b), h, w, out, s)
			w = out
		}
	}
	h = t.node("/avgpool", "GlobalAveragePool", []string{h})
	h = t.node("", "Flatten", []string{h}, onnx.IntAttr("axis", 1))
	return t.gemm("/fc", h, w, c.Classes)
}

// basicBlock appends torchvision's BasicBlock over x: two 3x3 Conv and
// BatchNormalization pairs (the first with stride s), the identity (a
// 1x1 Conv of stride s and BatchNormalization when the shape changes)
// added, Relu.
func (t *torchBuilder) basicBlock(scope, x string, in, out, s int64) string {
	r := t.node(scope+"/relu", "Relu", []string{t.convBN(scope+"/1", x, in, out, 3, s, 1)})
	r = t.convBN(scope+"/2", r, out, out, 3, 1, 1)
	id := x
	if s != 1 || in != out {
		id = t.convBN(scope+"/downsample", x, in, out, 1, s, 0)
	}
	return t.node(scope+"/relu_1", "Relu", []string{t.node(scope, "Add", []string{r, id})})
}
