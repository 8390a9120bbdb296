package link

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/lower"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// f16Const returns an FP16 initializer of shape dims, its elements a
// ramp.
func f16Const(name string, dims []int64, scale float32) *onnx.Tensor {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	c := &onnx.Tensor{Name: name, DType: onnx.Float16, Dims: dims}
	for _, x := range ramp(int(n), scale) {
		c.Raw = binary.LittleEndian.AppendUint16(c.Raw, numfmt.F32ToF16(math.Float32bits(x)))
	}
	return c
}

// actModel multiplies a [m, k] by b [k, n] (FP16), then, as mid says,
// adds a bias vector ("bias"), multiplies by a constant ("scale") or
// nothing (""), or multiplies FP32 operands and casts the result to
// FP16 ("cast"), then applies the activation op (attrs, and for Clip
// constant bounds as inputs). With shared, the activation's input is
// also a graph output (no fold).
func actModel(m, k, n int64, mid, op string, shared bool, attrs ...onnx.Attr) []byte {
	b := onnx.NewModel(21)
	in := onnx.Float16
	if mid == "cast" {
		in = onnx.Float
	}
	b.AddInput("a", in, []int64{m, k})
	b.AddInput("b", in, []int64{k, n})
	b.AddNode("MatMul", "mm", []string{"a", "b"}, []string{"m"})
	x := "m"
	switch mid {
	case "cast":
		b.AddNode("Cast", "cast", []string{"m"}, []string{"z"}, onnx.IntAttr("to", int64(onnx.Float16)))
		x = "z"
	case "bias":
		b.AddInitializer(f16Const("c", []int64{n}, 0.5))
		b.AddNode("Add", "add", []string{"m", "c"}, []string{"z"})
		x = "z"
	case "scale":
		b.AddInitializer(f16Const("s", []int64{1}, 0.25))
		b.AddNode("Mul", "mul", []string{"m", "s"}, []string{"z"})
		x = "z"
	}
	ins := []string{x}
	if op == "Clip" {
		b.AddInitializer(f16Const("lo", []int64{}, 0.5))
		b.AddInitializer(&onnx.Tensor{Name: "hi", DType: onnx.Float16, Raw: binary.LittleEndian.AppendUint16(nil, numfmt.F32ToF16(math.Float32bits(3)))})
		ins = append(ins, "lo", "hi")
	}
	b.AddNode(op, "act", ins, []string{"y"}, attrs...)
	b.AddOutput("y", onnx.Float16, []int64{m, n})
	if shared {
		b.AddOutput(x, onnx.Float16, []int64{m, n})
	}
	return b.Marshal()
}

// actKernels counts the sums of parts that apply an activation and the
// Unary kernels of the activation node "act".
func actKernels(steps []*prog.Superstep) (sums, unaries int) {
	return countKernels(steps, func(k *prog.Kernel) bool {
		sp, ok := k.Params.(*codegen.SumParts)
		return ok && sp.Act.On
	}, func(k *prog.Kernel) bool {
		_, ok := k.Params.(*codegen.Unary)
		return ok && k.What == "act"
	})
}

