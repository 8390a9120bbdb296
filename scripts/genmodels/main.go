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
//
// mlp-external.onnx is mlp-small.onnx with w1 and w2 in the file
// mlp-external.weights beside it (ONNX external data), as exporters write
// large models.
//
// # Transformer cases
//
// With -transformers, genmodels writes transformer cases in the ONNX
// backend test layout, OUT/CASE/model.onnx and
// OUT/CASE/test_data_set_0/{input_0,output_0}.pb:
//
//	go run ./scripts/genmodels -transformers [-size base|small|odd|PRESET] [-case A,B] [-out DIR] [-v]
//
// -size base (the default) is BERT-base width: S=128, H=768, 12 heads,
// FFN 3072; its cases (28 MB each in FP32, 170 MB for the encoder) go to
// artifacts/transformers unless -out says otherwise and are never
// committed. -size small is S=16, H=64, 2 heads, FFN 128: the smoke set
// committed under testdata/models/transformers (its default -out; a test
// checks the files are this program's output). -size odd writes the
// presets of shapes no rule was designed for (one token, head widths of
// 6, 8, 16, 25, 32 and 80, sequences and widths mostly off the AMP's
// groups and panels: s1, s7, s24, s33, s50, s100, s129), each in
// OUT/PRESET, by default under
// artifacts/transformers-odd (make transformers-odd). -case writes only
// the named cases. The cases of a size Z:
//
//	bert_Z_layer, bert_Z_layer_fp16     one post-norm encoder layer
//	gpt2_Z_block, gpt2_Z_block_fp16     one pre-norm decoder block
//	bert_Z_encoderN[_fp16]              N encoder layers stacked (base: N=12,
//	                                    FP16 only; small: N=2, both types)
//
// The graphs are those of the shared models ../shared/models/bert_layer
// and gpt2_block (S=32, H=256, 4 heads, FFN 1024, onnxruntime's expected
// outputs; copies in testdata/models/shared), node for node: the same
// opset 21 operators, node names (OUTPUT_OpType), value and initializer
// names, attributes and initializer order; a test checks it at their
// size. Input x [S, H] and output (y for bert, r2 for gpt2) [S, H] are
// float or, in the _fp16 cases, float16, as is every initializer but the
// int64 Reshape targets; there are no Cast nodes. With dh = H/heads, one
// bert layer over its input x:
//
//	q0 = MatMul(x, wq); q1 = Add(q0, bq); q2 = Reshape(q1, heads_shape=[S, heads, dh])
//	qh = Transpose(q2, perm=[1,0,2])            [heads, S, dh]; v likewise
//	kh = Transpose(k2, perm=[1,2,0])            [heads, dh, S]
//	sc = MatMul(qh, kh); scs = Mul(sc, scale)   scale: scalar 1/sqrt(dh)
//	p = Softmax(scs, axis=-1); ctx = MatMul(p, vh)
//	ctx2 = Transpose(ctx, perm=[1,0,2]); ctx3 = Reshape(ctx2, merge_shape=[S, H])
//	ao0 = MatMul(ctx3, wo); ao = Add(ao0, bo); r1 = Add(x, ao)
//	rn = LayerNormalization(r1, g1, be1, axis=-1, epsilon=1e-5)
//	f0 = MatMul(rn, w1); f1 = Add(f0, b1); f2 = Gelu(f1)   (exact, erf)
//	f3 = MatMul(f2, w2); f4 = Add(f3, b2); r2 = Add(rn, f4)
//	y = LayerNormalization(r2, g2, be2, axis=-1, epsilon=1e-5)
//
// A gpt2 block first normalizes, xn1 = LayerNormalization(x, g1, be1), and
// projects xn1 instead of x; adds the causal mask after the scale, scm =
// Add(scs, mask) with mask [S, S] 0 on and below the diagonal and -10000
// above, and takes the Softmax of scm; normalizes r1 with g2, be2; and
// ends at r2 = Add(rn, f4) (the residual from rn, as the shared model
// has it). In a stack of several layers every name of layer l carries the
// suffix _l (wq_3, q0_3, node q0_3_MatMul), layer l+1 reads y_l, and the
// last layer writes y; heads_shape, merge_shape, scale and mask are one
// initializer each, shared by every layer.
//
// The weights come from PCG seeded with an FNV-1a hash of the case name
// (stream 1, drawn layer by layer in initializer order): matrices uniform
// in [-1/sqrt(fan_in), 1/sqrt(fan_in)), biases and LayerNorm biases in
// [-0.05, 0.05), LayerNorm scales in [0.8, 1.2); x is uniform in [-1, 1)
// (stream 2). Each value is drawn in float64 and rounded once to the
// element type. The expected output is the host reference
// (libs/hostref) in float64 on the model as written and read back,
// rounded once to the output's type.
//
// # PyTorch-exporter cases
//
// With -torch, genmodels writes small cases in the same layout (inputs
// input_0.pb ... and outputs output_0.pb ...) that carry the idioms of
// torch.onnx.export, those of the shared torch_* cases, at other sizes,
// batches, opsets (13, 14, 17, 18) and orders (torch.go lists them):
//
//	go run ./scripts/genmodels -torch [-case A,B] [-out DIR] [-v]
//
// (default -out artifacts/torch-sizes; `make torch-sizes` runs them).
// -smoke writes only the smoke subset, committed under
// testdata/models/torch-sizes (its default -out; a test checks the files
// are this program's output) and run on 64 and 1472 tiles by make test
// (`make torch-smoke`).
// Families: tmlp_* classifiers (Flatten, Gemm(alpha, beta, transB=1),
// LayerNorm written out as ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add with
// Constant nodes, or LayerNormalization at opset 17, Relu, a Softmax,
// LogSoftmax or Sigmoid head); tgate_* detectors whose sigmoid score
// (its batch's ReduceMax when the batch is larger than 1) goes through
// GreaterOrEqual(0.5) and Cast(to=bool) into If, whose then branch runs a
// second network reading outer initializers (or the detector's outer
// hidden features) and whose else branch is an Identity of the score;
// the detector head's bias (+6 or -6) makes the branch taken or skipped;
// temb_* token (int64 ids) and position embeddings (an int64
// initializer, a Constant, Range then Unsqueeze, or a Slice of a
// position_ids buffer) with LayerNorm; tattn_* post-norm encoder layers
// over [B, S, H] with a float padding mask [B, S]: Reshape targets from
// Shape/Gather(/Unsqueeze)/Concat, Transposes [0,2,1,3] and [0,2,3,1] (or
// [0,2,1,3] then [0,1,3,2]), Div by a Constant, mask from
// Unsqueeze/Sub/Mul(-10000 or the type's lowest), Softmax, residuals,
// LayerNorm, FFN with GELU through Erf or Tanh; tembattn_* embeddings then
// an attention layer; tllama_* LLaMA-style decoder layers (llama.go),
// grouped-query attention among them; tt5_* T5 encoder layers with
// their relative position bias (t5.go); tvit_* ViT embeddings (the patch
// Conv) and a pre-norm layer (vit.go); tcnn_* small ResNets (Conv,
// BatchNormalization, MaxPool, a residual block, GlobalAveragePool;
// cnn.go).
// Names are torch's (/scope/Op_N, scope.weight,
// onnx::MatMul_N). Variations: odd sizes, batches above 1, keepdims=0
// with Unsqueeze, positive and negative axes, FP16. Weights and inputs
// come from PCG seeded by the case name; expected outputs are the host
// reference at FP64 rounded once to the output type.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

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
	fs := flag.NewFlagSet("genmodels", flag.ExitOnError)
	out := fs.String("out", "", "folder to write to (default testdata/models; with -transformers, artifacts/transformers for -size base and testdata/models/transformers for -size small)")
	seq := fs.Int("seq", defaultSeq, "qk-early: rows S of q and k")
	dim := fs.Int("dim", defaultDim, "qk-early: columns D of q and k")
	transformers := fs.Bool("transformers", false, "write the transformer cases (model.onnx and test_data_set_0) instead of the test models")
	torch := fs.Bool("torch", false, "write the PyTorch-exporter idiom cases (model.onnx and test_data_set_0) instead of the test models")
	smoke := fs.Bool("smoke", false, "-torch: only the committed smoke cases (default -out testdata/models/torch-sizes)")
	large := fs.Bool("large", false, "-torch: the full-size cases instead (ResNet-18 at 224x224, FP32 and FP16; default -out artifacts/cnn)")
	size := fs.String("size", "base", "-transformers: the width preset, "+transformerSizeNames())
	only := fs.String("case", "", "-transformers, -torch: only these cases (comma-separated names)")
	verbose := fs.Bool("v", false, "-transformers, -torch: print each case's model size and time")
	layers := fs.Int("layers", 0, "-transformers: the stacked encoder's depth (0: the preset's)")
	fs.Parse(os.Args[1:])
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "smoke", "large":
			if !*torch {
				err = fmt.Errorf("-%s: only with -torch", f.Name)
			}
		case "size", "layers":
			if !*transformers {
				err = fmt.Errorf("-%s: only with -transformers", f.Name)
			}
		case "case", "v":
			if !*transformers && !*torch {
				err = fmt.Errorf("-%s: only with -transformers or -torch", f.Name)
			}
		case "seq", "dim":
			if *transformers || *torch {
				err = fmt.Errorf("-%s: not with -transformers or -torch", f.Name)
			}
		}
	})
	switch {
	case err != nil:
	case *transformers && *torch:
		err = fmt.Errorf("-transformers and -torch: choose one")
	case *torch && *smoke && *only != "":
		err = fmt.Errorf("-smoke and -case: choose one")
	case *torch && *smoke && *large:
		err = fmt.Errorf("-smoke and -large: choose one")
	case *torch:
		if *out == "" {
			*out = filepath.Join("artifacts", "torch-sizes")
			if *smoke {
				*out = filepath.Join("testdata", "models", "torch-sizes")
			}
			if *large {
				*out = filepath.Join("artifacts", "cnn")
			}
		}
		if *smoke {
			*only = strings.Join(torchSmoke, ",")
		}
		err = runTorch(*out, *only, *large, *verbose, runtime.NumCPU(), os.Stderr)
	case *transformers:
		err = runTransformers(*out, *size, *only, *layers, *verbose, os.Stderr)
	default:
		if *out == "" {
			*out = "testdata/models"
		}
		err = run(*out, *seq, *dim)
	}
	if err != nil {
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
	for _, m := range append(models(int64(seq), int64(dim)), sideFiles()...) {
		if err := atomicfile.Write(filepath.Join(out, m.file), m.build()); err != nil {
			return err
		}
	}
	return nil
}

