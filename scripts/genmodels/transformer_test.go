package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// caseFiles are the files of a case, relative to its folder.
var caseFiles = []string{
	"model.onnx",
	filepath.Join("test_data_set_0", "input_0.pb"),
	filepath.Join("test_data_set_0", "output_0.pb"),
}

// The committed smoke cases must be exactly what the generator writes,
// and nothing else.
func TestCommittedTransformersAreGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := runTransformers(dir, "small", "", 0, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "testdata", "models", "transformers")
	cases, err := transformerCases("small", 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range cases {
		want = append(want, c.Name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, caseDirs(t, committed)); diff != "" {
		t.Errorf("testdata/models/transformers cases mismatch (-want +got):\n%s", diff)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if !bytes.Equal(c.model(), c.model()) {
				t.Fatal("two runs of the generator differ")
			}
			sameCase(t, dir, committed, c.Name, "cd scripts && go run ./genmodels -transformers -size small -out ../testdata/models/transformers")
		})
	}
}

// caseDirs lists the case folders of dir, in order.
func caseDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// sameCase checks that the committed case's files equal the generator's
// (gen/name against committed/name); regen says how to write them again.
func sameCase(t *testing.T, gen, committed, name, regen string) {
	t.Helper()
	for _, f := range caseFiles {
		g, err := os.ReadFile(filepath.Join(gen, name, f))
		if err != nil {
			t.Fatal(err)
		}
		c, err := os.ReadFile(filepath.Join(committed, name, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g, c) {
			t.Errorf("%s/%s differs from the generator's output: regenerate it (%s)", filepath.Join(committed, name), f, regen)
		}
	}
}

// sharedModels returns the folder of the shared model cases
// (libs/repodata: $IPU_MODELS, the shared folder beside the repository
// when present, else the committed copies under testdata).
func sharedModels(t testing.TB) string {
	t.Helper()
	r, err := repodata.Models()
	if err != nil {
		t.Fatal(err)
	}
	return r.Dir
}

// structure dumps what a transformer model is made of, without the random
// weights: header, inputs and outputs, initializers (name, type, shape,
// and the bytes of the ones that are not drawn at random), nodes with
// their attributes. The producer is left out.
func structure(t *testing.T, data []byte) string {
	t.Helper()
	m, err := onnx.ReadModel(data)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ir %d opsets %v graph %q\n", m.IRVersion, m.Opsets, m.Graph.Name)
	for _, vi := range m.Graph.Inputs {
		fmt.Fprintf(&b, "input %s %v %v\n", vi.Name, vi.DType, vi.Shape)
	}
	for _, vi := range m.Graph.Outputs {
		fmt.Fprintf(&b, "output %s %v %v\n", vi.Name, vi.DType, vi.Shape)
	}
	for _, vi := range m.Graph.ValueInfo {
		fmt.Fprintf(&b, "value_info %s %v %v\n", vi.Name, vi.DType, vi.Shape)
	}
	for _, init := range m.Graph.Initializers {
		fmt.Fprintf(&b, "init %s %v %v", init.Name, init.DType, init.Dims)
		switch init.Name {
		case headsShape, mergeShape, scaleName, maskName:
			fmt.Fprintf(&b, " %x", init.Raw)
		}
		b.WriteByte('\n')
	}
	for _, n := range m.Graph.Nodes {
		fmt.Fprintf(&b, "node %q %s domain %q %q -> %q", n.Name, n.OpType, n.Domain, n.Inputs, n.Outputs)
		for _, a := range n.Attrs {
			fmt.Fprintf(&b, " %s:%v=%v/%v/%q/%v", a.Name, a.Type, a.I, a.F, a.S, a.Ints)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// The generator at the shared models' size gives their structure: same
// header, values, initializers (but the random ones' values), nodes and
// attributes, and the same built graph.
func TestTransformersMirrorShared(t *testing.T) {
	dir := sharedModels(t)
	tests := []struct {
		name   string
		family family
		dtype  onnx.DataType
	}{
		{"bert_layer", bertLayer, onnx.Float},
		{"gpt2_block", gpt2Block, onnx.Float},
		{"bert_layer_fp16", bertLayer, onnx.Float16},
		{"gpt2_block_fp16", gpt2Block, onnx.Float16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, tt.name, "model.onnx"))
			if err != nil {
				t.Skipf("no shared model: %v", err)
			}
			c := transformer{Name: tt.name, Family: tt.family, Seq: 32, Hidden: 256, Heads: 4, FFN: 1024, Layers: 1, DType: tt.dtype}
			got := c.model()
			if diff := cmp.Diff(structure(t, data), structure(t, got)); diff != "" {
				t.Errorf("model structure mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(buildGraph(t, data).String(), buildGraph(t, got).String()); diff != "" {
				t.Errorf("graph mismatch (-want +got):\n%s", diff)
			}
			// Same structure, same encoding: the files differ in size by
			// the producer's name only.
			if d := len(got) - len(data); d != len(producer)-len("ortcases") {
				t.Errorf("model is %d bytes, the shared one %d", len(got), len(data))
			}
		})
	}
}

// Stacked layers: layer l's names carry _l, each layer reads the one
// before, the last writes the graph output, and the shape, scale and mask
// constants are shared.
func TestTransformerStacking(t *testing.T) {
	tests := []struct {
		family family
		want   []string // nodes that must be there: name, inputs -> outputs
	}{
		{bertLayer, []string{
			`"q0_0_MatMul" ["x" "wq_0"] -> ["q0_0"]`,
			`"q2_0_Reshape" ["q1_0" "heads_shape"] -> ["q2_0"]`,
			`"y_0_LayerNormalization" ["r2_0" "g2_0" "be2_0"] -> ["y_0"]`,
			`"q0_1_MatMul" ["y_0" "wq_1"] -> ["q0_1"]`,
			`"r1_1_Add" ["y_0" "ao_1"] -> ["r1_1"]`,
			`"scs_1_Mul" ["sc_1" "scale"] -> ["scs_1"]`,
			`"y_LayerNormalization" ["r2_1" "g2_1" "be2_1"] -> ["y"]`,
		}},
		{gpt2Block, []string{
			`"xn1_0_LayerNormalization" ["x" "g1_0" "be1_0"] -> ["xn1_0"]`,
			`"scm_0_Add" ["scs_0" "mask"] -> ["scm_0"]`,
			`"r2_0_Add" ["rn_0" "f4_0"] -> ["r2_0"]`,
			`"xn1_1_LayerNormalization" ["r2_0" "g1_1" "be1_1"] -> ["xn1_1"]`,
			`"r1_1_Add" ["r2_0" "ao_1"] -> ["r1_1"]`,
			`"scm_1_Add" ["scs_1" "mask"] -> ["scm_1"]`,
			`"r2_Add" ["rn_1" "f4_1"] -> ["r2"]`,
		}},
	}
	for _, tt := range tests {
		c := transformer{Name: "stack", Family: tt.family, Seq: 8, Hidden: 16, Heads: 2, FFN: 32, Layers: 2, DType: onnx.Float}
		t.Run(c.output(), func(t *testing.T) {
			m, err := onnx.ReadModel(c.model())
			if err != nil {
				t.Fatal(err)
			}
			nodes := map[string]bool{}
			for _, n := range m.Graph.Nodes {
				nodes[fmt.Sprintf("%q %q -> %q", n.Name, n.Inputs, n.Outputs)] = true
			}
			for _, w := range tt.want {
				if !nodes[w] {
					t.Errorf("no node %s", w)
				}
			}
			perLayer := map[family]int{bertLayer: 29, gpt2Block: 30}[tt.family]
			if len(m.Graph.Nodes) != 2*perLayer {
				t.Errorf("%d nodes, want %d", len(m.Graph.Nodes), 2*perLayer)
			}
			var inits []string
			for _, init := range m.Graph.Initializers {
				if !strings.HasSuffix(init.Name, "_0") && !strings.HasSuffix(init.Name, "_1") {
					inits = append(inits, init.Name)
				}
			}
			shared := []string{headsShape, mergeShape, scaleName}
			if tt.family == gpt2Block {
				shared = append(shared, maskName)
			}
			if diff := cmp.Diff(shared, inits); diff != "" {
				t.Errorf("shared initializers mismatch (-want +got):\n%s", diff)
			}
			if _, err := graph.Build(m); err != nil {
				t.Error(err)
			}
		})
	}
}

// The weights lie in their ranges: w within 1/sqrt(fan_in), biases and
// LayerNorm biases within 0.05, LayerNorm scales in [0.8, 1.2].
func TestTransformerWeights(t *testing.T) {
	c := transformer{Name: "w", Family: gpt2Block, Seq: 16, Hidden: 64, Heads: 2, FFN: 128, Layers: 1, DType: onnx.Float}
	m, err := onnx.ReadModel(c.model())
	if err != nil {
		t.Fatal(err)
	}
	for _, init := range m.Graph.Initializers {
		if init.DType != onnx.Float || len(init.Dims) == 0 || init.Name == maskName {
			continue
		}
		v, err := init.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := float32(-0.05), float32(0.05)
		switch {
		case len(init.Dims) == 2:
			hi = float32(1 / math.Sqrt(float64(init.Dims[0])))
			lo = -hi
		case strings.HasPrefix(init.Name, "g"):
			lo, hi = 0.8, 1.2
		}
		distinct := map[float32]bool{}
		for i, x := range v {
			if x < lo || x > hi {
				t.Fatalf("%s[%d] = %v outside [%v, %v]", init.Name, i, x, lo, hi)
			}
			distinct[x] = true
		}
		if len(distinct) < len(v)*9/10 {
			t.Errorf("%s: %d distinct values of %d", init.Name, len(distinct), len(v))
		}
	}
}

// The decoder block is causal and the encoder layer is not: changing the
// last row of x changes no other row of the block's output, and every row
// of the layer's.
func TestTransformerCausality(t *testing.T) {
	for _, f := range []family{bertLayer, gpt2Block} {
		c := transformer{Name: "causal", Family: f, Seq: 8, Hidden: 16, Heads: 2, FFN: 32, Layers: 1, DType: onnx.Float}
		t.Run(c.output(), func(t *testing.T) {
			m, err := onnx.ReadModel(c.model())
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			eval := func(x *onnx.Tensor) []float64 {
				out, err := hostref.Eval(g, []*onnx.Tensor{x}, hostref.Options{Precision: hostref.FP64, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				v, err := out[0].Float64s()
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			x := c.input()
			before := eval(x)
			v, err := x.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			last := (c.Seq - 1) * c.Hidden
			for i := last; i < int64(len(v)); i++ {
				v[i] = -v[i]
			}
			after := eval(onnx.NewFloat32("x", x.Dims, v))
			for row := range c.Seq - 1 {
				same := slices.Equal(before[row*c.Hidden:][:c.Hidden], after[row*c.Hidden:][:c.Hidden])
				if same != (f == gpt2Block) {
					t.Errorf("row %d unchanged: %v, want %v", row, same, f == gpt2Block)
				}
			}
		})
	}
}

func TestTransformerErrors(t *testing.T) {
	good := transformer{Name: "t", Family: bertLayer, Seq: 4, Hidden: 8, Heads: 2, FFN: 16, Layers: 1, DType: onnx.Float}
	tests := []struct {
		name    string
		change  func(*transformer)
		wantErr string
	}{
		{"heads", func(c *transformer) { c.Heads = 3 }, "transformer t: hidden 8 is not a multiple of heads 3"},
		{"seq", func(c *transformer) { c.Seq = 0 }, "transformer t: seq 0: want 1 to 65536"},
		{"layers", func(c *transformer) { c.Layers = -1 }, "transformer t: layers -1: want 1 to 65536"},
		{"elements", func(c *transformer) { c.Hidden, c.FFN = 1<<15, 1<<14 }, "transformer t: a tensor exceeds 268435456 elements"},
		{"dtype", func(c *transformer) { c.DType = onnx.Double }, "transformer t: element type double: want float or float16"},
		{"family", func(c *transformer) { c.Family = 7 }, "transformer t: unknown family 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			_, err := writeCase(t.TempDir(), c, 1)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("got error %v, want %q", err, tt.wantErr)
			}
		})
	}
	if err := good.check(); err != nil {
		t.Errorf("good configuration refused: %v", err)
	}

	flags := []struct {
		name, size, only, wantErr string
	}{
		{"size", "huge", "", `-size "huge": want one of base, s1, s100, s129, s24, s33, s50, s7, small or odd (s1, s7, s24, s33, s50, s100, s129)`},
		{"case", "small", "bert_small_layer,nope", `-case "nope": not a case of this size (bert_small_layer, bert_small_layer_fp16, ` +
			`gpt2_small_block, gpt2_small_block_fp16, bert_small_encoder2, bert_small_encoder2_fp16)`},
	}
	for _, tt := range flags {
		t.Run(tt.name, func(t *testing.T) {
			err := runTransformers(t.TempDir(), tt.size, tt.only, 0, false, io.Discard)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("got error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestOddSizes: -size odd writes each preset's cases in a folder of its
// name, and -case selects across the presets.
func TestOddSizes(t *testing.T) {
	out := t.TempDir()
	if err := runTransformers(out, "odd", "bert_s1_layer,gpt2_s7_block_fp16", 0, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"s1/bert_s1_layer/model.onnx", "s7/gpt2_s7_block_fp16/model.onnx", "s7/gpt2_s7_block_fp16/test_data_set_0/output_0.pb"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%d folders written, want s1 and s7", len(entries))
	}
}

// The committed odd-shape case (testdata/models/transformers-odd, for
// the planner's tests of tight memory) must be what the generator
// writes.
func TestCommittedOddCaseIsGenerated(t *testing.T) {
	const name = "gpt2_s129_block_fp16"
	dir := t.TempDir()
	if err := runTransformers(dir, "s129", name, 0, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "testdata", "models", "transformers-odd")
	if diff := cmp.Diff([]string{name}, caseDirs(t, committed)); diff != "" {
		t.Errorf("testdata/models/transformers-odd cases mismatch (-want +got):\n%s", diff)
	}
	sameCase(t, dir, committed, name, "cd scripts && go run ./genmodels -transformers -size s129 -case "+name+" -out ../testdata/models/transformers-odd")
}