// TestOutputAct: the plan folds the activation that is the only reader
// of a product's FP16 result (after a folded bias or scale) into the
// product; a k split's sum applies it, after the bias, when the sum
// writes the FP16 result, else a Unary runs after the cast, the bias
// and the scale; an activation whose input is also an output is not
// folded; and the numbers are the host reference's at device precision.
func TestOutputAct(t *testing.T) {
	for _, tc := range []struct {
		name          string
		model         []byte
		split         plan.Split
		folded        bool
		sums, unaries bool // some of each
	}{
		{"k4-bias-gelu", actModel(32, 256, 48, "bias", "Gelu", false), plan.Split{B: 1, M: 1, N: 1, K: 4}, true, true, false},
		{"k8-cols-bias-gelu-tanh", actModel(16, 256, 100, "bias", "Gelu", false, onnx.StringAttr("approximate", "tanh")), plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols"}, true, true, false},
		{"k3-m2-relu", actModel(20, 192, 40, "", "Relu", false), plan.Split{B: 1, M: 2, N: 1, K: 3}, true, true, false},
		{"k2-clip", actModel(24, 128, 36, "bias", "Clip", false), plan.Split{B: 1, M: 1, N: 1, K: 2}, true, true, false},
		{"k4-cast-tanh", actModel(24, 256, 40, "cast", "Tanh", false), plan.Split{B: 1, M: 1, N: 1, K: 4}, true, true, false},
		{"k1-cast-hard-swish", actModel(24, 64, 40, "cast", "HardSwish", false), plan.Split{B: 1, M: 1, N: 2, K: 1}, true, false, true},
		{"k2-scale-sigmoid", actModel(24, 128, 40, "scale", "Sigmoid", false), plan.Split{B: 1, M: 1, N: 1, K: 2}, true, false, true},
		{"k1-bias-gelu", actModel(32, 64, 48, "bias", "Gelu", false), plan.Split{B: 1, M: 2, N: 3, K: 1}, true, false, true},
		{"k1-leaky-relu", actModel(16, 64, 40, "", "LeakyRelu", false, onnx.FloatAttr("alpha", 0.1)), plan.Split{B: 1, M: 1, N: 2, K: 1}, true, false, true},
		{"k2-shared", actModel(24, 128, 40, "bias", "Gelu", true), plan.Split{B: 1, M: 1, N: 1, K: 2}, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, pl := buildCut(t, tc.model, tc.split, "", "b")
			folded := false
			for _, s := range pl.Steps {
				folded = folded || s.Name == "act" && s.Kernel == "folded"
			}
			if folded != tc.folded {
				t.Fatalf("activation folded %v, want %v", folded, tc.folded)
			}
			pr, err := lower.Lower(pl, g, arch.MustLookup(pl.Arch))
			if err != nil {
				t.Fatal(err)
			}
			if sums, unaries := actKernels(pr.Steps); tc.folded && (sums > 0) != tc.sums || (unaries > 0) != (tc.unaries || !tc.folded) {
				t.Errorf("%d sums and %d Unary kernels apply the activation", sums, unaries)
			}
			o, stats, err := Link(pl, "test", Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, o, stats, g, 1)
			checkVerdict(t, o, stats, g, 2)
		})
	}
}

// TestOutputActBits: the folded activation's output is bit for bit the
// unfolded one's (the model whose activation input is also an output),
// under the same split, for a k split's fused sum and for the Unary
// after the cast.
func TestOutputActBits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    string
		attrs []onnx.Attr
		split plan.Split
	}{
		{"k4-gelu", "Gelu", nil, plan.Split{B: 1, M: 1, N: 1, K: 4}},
		{"k8-cols-gelu-tanh", "Gelu", []onnx.Attr{onnx.StringAttr("approximate", "tanh")}, plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols"}},
		{"k2-elu", "Elu", []onnx.Attr{onnx.FloatAttr("alpha", 0.5)}, plan.Split{B: 1, M: 1, N: 1, K: 2}},
		{"k1-gelu", "Gelu", nil, plan.Split{B: 1, M: 2, N: 3, K: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ys [2][]byte
			for i, shared := range []bool{false, true} {
				g, pl := buildCut(t, actModel(16, 256, 100, "bias", tc.op, shared, tc.attrs...), tc.split, "", "b")
				o, stats, err := Link(pl, "test", Options{})
				if err != nil {
					t.Fatal(err)
				}
				outs, res, _ := runWithReference(t, o, g, 3)
				checkCyclesOnly(t, stats, res)
				ys[i] = outs[0]
			}
			if !bytes.Equal(ys[0], ys[1]) {
				t.Errorf("the folded activation's output differs from the unfolded one's")
			}
		})
	}
}

// TestOutputActGemm: an FP16 Gemm's activation folds too (after the
// Gemm's own bias, alpha and beta, which the result's epilogue applies
// before its cast), over the search's splits; the numbers are the
// reference's.
func TestOutputActGemm(t *testing.T) {
	b := onnx.NewModel(21)
	b.AddInput("a", onnx.Float16, []int64{20, 96})
	b.AddInput("b", onnx.Float16, []int64{96, 36})
	b.AddInitializer(f16Const("c", []int64{36}, 0.5))
	b.AddNode("Gemm", "g", []string{"a", "b", "c"}, []string{"m"}, onnx.FloatAttr("alpha", 0.5), onnx.FloatAttr("beta", 2))
	b.AddNode("Gelu", "act", []string{"m"}, []string{"y"})
	b.AddOutput("y", onnx.Float16, []int64{20, 36})
	for _, tiles := range []int{1, 16, 1472} {
		pl, o, st, g, err := planLinkN(t, b.Marshal(), tiles, 2)
		if err != nil {
			t.Fatal(err)
		}
		folded := false
		for _, s := range pl.Steps {
			folded = folded || s.Name == "act" && s.Kernel == "folded"
		}
		if !folded {
			t.Fatalf("%d tiles: the Gemm's activation is not folded", tiles)
		}
		checkVerdict(t, o, st, g, 1)
	}
}