// defaultTransformerOut is where -transformers writes a -size preset
// without -out: the committed smoke set in place, anything else among the
// (uncommitted) artifacts.
func defaultTransformerOut(size string) string {
	switch size {
	case "small":
		return filepath.Join("testdata", "models", "transformers")
	case "odd":
		return filepath.Join("artifacts", "transformers-odd")
	}
	return filepath.Join("artifacts", "transformers")
}

// runTransformers writes the transformer cases of a -size preset (those
// named in only, or all) under out. With verbose it logs each case's
// model size and the time it took to log.
func runTransformers(out, size, only string, layers int, verbose bool, log io.Writer) error {
	if out == "" {
		out = defaultTransformerOut(size)
	}
	sizes := []string{size}
	if size == "odd" {
		sizes = oddSizes
	}
	// The cases of every size, each with its folder (-size odd: a folder
	// per preset), selected by name across them all.
	var cases []transformer
	dir := map[string]string{}
	for _, z := range sizes {
		cs, err := transformerCases(z, layers)
		if err != nil {
			return err
		}
		for _, c := range cs {
			dir[c.Name] = out
			if size == "odd" {
				dir[c.Name] = filepath.Join(out, z)
			}
		}
		cases = append(cases, cs...)
	}
	cases, err := selectCases(cases, only)
	if err != nil {
		return err
	}
	for _, c := range cases {
		start := time.Now()
		n, err := writeCase(dir[c.Name], c, runtime.NumCPU())
		if err != nil {
			return err
		}
		if verbose {
			fmt.Fprintf(log, "genmodels: %s: model %.1f MB in %.1fs\n", c.Name, float64(n)/1e6, time.Since(start).Seconds())
		}
	}
	return nil
}

