package link

import (
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

// outputScaleModel multiplies a [batch.., m, k] FP16 input by b [k, n]
// and the result by the FP16 constant c (first or second operand), as
// attention scales its scores; with also, the product's result is an
// output too (the Mul is then not folded).
func outputScaleModel(batch []int64, m, k, n int64, c float32, first, also bool) []byte {
	b := onnx.NewModel(21)
	b.AddInput("a", onnx.Float16, append(append([]int64{}, batch...), m, k))
	b.AddInput("b", onnx.Float16, []int64{k, n})
	s := &onnx.Tensor{Name: "s", DType: onnx.Float16, Raw: binary.LittleEndian.AppendUint16(nil, numfmt.F32ToF16(math.Float32bits(c)))}
	b.AddInitializer(s)
	b.AddNode("MatMul", "mm", []string{"a", "b"}, []string{"m"})
	ins := []string{"m", "s"}
	if first {
		ins = []string{"s", "m"}
	}
	b.AddNode("Mul", "mul", ins, []string{"y"})
	shape := append(append([]int64{}, batch...), m, n)
	if also {
		b.AddOutput("m", onnx.Float16, shape)
	}
	b.AddOutput("y", onnx.Float16, shape)
	return b.Marshal()
}

// scaleKernels counts the casts that multiply by a folded factor and the
// Muls after a result's cast or sum (named by their Mul node, "mul").
func scaleKernels(steps []*prog.Superstep) (casts, muls int) {
	return countKernels(steps, func(k *prog.Kernel) bool {
		c, ok := k.Params.(*codegen.Cast)
		return ok && c.MulF16 != 0
	}, func(k *prog.Kernel) bool {
		_, ok := k.Params.(*codegen.Binary)
		return ok && k.What == "mul"
	})
}

// TestOutputScale: the plan folds a Mul by an FP16 constant that is its
// MatMul's only reader into the product (not when the result is also an
// output); the result's cast multiplies (codegen.Cast.MulF16), or, where
// a k split's sum writes the FP16 result, a Mul follows it; the numbers
// are the host reference's at device precision.
func TestOutputScale(t *testing.T) {
	for _, tc := range []struct {
		name        string
		model       []byte
		split       plan.Split
		folded      bool
		casts, muls bool // kernels that scale: casts, Muls after
	}{
		{"k1", outputScaleModel(nil, 32, 64, 48, 0.125, false, false), plan.Split{B: 1, M: 2, N: 1, K: 1}, true, true, false},
		{"k1-factor-first-batched", outputScaleModel([]int64{3}, 12, 64, 40, -1.5, true, false), plan.Split{B: 3, M: 1, N: 1, K: 1}, true, true, false},
		{"k4-sum", outputScaleModel(nil, 32, 256, 48, 0.125, false, false), plan.Split{B: 1, M: 1, N: 1, K: 4}, true, false, true},
		{"also-output", outputScaleModel(nil, 32, 64, 48, 0.125, false, true), plan.Split{B: 1, M: 2, N: 1, K: 1}, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, pl := buildCut(t, tc.model, tc.split, "", "b")
			folded := false
			for _, s := range pl.Steps {
				folded = folded || s.Name == "mul" && s.Kernel == "folded"
			}
			if folded != tc.folded {
				t.Fatalf("the Mul folded %v, want %v", folded, tc.folded)
			}
			pr, err := lower.Lower(pl, g, arch.MustLookup(pl.Arch))
			if err != nil {
				t.Fatal(err)
			}
			casts, muls := scaleKernels(pr.Steps)
			if casts > 0 != tc.casts || muls > 0 != tc.muls {
				t.Errorf("%d casts and %d Muls scale the result, want casts %v, Muls %v", casts, muls, tc.casts, tc.muls)
			}
			o, stats, err := Link(pl, "test", Options{})
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= 2; seed++ {
				checkVerdict(t, o, stats, g, seed)
			}
		})
	}
}

// TestOutputScaleNotFolded: a Mul by a zero constant, by a constant of
// two elements or by another input is not folded.
func TestOutputScaleNotFolded(t *testing.T) {
	two := func() []byte {
		b := onnx.NewModel(21)
		b.AddInput("a", onnx.Float16, []int64{8, 16})
		b.AddInput("b", onnx.Float16, []int64{16, 2})
		s := &onnx.Tensor{Name: "s", DType: onnx.Float16, Dims: []int64{2}, Raw: []byte{0, 0x30, 0, 0x30}}
		b.AddInitializer(s)
		b.AddNode("MatMul", "mm", []string{"a", "b"}, []string{"m"})
		b.AddNode("Mul", "mul", []string{"m", "s"}, []string{"y"})
		b.AddOutput("y", onnx.Float16, []int64{8, 2})
		return b.Marshal()
	}
	input := func() []byte {
		b := onnx.NewModel(21)
		b.AddInput("a", onnx.Float16, []int64{8, 16})
		b.AddInput("b", onnx.Float16, []int64{16, 16})
		b.AddInput("s", onnx.Float16, []int64{1})
		b.AddNode("MatMul", "mm", []string{"a", "b"}, []string{"m"})
		b.AddNode("Mul", "mul", []string{"m", "s"}, []string{"y"})
		b.AddOutput("y", onnx.Float16, []int64{8, 16})
		return b.Marshal()
	}
	for name, model := range map[string][]byte{
		"zero":  outputScaleModel(nil, 8, 16, 16, 0, false, false),
		"two":   two(),
		"input": input(),
	} {
		g := modelGraph(t, model)
		for _, n := range g.Nodes {
			if n.Op == "MatMul" && lower.OutputScale(g, n) != nil {
				t.Errorf("%s: the Mul is folded", name)
			}
		}
	}
}
