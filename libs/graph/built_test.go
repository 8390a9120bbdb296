package graph

import (
	"fmt"
	"strings"
	"testing"

	"ipu.local/libs/onnx"
)

// TestDropoutAndReciprocal: an inference Dropout is its input (its mask
// trues), Reciprocal is Div(1, x) in x's type; training is refused.
func TestDropoutAndReciprocal(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{2, 3})
	b.AddInput("h", onnx.Float16, []int64{4})
	b.AddInitializer(onnx.NewFloat32("ratio", []int64{}, []float32{0.1}))
	b.AddInitializer(onnx.NewBool("train", []int64{}, []bool{false}))
	b.AddNode("Dropout", "drop", []string{"x", "ratio", "train"}, []string{"d", "mask"})
	b.AddNode("Reciprocal", "rx", []string{"d"}, []string{"r"})
	b.AddNode("Reciprocal", "rh", []string{"h"}, []string{"rh"})
	b.AddOutput("r", onnx.Float, []int64{2, 3})
	b.AddOutput("rh", onnx.Float16, []int64{4})
	b.AddOutput("mask", onnx.Bool, []int64{2, 3})
	g := buildOf(t, b)
	want := `graph "main" opset 13
input x float[2,3]
input h float16[4]
const mask bool[2,3]
const rx/one float[]
const rh/one float16[]
node "drop" Identity (x) -> d float[2,3]
node "rx" Div (rx/one, d) -> r float[2,3]
node "rh" Div (rh/one, h) -> rh float16[4]
output r
output rh
output mask
`
	if got := g.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if want := "[{drop inference Dropout as Identity} {rx Reciprocal as Div(1, x)} {rh Reciprocal as Div(1, x)}]"; fmt.Sprint(g.Built) != want {
		t.Errorf("Built %v, want %s", g.Built, want)
	}
	if string(g.Outputs[2].Const.Raw) != "\x01\x01\x01\x01\x01\x01" {
		t.Errorf("mask %v", g.Outputs[2].Const.Raw)
	}
	for _, n := range g.Nodes[1:] {
		if raw, want := n.Inputs[0].Const.Raw, map[string]string{"rx": "\x00\x00\x80\x3f", "rh": "\x00\x3c"}[n.Name]; string(raw) != want {
			t.Errorf("%s: 1 is %x", n.Name, raw)
		}
	}

	for _, c := range []struct {
		name  string
		opset int64
		train []bool // nil: no training_mode input
		attrs []onnx.Attr
		want  string
	}{
		{"training mode", 13, []bool{true}, nil, `node "drop" (Dropout) input 2: training_mode is true: a training Dropout is not supported`},
		{"is_test 0", 6, nil, nil, `node "drop" (Dropout): is_test 0: a training Dropout is not supported (inference needs is_test 1)`},
		{"is_test 1", 6, nil, []onnx.Attr{onnx.IntAttr("is_test", 1)}, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := onnx.NewModel(c.opset)
			b.AddInput("x", onnx.Float, []int64{3})
			ins := []string{"x"}
			if c.train != nil {
				b.AddInitializer(onnx.NewBool("train", []int64{}, c.train))
				ins = append(ins, "", "train")
			}
			b.AddNode("Dropout", "drop", ins, []string{"y"}, c.attrs...)
			b.AddOutput("y", onnx.Float, []int64{3})
			err := buildErr(t, b)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestArgMaxErrors(t *testing.T) {
	for _, c := range []struct {
		shape []int64
		axis  int64
		want  string
	}{
		{[]int64{}, 0, `input 0: "x" is a scalar: want rank 1 or more`},
		{[]int64{3, 4}, 2, `axis 2 out of range for rank 2`},
		{[]int64{3, 4}, -3, `axis -3 out of range for rank 2`},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, c.shape)
		b.AddNode("ArgMax", "am", []string{"x"}, []string{"y"}, onnx.IntAttr("axis", c.axis))
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Int64})
		checkNodeErr(t, buildErr(t, b), `node "am" (ArgMax)`, c.want)
	}
}

