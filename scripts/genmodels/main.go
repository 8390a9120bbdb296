// Command genmodels writes the toolchain's test models, ONNX opset 21:
//
//	cd scripts && go run ./genmodels -out ../testdata/models
//
// (From the repository root, `go run ./scripts/genmodels` writes to the
// default -out, testdata/models.)
//
// The committed files under testdata/models are this program's output (a
// test checks it); change the program, never the files.
//
// qk-early.onnx, the attention-score product of the seed run ("qk-early":
// FP8 cast early, before the product). Inputs q and k are float [S, D]
// (S = 256 rows, D = 64 head width by default; -seq and -dim change
// them). Both are cast to float8e4m3fnuz (saturate=1) and back to float,
// so the product multiplies FP8-representable values and accumulates in
// FP32; k is transposed after its casts; the output s is float [S, S]:
//
//	q8 = Cast(q, to=float8e4m3fnuz, saturate=1); qf = Cast(q8, to=float)
//	k8 = Cast(k, to=float8e4m3fnuz, saturate=1); kf = Cast(k8, to=float)
//	kt = Transpose(kf, perm=[1,0])
//	s  = MatMul(qf, kt)
//
// The node order and names are those of the conformance model
// ort/qk_early_e4m3fnuz (64x64), which says saturate only by its default.
//
// matmul2048.onnx, the large product for benchmarks: inputs a and b are
// float16 [2048, 2048]. ONNX's MatMul on float16 gives float16, so to ask
// for FP32 accumulation and an FP32 result the model casts both inputs to
// float first (exact: every FP16 value is a float) and multiplies floats:
//
//	af = Cast(a, to=float); bf = Cast(b, to=float); y = MatMul(af, bf)   y float [2048, 2048]
//
// mlp-small.onnx, a small two-layer perceptron, all float: x [16, 64],
// weights w1 [64, 128], b1 [128], w2 [128, 64] as initializers:
//
//	h = MatMul(x, w1); hb = Add(h, b1); g = Gelu(hb); y = MatMul(g, w2)   y [16, 64]
//
// The weights come from a PCG generator with a fixed seed: w uniform in
// [-1/sqrt(fan_in), 1/sqrt(fan_in)), b uniform in [-0.5, 0.5), rounded to
// float.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"ipu.local/libs/atomicfile"
	"ipu.local/libs/onnx"
)

// Defaults of qk-early's sizes: the committed model uses them.
const (
	defaultSeq = 256
	defaultDim = 64
)

const (
	opset    = 21
	producer = "ipu genmodels"
)

func main() {
	out := flag.String("out", "testdata/models", "folder to write the models to")
	seq := flag.Int("seq", defaultSeq, "qk-early: rows S of q and k")
	dim := flag.Int("dim", defaultDim, "qk-early: columns D of q and k")
	flag.Parse()
	if err := run(*out, *seq, *dim); err != nil {
		fmt.Fprintln(os.Stderr, "genmodels:", err)
		os.Exit(1)
	}
}