type model struct {
	file  string
	build func() []byte
}

// sideFiles are the files the generator writes beside the models: the
// external data of mlp-external.onnx.
func sideFiles() []model {
	return []model{{mlpExternalData, func() []byte { _, d := mlpExternal(); return d }}}
}

func models(seq, dim int64) []model {
	return []model{
		{"qk-early.onnx", func() []byte { return qkEarly(seq, dim) }},
		{"matmul2048.onnx", matmul2048},
		{"mlp-small.onnx", mlpSmall},
		{"mlp-external.onnx", func() []byte { m, _ := mlpExternal(); return m }},
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
	w1, b1, w2 := mlpWeights()
	return mlpModel(w1, b1, w2)
}

// mlpExternalData is the file beside mlp-external.onnx that holds its
// weights.
const mlpExternalData = "mlp-external.weights"

// mlpExternal returns mlp-external.onnx, mlp-small with w1 and w2 in
// another file (at offsets 0 and 32768, one after the other; b1 stays
// inline, as onnx.save_model's size threshold keeps small tensors), and
// that file.
func mlpExternal() (model, data []byte) {
	w1, b1, w2 := mlpWeights()
	for _, t := range []*onnx.Tensor{w1, w2} {
		t.External = &onnx.External{Location: mlpExternalData, Offset: int64(len(data)), Length: int64(len(t.Raw))}
		data = append(data, t.Raw...)
		t.Raw = nil
	}
	return mlpModel(w1, b1, w2), data
}

// mlpWeights returns mlp-small's initializers.
func mlpWeights() (w1, b1, w2 *onnx.Tensor) {
	r := rand.New(rand.NewPCG(mlpSeed, 1))
	uniform32 := func(n int64, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i, x := range uniform(r, n, lo, hi) {
			v[i] = float32(x)
		}
		return v
	}
	a1 := 1 / math.Sqrt(mlpIn)
	a2 := 1 / math.Sqrt(mlpHidden)
	w1 = onnx.NewFloat32("w1", []int64{mlpIn, mlpHidden}, uniform32(mlpIn*mlpHidden, -a1, a1))
	b1 = onnx.NewFloat32("b1", []int64{mlpHidden}, uniform32(mlpHidden, -0.5, 0.5))
	w2 = onnx.NewFloat32("w2", []int64{mlpHidden, mlpIn}, uniform32(mlpHidden*mlpIn, -a2, a2))
	return w1, b1, w2
}

// mlpModel is the mlp graph over its initializers.
func mlpModel(w1, b1, w2 *onnx.Tensor) []byte {
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
