package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"ipu.local/libs/atomicfile"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// family is the kind of transformer layer a case stacks.
type family int

const (
	// bertLayer is a post-norm encoder layer; its output is "y".
	bertLayer family = iota
	// gpt2Block is a pre-norm decoder block with a causal additive mask;
	// its output is "r2".
	gpt2Block
)

// transformer is one transformer case: Layers layers of one family over
// an input x [Seq, Hidden] of type DType.
type transformer struct {
	Name   string // the case's folder and the graph's name
	Family family
	Seq    int64 // S, the rows of x
	Hidden int64 // H, the columns of x
	Heads  int64 // attention heads; the head width is H/Heads
	FFN    int64 // the feed-forward hidden width
	Layers int
	DType  onnx.DataType // onnx.Float or onnx.Float16
}

// transformerSize is a preset width; its cases are listed by
// transformerCases.
type transformerSize struct {
	seq, hidden, heads, ffn int64
	// layers is the depth of the stacked encoder case.
	layers int
	// encoderFP32 says whether the stacked encoder also has an FP32 case
	// (at BERT-base width it would be twice the FP16 case's 170 MB).
	encoderFP32 bool
}

// transformerSizes are the -size presets.
var transformerSizes = map[string]transformerSize{
	// BERT-base width: generated into artifacts on demand, never committed.
	"base": {seq: 128, hidden: 768, heads: 12, ffn: 3072, layers: 12},
	// The committed smoke set, testdata/models/transformers.
	"small": {seq: 16, hidden: 64, heads: 2, ffn: 128, layers: 2, encoderFP32: true},
	// Shapes no kernel or layout rule was designed for (-size odd writes
	// them all, each in a folder of its name): one token, head widths of
	// 6, 8, 16, 25, 32 and 80, and most widths and sequences no multiple
	// of the AMP's 4-row groups or 16-column panels.
	"s1":   {seq: 1, hidden: 16, heads: 1, ffn: 17, layers: 2, encoderFP32: true},
	"s7":   {seq: 7, hidden: 48, heads: 6, ffn: 100, layers: 3, encoderFP32: true},
	"s24":  {seq: 24, hidden: 96, heads: 3, ffn: 200, layers: 2, encoderFP32: true},
	"s33":  {seq: 33, hidden: 42, heads: 7, ffn: 90, layers: 2, encoderFP32: true},
	"s50":  {seq: 50, hidden: 160, heads: 5, ffn: 352, layers: 2, encoderFP32: true},
	"s100": {seq: 100, hidden: 320, heads: 4, ffn: 1000, layers: 2, encoderFP32: true},
	"s129": {seq: 129, hidden: 200, heads: 8, ffn: 301, layers: 2, encoderFP32: true},
}

// oddSizes are the presets -size odd writes.
var oddSizes = []string{"s1", "s7", "s24", "s33", "s50", "s100", "s129"}

// transformerSizeNames returns the -size presets in order, for messages.
func transformerSizeNames() string {
	return strings.Join(slices.Sorted(maps.Keys(transformerSizes)), ", ") + " or odd (" + strings.Join(oddSizes, ", ") + ")"
}

// transformerCases returns the cases of a -size preset (its encoder
// layers deep, or the preset's depth when layers is 0), in the order they
// are written: NAME = FAMILY_SIZE_KIND[_fp16] (bert_base_layer,
// gpt2_small_block_fp16, bert_base_encoder12_fp16).
func transformerCases(size string, layers int) ([]transformer, error) {
	z, ok := transformerSizes[size]
	if !ok {
		return nil, fmt.Errorf("-size %q: want one of %s", size, transformerSizeNames())
	}
	switch {
	case layers < 0 || layers > 96:
		return nil, fmt.Errorf("-layers %d: want 1 to 96 (0: the preset's %d)", layers, z.layers)
	case layers > 0:
		z.layers = layers
	}
	var cases []transformer
	add := func(f family, kind string, layers int, dt onnx.DataType) {
		name := map[family]string{bertLayer: "bert", gpt2Block: "gpt2"}[f] + "_" + size + "_" + kind
		if dt == onnx.Float16 {
			name += "_fp16"
		}
		cases = append(cases, transformer{Name: name, Family: f, Seq: z.seq, Hidden: z.hidden,
			Heads: z.heads, FFN: z.ffn, Layers: layers, DType: dt})
	}
	for _, dt := range []onnx.DataType{onnx.Float, onnx.Float16} {
		add(bertLayer, "layer", 1, dt)
	}
	for _, dt := range []onnx.DataType{onnx.Float, onnx.Float16} {
		add(gpt2Block, "block", 1, dt)
	}
	encoder := fmt.Sprintf("encoder%d", z.layers)
	if z.encoderFP32 {
		add(bertLayer, encoder, z.layers, onnx.Float)
	}
	add(bertLayer, encoder, z.layers, onnx.Float16)
	return cases, nil
}