// TestCastNarrowFloatToInt: a cast from float16 or FP8 to an integer
// goes through float (exact); from float it stays one cast. A float16
// constant folds through both.
func TestCastNarrowFloatToInt(t *testing.T) {
	b := onnx.NewModel(19)
	b.AddInput("h", onnx.Float16, []int64{4})
	b.AddInput("x", onnx.Float, []int64{4})
	b.AddInitializer(&onnx.Tensor{Name: "c", DType: onnx.Float16, Dims: []int64{2}, Raw: []byte{0x00, 0xC1, 0x66, 0x4E}}) // -2.5, 25.59
	b.AddNode("Cast", "h8", []string{"h"}, []string{"h8"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
	b.AddNode("Cast", "hi", []string{"h"}, []string{"hi"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Cast", "qi", []string{"h8"}, []string{"qi"}, onnx.IntAttr("to", int64(onnx.Int32)))
	b.AddNode("Cast", "xi", []string{"x"}, []string{"xi"}, onnx.IntAttr("to", int64(onnx.Int32)))
	b.AddNode("Cast", "ci", []string{"c"}, []string{"ci"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddOutput("ci", onnx.Int64, []int64{2})
	b.AddOutput("hi", onnx.Int64, []int64{4})
	b.AddOutput("qi", onnx.Int32, []int64{4})
	b.AddOutput("xi", onnx.Int32, []int64{4})
	g := buildOf(t, b)
	if got := foldedInt64s(t, g); fmt.Sprint(got) != "[-2 25]" {
		t.Errorf("folded %v, want [-2 25]", got)
	}
	var casts []string
	for _, n := range g.Nodes {
		casts = append(casts, fmt.Sprintf("%s:%s->%s", n.Name, n.Inputs[0].DType, n.Outputs[0].DType))
	}
	want := "[h8:float16->float8e4m3fn hi/float1:float16->float hi:float->int64 qi/float1:float8e4m3fn->float qi:float->int32 xi:float->int32]"
	if fmt.Sprint(casts) != want {
		t.Errorf("casts %v\nwant %s", casts, want)
	}
	if len(g.Built) != 3 || g.Built[0].What != "Cast from float16 to int64 as Cast to float, then to int64" {
		t.Errorf("Built %v", g.Built)
	}
}

// Conv's refusals, each in one line naming the node.
func TestConvErrors(t *testing.T) {
	for _, c := range []struct {
		x, w  []int64
		attrs []onnx.Attr
		want  string
	}{
		{[]int64{1, 4, 8, 8}, []int64{4, 1, 3, 3}, []onnx.Attr{onnx.IntAttr("group", 3)}, "group 3 does not divide the input's 4 channels and the weight's 4"},
		{[]int64{1, 3, 8, 8}, []int64{4, 2, 3, 3}, nil, "weight [4,2,3,3] has 2 input channels per group, the input [1,3,8,8] has 3 in 1 groups"},
		{[]int64{1, 3, 8, 8}, []int64{4, 3, 3, 3}, []onnx.Attr{onnx.StringAttr("auto_pad", "SAME")}, `auto_pad "SAME" is not one of`},
		{[]int64{1, 3, 2, 8}, []int64{4, 3, 3, 3}, nil, "spatial axis 0: the kernel spans 3, the padded input 2"},
		{[]int64{1, 3, 8, 8}, []int64{4, 3, 3, 3}, []onnx.Attr{onnx.IntsAttr("strides", 0, 1)}, "stride 0"},
		{[]int64{1, 3, 8, 8}, []int64{4, 3, 3, 3}, []onnx.Attr{onnx.IntsAttr("pads", 1, 1)}, `attribute "pads" [1 1]: 2 values, want 4`},
		{[]int64{1, 3, 8, 8}, []int64{4, 3, 3, 3}, []onnx.Attr{onnx.IntsAttr("kernel_shape", 2, 2)}, "kernel_shape [2 2] does not match the weight's [3 3]"},
		// bounded before anything is allocated
		{[]int64{1, 64, 2048, 2048}, []int64{8, 64, 3, 3}, nil, "the gathered columns: shape [1,576,4186116] has"},
		{[]int64{1, 1, 2, 17000000}, []int64{1, 1, 1, 2}, nil, "the columns' index table along spatial axis 1, 2 x 16999999, is more than 16777216 elements"},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, c.x)
		b.AddInput("w", onnx.Float, c.w)
		b.AddNode("Conv", "conv", []string{"x", "w"}, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "conv" (Conv)`, c.want)
	}
}

// The pools' and BatchNormalization's refusals, each in one line.
func TestPoolErrors(t *testing.T) {
	for _, c := range []struct {
		op    string
		outs  []string
		attrs []onnx.Attr
		want  string
	}{
		{"MaxPool", []string{"y", "idx"}, []onnx.Attr{onnx.IntsAttr("kernel_shape", 2, 2)}, "the Indices output is not supported"},
		{"AveragePool", []string{"y"}, []onnx.Attr{onnx.IntsAttr("kernel_shape", 2, 2), onnx.IntAttr("ceil_mode", 1)}, "ceil_mode 1 is not supported for AveragePool"},
		{"MaxPool", []string{"y"}, nil, "kernel_shape []: want 2 values"},
		{"MaxPool", []string{"y"}, []onnx.Attr{onnx.IntsAttr("kernel_shape", 9, 2)}, "spatial axis 0: the kernel spans 9, the padded input 8"},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, []int64{1, 2, 8, 8})
		b.AddNode(c.op, "pool", []string{"x"}, c.outs, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "pool" (`+c.op+`)`, c.want)
	}
	b := onnx.NewModel(15)
	b.AddInput("x", onnx.Float, []int64{1, 2, 4})
	for _, p := range []string{"s", "b", "m", "v"} {
		b.AddInitializer(onnx.NewFloat32(p, []int64{2}, []float32{1, 1}))
	}
	b.AddNode("BatchNormalization", "bn", []string{"x", "s", "b", "m", "v"}, []string{"y"}, onnx.IntAttr("training_mode", 1))
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
	checkNodeErr(t, buildErr(t, b), `node "bn" (BatchNormalization)`, "training mode")
}

// Conv's Built entry names the path the build took: patches for windows
// that tile the input, im2col otherwise.
func TestConvBuiltNamesItsPath(t *testing.T) {
	for _, c := range []struct {
		strides []int64
		want    string
	}{{[]int64{4, 4}, "Conv of kernel [4 4], strides [4 4], 1 groups as patches (Reshape, Transpose) and MatMul"},
		{[]int64{2, 2}, "Conv of kernel [4 4], strides [2 2], 1 groups as im2col (a Gather along each of 2 spatial axes, Transpose) and MatMul"}} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, []int64{1, 3, 16, 16})
		b.AddInput("w", onnx.Float, []int64{8, 3, 4, 4})
		b.AddNode("Conv", "conv", []string{"x", "w"}, []string{"y"}, onnx.IntsAttr("strides", c.strides...))
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		g := buildOf(t, b)
		if len(g.Built) != 1 || g.Built[0].What != c.want {
			t.Errorf("Built %v, want %q", g.Built, c.want)
		}
		ops := map[string]bool{}
		for _, n := range g.Nodes {
			ops[n.Op] = true
		}
		if patches := c.strides[0] == 4; ops["Gather"] == patches || !ops["Transpose"] {
			t.Errorf("strides %v: nodes %v", c.strides, ops)
		}
	}
}

// Resize's refusals, each in one line, and its bounds before anything
// is allocated.
func TestResizeErrors(t *testing.T) {
	for _, c := range []struct {
		attrs  []onnx.Attr
		scales []float32
		sizes  []int64
		want   string
	}{
		{[]onnx.Attr{onnx.StringAttr("mode", "cubic")}, []float32{1, 1, 2, 2}, nil, `mode "cubic" is not supported (nearest and linear are)`},
		{[]onnx.Attr{onnx.StringAttr("coordinate_transformation_mode", "tf_crop_and_resize")}, []float32{1, 1, 2, 2}, nil, `coordinate_transformation_mode "tf_crop_and_resize" is not supported`},
		{[]onnx.Attr{onnx.StringAttr("nearest_mode", "nearest")}, []float32{1, 1, 2, 2}, nil, `nearest_mode "nearest" is not supported`},
		{[]onnx.Attr{onnx.IntAttr("antialias", 1)}, []float32{1, 1, 2, 2}, nil, "antialias 1 is not supported"},
		{nil, []float32{1, 1, 2, 2}, []int64{1, 2, 8, 8}, "both scales and sizes are given"},
		{nil, nil, nil, "neither scales nor sizes are given"},
		{nil, []float32{1, 2}, nil, "2 scales for 4 axes"},
		{nil, []float32{1, 1, 0, 2}, nil, "scale 0 of axis 2 (length 4) out of range"},
		{nil, nil, []int64{1, 2, 0, 8}, "size 0 of axis 2 out of range [1, 268435456]"},
		{nil, nil, []int64{1, 1, 4, 20000000}, "the index table of axis 3, 20000000 elements, is more than 16777216"},
	} {
		b := onnx.NewModel(18)
		b.AddInput("x", onnx.Float, []int64{1, 2, 4, 4})
		ins := []string{"x", ""}
		if c.scales != nil {
			b.AddInitializer(onnx.NewFloat32("scales", []int64{int64(len(c.scales))}, c.scales))
			ins = append(ins, "scales")
		} else {
			ins = append(ins, "")
		}
		if c.sizes != nil {
			b.AddInitializer(onnx.NewInt64("sizes", []int64{int64(len(c.sizes))}, c.sizes))
			ins = append(ins, "sizes")
		}
		b.AddNode("Resize", "rs", ins, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "rs" (Resize)`, c.want)
	}
}

// InstanceNormalization's refusals, each in one line.
func TestInstanceNormErrors(t *testing.T) {
	for _, c := range []struct {
		x     []int64
		param []int64
		want  string
	}{
		{[]int64{1, 2}, []int64{2}, "shape [1,2]: want [N, C, D1, ...]"},
		{[]int64{1, 2, 4}, []int64{3}, `"s" float[3]: want [2] of float`},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, c.x)
		b.AddInput("s", onnx.Float, c.param)
		b.AddInput("b", onnx.Float, c.param)
		b.AddNode("InstanceNormalization", "in", []string{"x", "s", "b"}, []string{"y"})
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "in" (InstanceNormalization)`, c.want)
	}
}

// DepthToSpace's and SpaceToDepth's refusals, each in one line.
func TestDepthToSpaceErrors(t *testing.T) {
	for _, c := range []struct {
		op    string
		x     []int64
		attrs []onnx.Attr
		want  string
	}{
		{"DepthToSpace", []int64{1, 8, 2, 2}, nil, "blocksize 0 out of range [1, 32768]"},
		{"DepthToSpace", []int64{1, 6, 2, 2}, []onnx.Attr{onnx.IntAttr("blocksize", 2)}, "C is not a multiple of blocksize 2 squared"},
		{"DepthToSpace", []int64{1, 8, 2, 2}, []onnx.Attr{onnx.IntAttr("blocksize", 2), onnx.StringAttr("mode", "XYZ")}, `mode "XYZ": want DCR or CRD`},
		{"SpaceToDepth", []int64{1, 2, 5, 4}, []onnx.Attr{onnx.IntAttr("blocksize", 2)}, "H and W are not multiples of blocksize 2"},
		{"SpaceToDepth", []int64{2, 5, 4}, []onnx.Attr{onnx.IntAttr("blocksize", 2)}, "want [N, C, H, W]"},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, c.x)
		b.AddNode(c.op, "d", []string{"x"}, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "d" (`+c.op+`)`, c.want)
	}
}

// ConvTranspose's refusals, each in one line.
func TestConvTransposeErrors(t *testing.T) {
	for _, c := range []struct {
		w     []int64
		attrs []onnx.Attr
		want  string
	}{
		{[]int64{3, 2, 3, 3}, nil, "group 1 and weight [3,2,3,3]: want the input's 2 channels, a multiple of the groups, first"},
		{[]int64{2, 2, 3, 3}, []onnx.Attr{onnx.IntsAttr("output_padding", 2, 0), onnx.IntsAttr("strides", 2, 2)}, "output_padding [2 0]: axis 0's must be in [0, 2)"},
		{[]int64{2, 2, 3, 3}, []onnx.Attr{onnx.IntsAttr("output_shape", 20, 20)}, "spatial axis 0: an output of 20 elements, want 1 to the 6 the transposed convolution makes"},
		{[]int64{2, 2, 3, 3}, []onnx.Attr{onnx.IntsAttr("pads", 3, 3, 3, 3)}, "spatial axis 0: pads 3 and 3 leave none of the 6 elements the transposed convolution makes"},
		{[]int64{2, 2, 3, 3}, []onnx.Attr{onnx.IntsAttr("kernel_shape", 2, 2)}, "kernel_shape [2 2] does not match the weight's [3 3]"},
		// bounded before the flipping table is allocated
		{[]int64{2, 1, 1, 20000000}, nil, "spatial axis 1: a kernel of 20000000, its flipping table more than 16777216 entries"},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, []int64{1, 2, 4, 4})
		b.AddInput("w", onnx.Float, c.w)
		b.AddNode("ConvTranspose", "ct", []string{"x", "w"}, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "ct" (ConvTranspose)`, c.want)
	}
}

// GroupNormalization's refusals, each in one line.
func TestGroupNormErrors(t *testing.T) {
	for _, c := range []struct {
		opset int64
		param []int64
		attrs []onnx.Attr
		want  string
	}{
		{18, []int64{2}, []onnx.Attr{onnx.IntAttr("num_groups", 4)}, "num_groups 4 does not divide the 6 channels"},
		{18, []int64{6}, []onnx.Attr{onnx.IntAttr("num_groups", 2)}, `"s" float[6]: want [2] of float`},
		{21, []int64{2}, []onnx.Attr{onnx.IntAttr("num_groups", 2)}, `"s" float[2]: want [6] of float`},
		{21, []int64{6}, []onnx.Attr{onnx.IntAttr("num_groups", 2), onnx.IntAttr("stash_type", 10)}, "stash_type float16 is not supported (only float)"},
	} {
		b := onnx.NewModel(c.opset)
		b.AddInput("x", onnx.Float, []int64{1, 6, 4})
		b.AddInput("s", onnx.Float, c.param)
		b.AddInput("b", onnx.Float, c.param)
		b.AddNode("GroupNormalization", "gn", []string{"x", "s", "b"}, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "gn" (GroupNormalization)`, c.want)
	}
}

// Resize's sizes as torch.onnx.export writes F.interpolate(size=...):
// the batch and channels sliced from Shape(x), concatenated with the
// spatial sizes. They fold to a constant, and the output takes them.
func TestResizeSizesFromShape(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{2, 3, 5, 4})
	b.AddInitializer(onnx.NewInt64("zero", []int64{1}, []int64{0}))
	b.AddInitializer(onnx.NewInt64("two", []int64{1}, []int64{2}))
	b.AddInitializer(onnx.NewInt64("hw", []int64{2}, []int64{9, 7}))
	b.AddNode("Shape", "shape", []string{"x"}, []string{"s"})
	b.AddNode("Slice", "nc", []string{"s", "zero", "two", "zero"}, []string{"nc"})
	b.AddNode("Concat", "sizes", []string{"nc", "hw"}, []string{"sizes"}, onnx.IntAttr("axis", 0))
	b.AddNode("Resize", "up", []string{"x", "", "", "sizes"}, []string{"y"}, onnx.StringAttr("mode", "linear"))
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
	g := buildOf(t, b)
	if got := ShapeString(g.Outputs[0].Shape); got != "[2,3,9,7]" {
		t.Fatalf("output shape %s, want [2,3,9,7]", got)
	}
	for _, n := range g.Nodes {
		if n.Op == "Shape" || n.Op == "Concat" {
			t.Errorf("%s %q left: the sizes did not fold", n.Op, n.Name)
		}
	}
}

// The built reductions' and PRelu's refusals, each in one line.
func TestReduceBuiltErrors(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{2, 3})
	b.AddNode("ReduceL2", "r", []string{"x"}, []string{"y"}, onnx.IntsAttr("axes", 1, -1))
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
	checkNodeErr(t, buildErr(t, b), `node "r" (ReduceL2)`, "axes [1 -1] name axis 1 twice")
	b = onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{2, 3})
	b.AddInput("s", onnx.Float, []int64{2})
	b.AddNode("PRelu", "p", []string{"x", "s"}, []string{"y"})
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
	checkNodeErr(t, buildErr(t, b), `node "p" (PRelu)`, "slope shape [2] does not broadcast to the input's [2,3]")
}

// The Built entries of ConvTranspose and the pools name only the steps
// the build made: no zeros inserted at stride 1, no flip of a 1x1
// kernel, no Pad without pads.
func TestBuiltEntriesNameTheirSteps(t *testing.T) {
	for _, c := range []struct {
		op    string
		w     []int64
		attrs []onnx.Attr
		want  string
	}{
		{"ConvTranspose", []int64{2, 3, 1, 1}, nil,
			"ConvTranspose of kernel [1 1], strides [1 1], 1 groups as the weight as [M, C/G, k...] (Reshape, Transpose) and a Conv as patches (Reshape, Transpose) and MatMul"},
		{"ConvTranspose", []int64{2, 3, 3, 3}, []onnx.Attr{onnx.IntsAttr("strides", 2, 1)},
			"ConvTranspose of kernel [3 3], strides [2 1], 1 groups as zeros inserted (Pad, Gather), the weight as [M, C/G, k...] (Reshape, Transpose, a flipping Gather) and a Conv as im2col (Pad, a Gather along each of 2 spatial axes, Transpose) and MatMul"},
		{"MaxPool", nil, []onnx.Attr{onnx.IntsAttr("kernel_shape", 2, 2)},
			"MaxPool of kernel [2 2], strides [1 1] as a Gather and a reduction along each spatial axis"},
		{"MaxPool", nil, []onnx.Attr{onnx.IntsAttr("kernel_shape", 3, 3), onnx.IntsAttr("pads", 1, 1, 1, 1)},
			"MaxPool of kernel [3 3], strides [1 1] as Pad, then a Gather and a reduction along each spatial axis"},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, []int64{1, 2, 5, 5})
		ins := []string{"x"}
		if c.w != nil {
			b.AddInput("w", onnx.Float, c.w)
			ins = append(ins, "w")
		}
		b.AddNode(c.op, "n", ins, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		g := buildOf(t, b)
		if len(g.Built) != 1 || g.Built[0].What != c.want {
			t.Errorf("Built %v, want %q", g.Built, c.want)
		}
	}
}
