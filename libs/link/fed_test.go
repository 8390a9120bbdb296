package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// TestFed links products whose operands other nodes compute: a product
// feeding a product (as A, as B, transposed, through casts to FP16 and
// FP8), and elementwise and row nodes between them, at several tile
// counts; outputs against the host reference at device precision, cycles
// against the simulator's.
func TestFed(t *testing.T) {
	vals := func(n int, scale float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = scale * float32((i*29)%31-15)
		}
		return out
	}
	type model struct {
		name  string
		build func(b *onnx.ModelBuilder)
		tiles []int // nil: 1, 5, 64, 1472
	}
	models := []model{
		{"chain-a", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{24, 40})
			b.AddInitializer(onnx.NewFloat32("w1", []int64{40, 48}, vals(40*48, 0.0625)))
			b.AddInitializer(onnx.NewFloat32("w2", []int64{48, 20}, vals(48*20, 0.125)))
			b.AddNode("MatMul", "m1", []string{"x", "w1"}, []string{"h"})
			b.AddNode("Relu", "r", []string{"h"}, []string{"g"})
			b.AddNode("MatMul", "m2", []string{"g", "w2"}, []string{"y"})
			b.AddOutput("y", onnx.Float, []int64{24, 20})
		}, nil},
		{"chain-b-transposed", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{32, 16})
			b.AddInput("z", onnx.Float, []int64{8, 32})
			b.AddInitializer(onnx.NewFloat32("w", []int64{16, 32}, vals(16*32, 0.25)))
			b.AddNode("MatMul", "m1", []string{"x", "w"}, []string{"h"})
			b.AddNode("Transpose", "t", []string{"h"}, []string{"ht"}, onnx.IntsAttr("perm", 1, 0))
			b.AddNode("MatMul", "m2", []string{"z", "ht"}, []string{"y"}) // [8,32] x [32,32]
			b.AddOutput("y", onnx.Float, []int64{8, 32})
		}, nil},
		{"attention-fp16", func(b *onnx.ModelBuilder) {
			b.AddInput("q", onnx.Float, []int64{16, 32})
			b.AddInput("k", onnx.Float, []int64{16, 32})
			b.AddInput("v", onnx.Float, []int64{16, 32})
			b.AddNode("Transpose", "kt", []string{"k"}, []string{"ktt"}, onnx.IntsAttr("perm", 1, 0))
			b.AddNode("MatMul", "qk", []string{"q", "ktt"}, []string{"s"})
			b.AddNode("Softmax", "sm", []string{"s"}, []string{"p"}, onnx.IntAttr("axis", -1))
			b.AddNode("Cast", "ph", []string{"p"}, []string{"p16"}, onnx.IntAttr("to", int64(onnx.Float16)))
			b.AddNode("Cast", "pf", []string{"p16"}, []string{"p32"}, onnx.IntAttr("to", int64(onnx.Float)))
			b.AddNode("Cast", "vh", []string{"v"}, []string{"v16"}, onnx.IntAttr("to", int64(onnx.Float16)))
			b.AddNode("Cast", "vf", []string{"v16"}, []string{"v32"}, onnx.IntAttr("to", int64(onnx.Float)))
			b.AddNode("MatMul", "pv", []string{"p32", "v32"}, []string{"o"})
			b.AddOutput("o", onnx.Float, []int64{16, 32})
		}, nil},
		{"fp8-fed", func(b *onnx.ModelBuilder) {
			b.AddInput("x", onnx.Float, []int64{8, 24})
			b.AddInitializer(onnx.NewFloat32("w", []int64{24, 32}, vals(24*32, 0.5)))
			b.AddInitializer(onnx.NewFloat32("u", []int64{32, 16}, vals(32*16, 0.25)))
			b.AddNode("MatMul", "m1", []string{"x", "w"}, []string{"h"})
			b.AddNode("Cast", "h8", []string{"h"}, []string{"h8v"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
			b.AddNode("Cast", "hf", []string{"h8v"}, []string{"hfv"}, onnx.IntAttr("to", int64(onnx.Float)))
			b.AddNode("Cast", "u8", []string{"u"}, []string{"u8v"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
			b.AddNode("Cast", "uf", []string{"u8v"}, []string{"ufv"}, onnx.IntAttr("to", int64(onnx.Float)))
			b.AddNode("MatMul", "m2", []string{"hfv", "ufv"}, []string{"y"})
			b.AddOutput("y", onnx.Float, []int64{8, 16})
		}, nil},
	}
	models = append(models, model{"gemm-node-bias", func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{12, 20})
		b.AddInput("y", onnx.Float, []int64{20, 36})
		b.AddInput("c", onnx.Float, []int64{36})
		b.AddNode("Gemm", "g1", []string{"x", "y", "c"}, []string{"h"})
		b.AddNode("Gemm", "g2", []string{"x", "y", "h"}, []string{"z"}, onnx.FloatAttr("alpha", 0.5), onnx.FloatAttr("beta", -3))
		b.AddOutput("z", onnx.Float, []int64{12, 36})
	}, nil})
	models = append(models, model{"attention-projections", func(b *onnx.ModelBuilder) {
		b.AddInput("x", onnx.Float, []int64{40, 32})
		for _, w := range []string{"wq", "wk", "wv"} {
			b.AddInitializer(onnx.NewFloat32(w, []int64{32, 32}, vals(32*32, 0.03125)))
		}
		b.AddNode("MatMul", "q", []string{"x", "wq"}, []string{"qv"})
		b.AddNode("MatMul", "k", []string{"x", "wk"}, []string{"kv"})
		b.AddNode("MatMul", "v", []string{"x", "wv"}, []string{"vv"})
		b.AddNode("Transpose", "kt", []string{"kv"}, []string{"ktv"}, onnx.IntsAttr("perm", 1, 0))
		b.AddNode("MatMul", "s", []string{"qv", "ktv"}, []string{"sv"})
		b.AddNode("Softmax", "p", []string{"sv"}, []string{"pv"}, onnx.IntAttr("axis", -1))
		b.AddNode("MatMul", "o", []string{"pv", "vv"}, []string{"ov"})
		b.AddOutput("ov", onnx.Float, []int64{40, 32})
	}, nil})
	for _, m := range models {
		ts := m.tiles
		if ts == nil {
			ts = []int{1, 5, 64, 1472}
		}
		for _, tiles := range ts {
			t.Run(fmt.Sprintf("%s@%d", m.name, tiles), func(t *testing.T) {
				b := onnx.NewModel(21)
				m.build(b)
				o, st, g := linkBytes(t, b.Marshal(), tiles)
				checkModel(t, o, st, g)
			})
		}
	}
}
