package main

// The tunet_* cases: a small UNet as torch.onnx.export writes a
// segmentation network: two encoder levels (Conv with bias and Relu, a
// MaxPool of 2 between them), the deeper one brought back up by
// F.interpolate(scale_factor=2) (Resize: nearest, asymmetric and floor,
// or with Bilinear linear and pytorch_half_pixel), the skip
// concatenated along the channels, a Conv and Relu, and a 1x1 Conv head
// of Classes channels.

import (
	"math"

	"ipu.local/libs/onnx"
)

// conv appends a Conv with bias over x: in to out channels, a k x k
// kernel, pads p, stride 1.
func (t *torchBuilder) conv(scope, x string, in, out, k, p int64) string {
	a := 1 / math.Sqrt(float64(in*k*k))
	w := t.param(paramName(scope)+".weight", []int64{out, in, k, k}, -a, a)
	b := t.param(paramName(scope)+".bias", []int64{out}, -a, a)
	return t.node(scope, "Conv", []string{x, w, b}, onnx.IntsAttr("dilations", 1, 1), onnx.IntAttr("group", 1),
		onnx.IntsAttr("kernel_shape", k, k), onnx.IntsAttr("pads", p, p, p, p), onnx.IntsAttr("strides", 1, 1))
}

// unet appends the network over input [B, 3, Img, Img].
func (t *torchBuilder) unet(x string) string {
	c := t.c
	w := c.Hidden
	e1 := t.node("/enc1", "Relu", []string{t.conv("/enc1/conv", x, 3, w, 3, 1)})
	p := t.node("/pool", "MaxPool", []string{e1}, onnx.IntAttr("ceil_mode", 0), onnx.IntsAttr("kernel_shape", 2, 2),
		onnx.IntsAttr("pads", 0, 0, 0, 0), onnx.IntsAttr("strides", 2, 2))
	e2 := t.node("/enc2", "Relu", []string{t.conv("/enc2/conv", p, w, 2*w, 3, 1)})
	cat := t.node("/cat", "Concat", []string{t.upsample("/up", e2), e1}, onnx.IntAttr("axis", 1))
	d := t.node("/dec", "Relu", []string{t.conv("/dec/conv", cat, 3*w, w, 3, 1)})
	return t.conv("/head", d, w, c.Classes, 1, 0)
}

// upsample appends F.interpolate(x, scale_factor=2) as torch exports it
// from opset 13: Resize with no roi and the scales a Constant.
func (t *torchBuilder) upsample(scope, x string) string {
	scales := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewFloat32("", []int64{4}, []float32{1, 1, 2, 2})))
	mode, coord := "nearest", "asymmetric"
	if t.c.Bilinear {
		mode, coord = "linear", "pytorch_half_pixel"
	}
	return t.node(scope, "Resize", []string{x, "", scales}, onnx.StringAttr("coordinate_transformation_mode", coord),
		onnx.FloatAttr("cubic_coeff_a", -0.75), onnx.StringAttr("mode", mode), onnx.StringAttr("nearest_mode", "floor"))
}