func run(out string, seq, dim int) error {
	if seq < 1 || dim < 1 {
		return fmt.Errorf("-seq %d -dim %d: sizes must be positive", seq, dim)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, m := range models(int64(seq), int64(dim)) {
		if err := atomicfile.Write(filepath.Join(out, m.file), m.build()); err != nil {
			return err
		}
	}
	return nil
}

type model struct {
	file  string
	build func() []byte
}

func models(seq, dim int64) []model {
	return []model{
		{"qk-early.onnx", func() []byte { return qkEarly(seq, dim) }},
		{"matmul2048.onnx", matmul2048},
		{"mlp-small.onnx", mlpSmall},
	}
}

func newModel(graphName string) *onnx.ModelBuilder {
	b := onnx.NewModel(opset)
	b.Producer, b.GraphName = producer, graphName
	return b
}

func qkEarly(seq, dim int64) []byte {
	b := newModel("qk")
	fp8 := int64(onnx.Float8E4M3FNUZ)
	toFloat := int64(onnx.Float)
	b.AddNode("Cast", "q8_Cast", []string{"q"}, []string{"q8"}, onnx.IntAttr("to", fp8), onnx.IntAttr("saturate", 1))
	b.AddNode("Cast", "qf_Cast", []string{"q8"}, []string{"qf"}, onnx.IntAttr("to", toFloat))
	b.AddNode("Cast", "k8_Cast", []string{"k"}, []string{"k8"}, onnx.IntAttr("to", fp8), onnx.IntAttr("saturate", 1))
	b.AddNode("Cast", "kf_Cast", []string{"k8"}, []string{"kf"}, onnx.IntAttr("to", toFloat))
	b.AddNode("Transpose", "kt_Transpose", []string{"kf"}, []string{"kt"}, onnx.IntsAttr("perm", 1, 0))
	b.AddNode("MatMul", "s_MatMul", []string{"qf", "kt"}, []string{"s"})
	b.AddInput("q", onnx.Float, []int64{seq, dim})
	b.AddInput("k", onnx.Float, []int64{seq, dim})
	b.AddOutput("s", onnx.Float, []int64{seq, seq})
	return b.Marshal()
}

const matmulN = 2048

func matmul2048() []byte {
	b := newModel("matmul")
	toFloat := int64(onnx.Float)
	b.AddNode("Cast", "af_Cast", []string{"a"}, []string{"af"}, onnx.IntAttr("to", toFloat))
	b.AddNode("Cast", "bf_Cast", []string{"b"}, []string{"bf"}, onnx.IntAttr("to", toFloat))
	b.AddNode("MatMul", "y_MatMul", []string{"af", "bf"}, []string{"y"})
	b.AddInput("a", onnx.Float16, []int64{matmulN, matmulN})
	b.AddInput("b", onnx.Float16, []int64{matmulN, matmulN})
	b.AddOutput("y", onnx.Float, []int64{matmulN, matmulN})
	return b.Marshal()
}

// Sizes of mlp-small: x [mlpRows, mlpIn], hidden width mlpHidden.
const (
	mlpRows   = 16
	mlpIn     = 64
	mlpHidden = 128
	mlpSeed   = 2026
)

func mlpSmall() []byte {
	r := rand.New(rand.NewPCG(mlpSeed, 1))
	uniform := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			// 53 random bits, as a fraction in [0, 1): independent of
			// how a Go release implements Float64.
			u := float64(r.Uint64()>>11) / (1 << 53)
			v[i] = float32(lo + (hi-lo)*u)
		}
		return v
	}
	a1 := 1 / math.Sqrt(mlpIn)
	a2 := 1 / math.Sqrt(mlpHidden)
	w1 := onnx.NewFloat32("w1", []int64{mlpIn, mlpHidden}, uniform(mlpIn*mlpHidden, -a1, a1))
	b1 := onnx.NewFloat32("b1", []int64{mlpHidden}, uniform(mlpHidden, -0.5, 0.5))
	w2 := onnx.NewFloat32("w2", []int64{mlpHidden, mlpIn}, uniform(mlpHidden*mlpIn, -a2, a2))

	b := newModel("mlp")
	b.AddNode("MatMul", "h_MatMul", []string{"x", "w1"}, []string{"h"})
	b.AddNode("Add", "hb_Add", []string{"h", "b1"}, []string{"hb"})
	b.AddNode("Gelu", "g_Gelu", []string{"hb"}, []string{"g"})
	b.AddNode("MatMul", "y_MatMul", []string{"g", "w2"}, []string{"y"})
	b.AddInitializer(w1)
	b.AddInitializer(b1)
	b.AddInitializer(w2)
	b.AddInput("x", onnx.Float, []int64{mlpRows, mlpIn})
	b.AddOutput("y", onnx.Float, []int64{mlpRows, mlpIn})
	return b.Marshal()
}