// selectCases keeps the cases named in the comma-separated list (all of
// them when it is empty); every name must be a case.
func selectCases(cases []transformer, list string) ([]transformer, error) {
	if list == "" {
		return cases, nil
	}
	byName := map[string]transformer{}
	var names []string
	for _, c := range cases {
		byName[c.Name] = c
		names = append(names, c.Name)
	}
	var out []transformer
	for name := range strings.SplitSeq(list, ",") {
		c, ok := byName[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("-case %q: not a case of this size (%s)", name, strings.Join(names, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// maxDim bounds each size of a case, so that no product of two of them
// overflows and graph.Build sees every tensor within its limits.
const maxDim = 1 << 16

// check reports a configuration the generator cannot write.
func (t transformer) check() error {
	for _, d := range []struct {
		name string
		v    int64
	}{{"seq", t.Seq}, {"hidden", t.Hidden}, {"heads", t.Heads}, {"ffn", t.FFN}, {"layers", int64(t.Layers)}} {
		if d.v < 1 || d.v > maxDim {
			return fmt.Errorf("transformer %s: %s %d: want 1 to %d", t.Name, d.name, d.v, maxDim)
		}
	}
	if t.Hidden%t.Heads != 0 {
		return fmt.Errorf("transformer %s: hidden %d is not a multiple of heads %d", t.Name, t.Hidden, t.Heads)
	}
	if t.Hidden*t.FFN > graph.MaxElements || t.Heads*t.Seq*t.Seq > graph.MaxElements || t.Seq*t.FFN > graph.MaxElements {
		return fmt.Errorf("transformer %s: a tensor exceeds %d elements", t.Name, graph.MaxElements)
	}
	if t.DType != onnx.Float && t.DType != onnx.Float16 {
		return fmt.Errorf("transformer %s: element type %v: want float or float16", t.Name, t.DType)
	}
	if t.Family != bertLayer && t.Family != gpt2Block {
		return fmt.Errorf("transformer %s: unknown family %d", t.Name, t.Family)
	}
	return nil
}

// output is the name of the graph output (and of each layer's output,
// suffixed, between layers).
func (t transformer) output() string {
	if t.Family == gpt2Block {
		return "r2"
	}
	return "y"
}

// seed is the case's PCG seed: a hash of its name, so that every case has
// its own weights and adding a case changes no other.
func (t transformer) seed() uint64 {
	h := fnv.New64a()
	h.Write([]byte(t.Name))
	return h.Sum64()
}

// Streams of the case's PCG: the weights, drawn layer by layer in
// initializer order, and the input.
const (
	weightStream = 1
	inputStream  = 2
)

// uniform returns n values uniform in [lo, hi) from r.
func uniform(r *rand.Rand, n int64, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		// 53 random bits, as a fraction in [0, 1): independent of how a
		// Go release implements Float64.
		u := float64(r.Uint64()>>11) / (1 << 53)
		v[i] = lo + (hi-lo)*u
	}
	return v
}

// tensor rounds v once to the case's element type.
func (t transformer) tensor(name string, dims []int64, v []float64) *onnx.Tensor {
	out, err := hostref.Encode(name, t.DType, dims, v)
	if err != nil {
		panic(err) // check admits float and float16 only, which Encode takes
	}
	return out
}

// int64Tensor returns an int64 tensor of rank 1 holding v.
func int64Tensor(name string, v ...int64) *onnx.Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Int64, Dims: []int64{int64(len(v))}, Raw: raw}
}

// Names of the constants every layer shares.
const (
	headsShape = "heads_shape"
	mergeShape = "merge_shape"
	scaleName  = "scale"
	maskName   = "mask"
)

// maskValue is the causal mask's additive value above the diagonal: a
// multiple of 8, exact in float16.
const maskValue = -10000

// layerNormEpsilon is LayerNormalization's epsilon, written out.
const layerNormEpsilon = 1e-5

// model returns the case's ONNX model. Its structure, node names and
// operator set are those of the shared models bert_layer and gpt2_block
// (see the package doc); the weights are the case's own.
func (t transformer) model() []byte {
	b := newModel(t.Name)
	r := rand.New(rand.NewPCG(t.seed(), weightStream))
	in := "x"
	for l := range t.Layers {
		out := t.output()
		if l < t.Layers-1 {
			out = fmt.Sprintf("%s_%d", out, l)
		}
		t.addLayer(b, r, l, in, out)
		in = out
	}
	dh := t.Hidden / t.Heads
	b.AddInitializer(int64Tensor(headsShape, t.Seq, t.Heads, dh))
	b.AddInitializer(int64Tensor(mergeShape, t.Seq, t.Hidden))
	b.AddInitializer(t.tensor(scaleName, nil, []float64{1 / math.Sqrt(float64(dh))}))
	if t.Family == gpt2Block {
		mask := make([]float64, t.Seq*t.Seq)
		for i := range t.Seq {
			for j := i + 1; j < t.Seq; j++ {
				mask[i*t.Seq+j] = maskValue
			}
		}
		b.AddInitializer(t.tensor(maskName, []int64{t.Seq, t.Seq}, mask))
	}
	b.AddInput("x", t.DType, []int64{t.Seq, t.Hidden})
	b.AddOutput(t.output(), t.DType, []int64{t.Seq, t.Hidden})
	return b.Marshal()
}

// addLayer appends layer l, reading in and writing out, with its weights
// drawn from r. Between several layers every name of the layer but the
// shared constants carries the suffix _l.
func (t transformer) addLayer(b *onnx.ModelBuilder, r *rand.Rand, l int, in, out string) {
	name := func(s string) string {
		switch {
		case s == t.output():
			return out
		case t.Layers == 1:
			return s
		}
		return fmt.Sprintf("%s_%d", s, l)
	}
	weight := func(w string, rows, cols int64) {
		a := 1 / math.Sqrt(float64(rows))
		b.AddInitializer(t.tensor(name(w), []int64{rows, cols}, uniform(r, rows*cols, -a, a)))
	}
	vector := func(v string, n int64, lo, hi float64) {
		b.AddInitializer(t.tensor(name(v), []int64{n}, uniform(r, n, lo, hi)))
	}
	h, f := t.Hidden, t.FFN
	for _, p := range []string{"q", "k", "v", "o"} {
		weight("w"+p, h, h)
		vector("b"+p, h, -0.05, 0.05)
	}
	weight("w1", h, f)
	vector("b1", f, -0.05, 0.05)
	weight("w2", f, h)
	vector("b2", h, -0.05, 0.05)
	for _, g := range []string{"1", "2"} {
		vector("g"+g, h, 0.8, 1.2)
		vector("be"+g, h, -0.05, 0.05)
	}

	// node appends op computing output from inputs; a name in shared is
	// a constant every layer reads, anything else is the layer's own.
	shared := map[string]bool{in: true, headsShape: true, mergeShape: true, scaleName: true, maskName: true}
	node := func(op, output string, inputs []string, attrs ...onnx.Attr) {
		ins := make([]string, len(inputs))
		for i, s := range inputs {
			ins[i] = s
			if !shared[s] {
				ins[i] = name(s)
			}
		}
		o := name(output)
		b.AddNode(op, o+"_"+op, ins, []string{o}, attrs...)
	}
	layerNorm := func(output, x, g, beta string) {
		node("LayerNormalization", output, []string{x, g, beta},
			onnx.IntAttr("axis", -1), onnx.FloatAttr("epsilon", layerNormEpsilon))
	}
	headsMajor := onnx.IntsAttr("perm", 1, 0, 2)

	x := in
	if t.Family == gpt2Block {
		layerNorm("xn1", in, "g1", "be1")
		x = "xn1"
	}
	for _, p := range []string{"q", "k", "v"} {
		node("MatMul", p+"0", []string{x, "w" + p})
		node("Add", p+"1", []string{p + "0", "b" + p})
		node("Reshape", p+"2", []string{p + "1", headsShape})
		perm := headsMajor
		if p == "k" {
			perm = onnx.IntsAttr("perm", 1, 2, 0) // [heads, dh, S]
		}
		node("Transpose", p+"h", []string{p + "2"}, perm)
	}
	node("MatMul", "sc", []string{"qh", "kh"})
	node("Mul", "scs", []string{"sc", scaleName})
	scores := "scs"
	if t.Family == gpt2Block {
		node("Add", "scm", []string{"scs", maskName})
		scores = "scm"
	}
	node("Softmax", "p", []string{scores}, onnx.IntAttr("axis", -1))
	node("MatMul", "ctx", []string{"p", "vh"})
	node("Transpose", "ctx2", []string{"ctx"}, headsMajor)
	node("Reshape", "ctx3", []string{"ctx2", mergeShape})
	node("MatMul", "ao0", []string{"ctx3", "wo"})
	node("Add", "ao", []string{"ao0", "bo"})
	node("Add", "r1", []string{in, "ao"})
	if t.Family == gpt2Block {
		layerNorm("rn", "r1", "g2", "be2")
	} else {
		layerNorm("rn", "r1", "g1", "be1")
	}
	node("MatMul", "f0", []string{"rn", "w1"})
	node("Add", "f1", []string{"f0", "b1"})
	node("Gelu", "f2", []string{"f1"})
	node("MatMul", "f3", []string{"f2", "w2"})
	node("Add", "f4", []string{"f3", "b2"})
	node("Add", "r2", []string{"rn", "f4"})
	if t.Family == bertLayer {
		layerNorm("y", "r2", "g2", "be2")
	}
}

// input returns the case's input x: uniform in [-1, 1), rounded to the
// element type.
func (t transformer) input() *onnx.Tensor {
	r := rand.New(rand.NewPCG(t.seed(), inputStream))
	return t.tensor("x", []int64{t.Seq, t.Hidden}, uniform(r, t.Seq*t.Hidden, -1, 1))
}

// expected evaluates the model (as written, read back) on x with the host
// reference in float64 and rounds the output once to its type.
func expected(model []byte, x *onnx.Tensor, threads int) (*onnx.Tensor, error) {
	m, err := onnx.ReadModel(model)
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	g, err := graph.Build(m)
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	outs, err := hostref.Eval(g, []*onnx.Tensor{x}, hostref.Options{Precision: hostref.FP64, Threads: threads})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	y := g.Outputs[0]
	v, err := outs[0].Float64s()
	if err != nil {
		return nil, fmt.Errorf("reference output %q: %w", y.Name, err)
	}
	return hostref.Encode(y.Name, y.DType, y.Shape, v)
}

// writeCase writes the case in the ONNX backend test layout:
// dir/NAME/model.onnx and dir/NAME/test_data_set_0/{input_0,output_0}.pb.
// It returns the model's size in bytes.
func writeCase(dir string, t transformer, threads int) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	model := t.model()
	x := t.input()
	y, err := expected(model, x, threads)
	if err != nil {
		return 0, fmt.Errorf("transformer %s: %w", t.Name, err)
	}
	data := filepath.Join(dir, t.Name, "test_data_set_0")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return 0, err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{
		{filepath.Join(dir, t.Name, "model.onnx"), model},
		{filepath.Join(data, "input_0.pb"), onnx.EncodeTensor(x)},
		{filepath.Join(data, "output_0.pb"), onnx.EncodeTensor(y)},
	} {
		if err := atomicfile.Write(f.path, f.data); err != nil {
			return 0, err
		}
	}
	return len(model), nil
}
