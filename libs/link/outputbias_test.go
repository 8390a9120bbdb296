package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/lower"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// outputBiasModel has FP16 MatMuls whose results only an Add of a bias
// reads (the product folds the Add), and one whose result is also an
// output (it does not): a batched product with a bias vector, one with
// the bias first and of shape [1, N], one with a one-element bias, and
// the unfolded one.
func outputBiasModel() []byte {
	b := onnx.NewModel(21)
	cast := func(name, from string) {
		b.AddNode("Cast", name, []string{from}, []string{name}, onnx.IntAttr("to", int64(onnx.Float16)))
	}
	param := func(name string, shape []int64, scale float32) {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		b.AddInitializer(onnx.NewFloat32(name+"32", shape, ramp(n, scale)))
		cast(name, name+"32")
	}
	b.AddInput("x", onnx.Float, []int64{2, 24, 48})
	cast("xh", "x")
	param("w", []int64{48, 40}, 0.03125)
	param("bv", []int64{40}, 0.5)
	b.AddNode("MatMul", "mm", []string{"xh", "w"}, []string{"m"})
	b.AddNode("Add", "add", []string{"m", "bv"}, []string{"y"})
	b.AddOutput("y", onnx.Float16, []int64{2, 24, 40})

	b.AddInput("x2", onnx.Float, []int64{24, 48})
	cast("x2h", "x2")
	param("b1", []int64{1, 40}, 0.25)
	b.AddNode("MatMul", "mm2", []string{"x2h", "w"}, []string{"m2"})
	b.AddNode("Add", "add2", []string{"b1", "m2"}, []string{"y2"})
	b.AddOutput("y2", onnx.Float16, []int64{24, 40})

	param("s", []int64{1}, 0.75)
	b.AddNode("MatMul", "mm3", []string{"x2h", "w"}, []string{"m3"})
	b.AddNode("Add", "add3", []string{"m3", "s"}, []string{"y3"})
	b.AddOutput("y3", onnx.Float16, []int64{24, 40})

	b.AddNode("MatMul", "mm5", []string{"x2h", "w"}, []string{"m5"})
	b.AddNode("Add", "add5", []string{"m5", "bv"}, []string{"y5"})
	b.AddOutput("m5", onnx.Float16, []int64{24, 40})
	b.AddOutput("y5", onnx.Float16, []int64{24, 40})
	return b.Marshal()
}

// TestMatMulOutputBias: the plan folds each Add of a bias that is its
// MatMul's only reader into the product (and not the one whose result
// is an output), the lowering adds the bias in the sum of a k split's
// parts or after the result's cast, and the numbers are the host
// reference's at device precision.
func TestMatMulOutputBias(t *testing.T) {
	data := outputBiasModel()
	for _, tiles := range []int{1, 16, 1472} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			pl, o, st, g, err := planLinkN(t, data, tiles, 2)
			if err != nil {
				t.Fatal(err)
			}
			folded := map[string]bool{}
			for _, s := range pl.Steps {
				folded[s.Name] = s.Kernel == "folded"
			}
			for name, want := range map[string]bool{"add": true, "add2": true, "add3": true, "add5": false} {
				if folded[name] != want {
					t.Errorf("step %s folded %v, want %v", name, folded[name], want)
				}
			}
			p, _ := arch.Lookup("ipu21")
			pr, err := lower.Lower(pl, g, p)
			if err != nil {
				t.Fatal(err)
			}
			sums, adds := biasKernels(pr.Steps)
			t.Logf("%d tiles: %d sums adding a bias, %d adds after a cast; final %d cycles", tiles, sums, adds, st.FinalCycles)
			if sums+adds == 0 {
				t.Errorf("no kernel adds a bias")
			}
			checkVerdict(t, o, st, g, 1)
			checkVerdict(t, o, st, g, 2)
		})
	}
}

