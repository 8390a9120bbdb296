package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/onnx"
)

// ReduceMax of int32 (once refused as not lowered, after it had been
// planned as an elementwise operator and panicked) is a tree of integer
// Max: it plans.
func TestIntegerReduceMaxPlans(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddNode("ReduceMax", "rmax", []string{"x"}, []string{"y"}, onnx.IntsAttr("axes", 1), onnx.IntAttr("keepdims", 0))
	b.AddInput("x", onnx.Int32, []int64{3, 4})
	b.AddOutput("y", onnx.Int32, []int64{3})
	g := canonical(t, b)
	if _, _, _, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: 4, Seed: 1, MaxAttempts: 2, ModelFingerprint: "fp"}); err != nil {
		t.Fatal(err)
	}
}

// Multi-head attention over 9 rows (heads of 8 columns): the readers
// want the projections' rows on multiples of 9, which no matrix kernel
// block takes; the products keep a valid row alignment (the plan
// validates) and the readers get re-layouts.
func TestAttentionOddRows(t *testing.T) {
	const s, h, heads = 9, 24, 3
	b := onnx.NewModel(14)
	w := make([]float32, h*h)
	for i := range w {
		w[i] = float32(i%7) / 7
	}
	for _, p := range []string{"q", "k", "v"} {
		b.AddInitializer(onnx.NewFloat32("w"+p, []int64{h, h}, w))
		b.AddNode("MatMul", p+"0", []string{"x", "w" + p}, []string{p + "0"})
		b.AddNode("Reshape", p+"1", []string{p + "0", "hs"}, []string{p + "1"})
		perm := []int64{0, 2, 1, 3}
		if p == "k" {
			perm = []int64{0, 2, 3, 1}
		}
		b.AddNode("Transpose", p+"h", []string{p + "1"}, []string{p + "h"}, onnx.IntsAttr("perm", perm...))
	}
	b.AddInitializer(onnx.NewInt64("hs", []int64{4}, []int64{1, s, heads, h / heads}))
	b.AddNode("MatMul", "sc", []string{"qh", "kh"}, []string{"sc"})
	b.AddNode("Softmax", "p", []string{"sc"}, []string{"p"}, onnx.IntAttr("axis", -1))
	b.AddNode("MatMul", "y", []string{"p", "vh"}, []string{"y"})
	b.AddInput("x", onnx.Float, []int64{1, s, h})
	b.AddOutput("y", onnx.Float, []int64{1, heads, s, h / heads})
	g := canonical(t, b)
	for _, tiles := range []int{64, 1472} {
		if _, _, _, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: tiles, Seed: 1, MaxAttempts: 4, ModelFingerprint: "fp"}); err != nil {
			t.Fatalf("%d tiles: %v", tiles, err)
		}
	}
}

func TestProductAlign(t *testing.T) {
	for want, got := range map[int]int{0: 4, 1: 4, 4: 4, 6: 4, 8: 8, 9: 4, 12: 4, 15: 4, 16: 16, 24: 16, 64: 16} {
		if a := productAlign(want); a != got {
			t.Errorf("productAlign(%d) = %d, want %d", want, a, got)
		}
	}
}