// biasKernels counts the sums of parts that add a bias and the adds of
// one after a result's cast (named by their Add node, "add...").
func biasKernels(steps []*prog.Superstep) (sums, adds int) {
	return countKernels(steps, func(k *prog.Kernel) bool {
		if sp, ok := k.Params.(*codegen.SumParts); ok {
			for _, f := range k.Fixes {
				if f.Field == &sp.Bias {
					return true
				}
			}
		}
		return false
	}, func(k *prog.Kernel) bool {
		_, ok := k.Params.(*codegen.Binary)
		return ok && strings.HasPrefix(k.What, "add")
	})
}

// countKernels counts the kernels of steps that first and second accept.
func countKernels(steps []*prog.Superstep, first, second func(*prog.Kernel) bool) (a, b int) {
	for _, s := range steps {
		for _, ks := range s.Work {
			for _, k := range ks {
				if first(k) {
					a++
				}
				if second(k) {
					b++
				}
			}
		}
	}
	return a, b
}

// TestOutputBiasKSplit: under k splits (row parts, column parts with a
// last panel narrower than 16 columns, batched products) the sum of the
// parts adds the folded bias, a vector or one element, of rank 1 up to
// the result's, and the numbers are the reference's.
func TestOutputBiasKSplit(t *testing.T) {
	// model multiplies a [batch.., m, k] by b [k, n] and adds a bias of
	// shape bias (its elements a ramp).
	model := func(batch []int64, m, k, n int64, bias []int64) []byte {
		b := onnx.NewModel(21)
		b.AddInput("a", onnx.Float16, append(append([]int64{}, batch...), m, k))
		b.AddInput("b", onnx.Float16, []int64{k, n})
		c := &onnx.Tensor{Name: "c", DType: onnx.Float16, Dims: bias}
		for _, x := range ramp(int(bias[len(bias)-1]), 0.5) {
			c.Raw = binary.LittleEndian.AppendUint16(c.Raw, numfmt.F32ToF16(math.Float32bits(x)))
		}
		b.AddInitializer(c)
		b.AddNode("MatMul", "mm", []string{"a", "b"}, []string{"m"})
		b.AddNode("Add", "add", []string{"m", "c"}, []string{"y"})
		b.AddOutput("y", onnx.Float16, append(append([]int64{}, batch...), m, n))
		return b.Marshal()
	}
	for _, tc := range []struct {
		name  string
		model []byte
		split plan.Split
	}{
		{"k4-rows", model(nil, 32, 256, 48, []int64{48}), plan.Split{B: 1, M: 1, N: 1, K: 4}},
		{"k8-cols", model(nil, 16, 256, 100, []int64{100}), plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols"}},
		{"k3-m2", model(nil, 20, 192, 40, []int64{40}), plan.Split{B: 1, M: 2, N: 1, K: 3}},
		{"k4-one-element", model(nil, 24, 256, 36, []int64{1, 1}), plan.Split{B: 1, M: 1, N: 1, K: 4}},
		{"b3-k2-rank3", model([]int64{3}, 12, 128, 40, []int64{1, 1, 40}), plan.Split{B: 3, M: 1, N: 1, K: 2}},
		// Every tile holds the three batch indices' parts: three bias
		// blocks one after the other in its buffer.
		{"b3-together-k2", model([]int64{3}, 12, 128, 40, []int64{40}), plan.Split{B: 1, M: 1, N: 1, K: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, pl := buildCut(t, tc.model, tc.split, "", "b")
			folded := false
			for _, s := range pl.Steps {
				folded = folded || s.Name == "add" && s.Kernel == "folded"
			}
			if !folded {
				t.Fatal("the Add of the bias is not folded into the product")
			}
			pr, err := lower.Lower(pl, g, arch.MustLookup(pl.Arch))
			if err != nil {
				t.Fatal(err)
			}
			if sums, adds := biasKernels(pr.Steps); sums == 0 || adds != 0 {
				t.Errorf("%d sums add the bias and %d adds after a cast, want the sums only", sums, adds)
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
