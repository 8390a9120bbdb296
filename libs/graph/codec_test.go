package graph_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// roundTripModels lists the models of the round-trip test: every
// conformance model (libs/repodata), every test model and the committed copies of the
// PyTorch-exporter cases.
func roundTripModels(t *testing.T) []string {
	t.Helper()
	conf, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	dir := conf.Dir
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "model.onnx"))
	models, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "models", "*.onnx"))
	files = append(files, models...)
	// The exporter idioms: folded constants, int64 ids, If branches.
	torch, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "models", "shared", "torch_*", "model.onnx"))
	files = append(files, torch...)
	sort.Strings(files)
	if len(models) == 0 {
		t.Fatal("no test models under testdata/models")
	}
	return files
}

// hostrefLacks reports an error of the host reference that says it does
// not evaluate a graph yet (an operator without a host kernel, an input
// type it does not generate), as opposed to a wrong evaluation. The
// graph accepts operators and types before hostref evaluates them all.
func hostrefLacks(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no host kernel") || strings.Contains(err.Error(), "no tensor"))
}

// bytesEqual compares byte slices whole (constants and tensor data are
// large, and a diff of their bytes says nothing more than that they
// differ), nil apart from empty (a constant from a value without data).
var bytesEqual = cmp.Comparer(func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) })

// evalWork is a rough count of the multiply-adds of evaluating g, to keep
// the host evaluations of the test short.
func evalWork(g *graph.Graph) int64 {
	var w int64
	for _, n := range g.Nodes {
		w += n.Outputs[0].NumElements()
		if n.Op == "MatMul" || n.Op == "Gemm" {
			a := n.Inputs[0].Shape
			w += n.Outputs[0].NumElements() * a[len(a)-1]
		}
	}
	return w
}

// TestDecodeGraphRoundTrip: for every model graph.Build accepts, the
// graph decoded from its encoding (directly, and through the compact JSON
// of a package's model section) encodes the same, and evaluates to the
// same bits at every precision.
func TestDecodeRoundTrip(t *testing.T) {
	const maxWork = 1 << 26
	built := 0
	for _, path := range roundTripModels(t) {
		name := filepath.ToSlash(path)
		if i := strings.Index(name, "conformance/"); i >= 0 {
			name = name[i+len("conformance/"):]
		}
		t.Run(name, func(t *testing.T) {
			m, err := onnx.ReadModelFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Skipf("not built: %v", err)
			}
			built++
			want := graph.Encode(g)
			g2, err := graph.Decode(&want)
			if err != nil {
				t.Fatalf("DecodeGraph: %v", err)
			}
			if d := cmp.Diff(want, graph.Encode(g2), bytesEqual); d != "" {
				t.Errorf("re-encoded graph: mismatch (-want +got):\n%s", d)
			}
			data, err := plan.MarshalGraph(want)
			if err != nil {
				t.Fatal(err)
			}
			pg, err := plan.ReadGraph(data)
			if err != nil {
				t.Fatalf("ReadGraph: %v", err)
			}
			g3, err := graph.Decode(pg)
			if err != nil {
				t.Fatalf("DecodeGraph after JSON: %v", err)
			}
			if d := cmp.Diff(want, graph.Encode(g3), bytesEqual); d != "" {
				t.Errorf("re-encoded graph after JSON: mismatch (-want +got):\n%s", d)
			}
			if w := evalWork(g); w > maxWork {
				t.Logf("evaluation skipped: about %d operations", w)
				return
			}
			in := hostref.GenerateInputs(g, 1)
			for _, p := range []hostref.Precision{hostref.Device, hostref.FP32, hostref.FP64} {
				opt := hostref.Options{Precision: p, Threads: 2}
				wantOut, err := hostref.Eval(g, in, opt)
				if hostrefLacks(err) {
					t.Logf("evaluation skipped: %v", err)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				gotOut, err := hostref.Eval(g3, hostref.GenerateInputs(g3, 1), opt)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(wantOut, gotOut, bytesEqual); d != "" {
					t.Errorf("%v outputs: mismatch (-want +got):\n%s", p, d)
				}
			}
		})
	}
	if built == 0 {
		t.Error("no model built")
	}
}

// decodeSample is y = Gemm(x, w) then Cast to float16: the graph the
// error cases edit.
func decodeSample() *plan.Graph {
	return &plan.Graph{
		Name: "g", Opset: 21, Inputs: []int{0}, Outputs: []int{3},
		Values: []plan.Value{
			{Name: "x", DType: "float", Shape: []int64{2, 3}},
			{Name: "w", DType: "float", Shape: []int64{3, 4}, Const: make([]byte, 48)},
			{Name: "y", DType: "float", Shape: []int64{2, 4}},
			{Name: "h", DType: "float16", Shape: []int64{2, 4}},
		},
		Nodes: []plan.Node{
			{Name: "gemm", Op: "Gemm", Inputs: []int{0, 1, -1}, Outputs: []int{2}, Attrs: []plan.Attr{
				{Name: "alpha", Floats: []float64{1}}, {Name: "beta", Floats: []float64{1}},
				{Name: "trans_a", Ints: []int64{0}}, {Name: "trans_b", Ints: []int64{0}}}},
			{Name: "cast", Op: "Cast", Inputs: []int{2}, Outputs: []int{3}, Attrs: []plan.Attr{
				{Name: "saturate", Ints: []int64{1}}, {Name: "to", Ints: []int64{10}}}},
		},
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := graph.Decode(decodeSample()); err != nil {
		t.Fatalf("unedited sample: %v", err)
	}
	tests := []struct {
		name string
		edit func(g *plan.Graph)
		want string
	}{
		{"index", func(g *plan.Graph) { g.Nodes[1].Inputs[0] = 9 }, "plan: graph.nodes[1].inputs[0]: value 9 out of range [0, 4)"},
		{"dtype", func(g *plan.Graph) { g.Values[0].DType = "int32" }, `graph.nodes[0] ("gemm"): input 0: element type int32 of "x" is not supported by Gemm`},
		{"missing attr", func(g *plan.Graph) { g.Nodes[0].Attrs = g.Nodes[0].Attrs[1:] }, `graph.nodes[0] ("gemm"): attribute "alpha": missing`},
		{"extra attr", func(g *plan.Graph) {
			g.Nodes[1].Attrs = append(g.Nodes[1].Attrs, plan.Attr{Name: "zz", Ints: []int64{1}})
		}, `graph.nodes[1] ("cast"): attribute "zz": not an attribute of the operator`},
		{"attr on neg", func(g *plan.Graph) {
			g.Nodes[1].Op = "Neg"
			g.Values[3].DType = "float"
		}, `graph.nodes[1] ("cast"): attribute "saturate": not an attribute of the operator`},
		{"bool", func(g *plan.Graph) { g.Nodes[0].Attrs[2].Ints = []int64{2} }, `graph.nodes[0] ("gemm"): attribute "trans_a": 2 out of range [0, 1]`},
		{"ints for float", func(g *plan.Graph) { g.Nodes[0].Attrs[0] = plan.Attr{Name: "alpha", Ints: []int64{1}} }, `graph.nodes[0] ("gemm"): attribute "alpha": 1 integers and 0 floats, want one float`},
		{"not float32", func(g *plan.Graph) { g.Nodes[0].Attrs[0].Floats = []float64{0.1} }, `graph.nodes[0] ("gemm"): attribute "alpha": 0.1 is not a float32 value`},
		{"cast to uint8", func(g *plan.Graph) { g.Nodes[1].Attrs[1].Ints = []int64{2} }, `graph.nodes[1] ("cast"): cast to uint8 is not supported`},
		{"cast to huge", func(g *plan.Graph) { g.Nodes[1].Attrs[1].Ints = []int64{1 << 40} }, `graph.nodes[1] ("cast"): attribute "to": 1099511627776 out of range`},
		{"inner dims", func(g *plan.Graph) { g.Nodes[0].Attrs[3].Ints = []int64{1} }, `graph.nodes[0] ("gemm"): input 1: shape [3,4] does not match [2,3]: inner dimensions 3 and 4 differ (transB)`},
		{"output shape", func(g *plan.Graph) { g.Values[3].Shape = []int64{4, 2} }, `graph.nodes[1] ("cast"): output 0: "h" is float16[4,2], the operator gives float16[2,4]`},
		{"unsupported", func(g *plan.Graph) { g.Nodes[1].Op = "Conv"; g.Nodes[1].Attrs = nil }, `graph.nodes[1] ("cast"): unsupported operator Conv`},
		{"gemm arity", func(g *plan.Graph) { g.Nodes[0].Inputs = g.Nodes[0].Inputs[:2] }, `graph.nodes[0] ("gemm"): 2 inputs, want 3`},
		{"missing operand", func(g *plan.Graph) { g.Nodes[0].Inputs[1] = -1 }, `graph.nodes[0] ("gemm"): input 1: missing`},
		{"dangling value", func(g *plan.Graph) {
			g.Values = append(g.Values, plan.Value{Name: "v", DType: "float", Shape: []int64{}})
		}, `graph.values[4] ("v"): not a graph input, a constant or a node output`},
		{"input is output", func(g *plan.Graph) { g.Inputs = append(g.Inputs, 2) }, `graph.values[2] ("y"): graph input 1 is a constant or a node output`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := decodeSample()
			tc.edit(g)
			_, err := graph.Decode(g)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeGraph error = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := graph.Decode(nil); err == nil {
		t.Error("graph.Decode(nil) = nil error")
	}
}

// FuzzDecode: whatever a model section holds, reading, decoding and
// evaluating it never panics, and what decodes re-encodes to itself.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"qk-early", "mlp-small"} {
		m, err := onnx.ReadModelFile(filepath.Join("..", "..", "testdata", "models", name+".onnx"))
		if err != nil {
			f.Fatal(err)
		}
		g, err := graph.Build(m)
		if err != nil {
			f.Fatal(err)
		}
		data, err := plan.MarshalGraph(graph.Encode(g))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	data, _ := plan.MarshalGraph(*decodeSample())
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		pg, err := plan.ReadGraph(data)
		if err != nil {
			return
		}
		g, err := graph.Decode(pg)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		again, err := plan.MarshalGraph(graph.Encode(g))
		if err != nil {
			t.Fatal(err)
		}
		canon, _ := plan.MarshalGraph(*pg)
		if !bytes.Equal(canon, again) {
			t.Fatalf("re-encoded graph differs:\n%s\n%s", canon, again)
		}
		var elems int64
		for _, v := range g.Values {
			elems += v.NumElements()
		}
		if elems > 1<<16 || evalWork(g) > 1<<20 {
			return
		}
		if _, err := hostref.Eval(g, hostref.GenerateInputs(g, 1), hostref.Options{Precision: hostref.Device}); err != nil {
			t.Fatalf("Eval of a decoded graph: %v", err)
		}
	})
}

// TestDecodeGraphMutations edits the numbers, operators and element types
// of small graphs at random: whatever DecodeGraph accepts, the host
// reference evaluates without a panic (graph.Check covers what hostref
// trusts).
func TestDecodeMutations(t *testing.T) {
	var seeds [][]byte
	for _, path := range roundTripModels(t) {
		m, err := onnx.ReadModelFile(path)
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.Build(m)
		if err != nil || evalWork(g) > 1<<16 {
			continue
		}
		data, err := plan.MarshalGraph(graph.Encode(g))
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	data, _ := plan.MarshalGraph(*decodeSample())
	seeds = append(seeds, data)
	ops := graph.SupportedOps()
	dtypes := []string{"float", "float16", "float8e4m3fn", "float8e5m2fnuz", "int64"}
	rng := rand.New(rand.NewPCG(1, 2))
	iterations := 20000
	if testing.Short() {
		iterations = 2000
	}
	decoded := 0
	for it := 0; it < iterations; it++ {
		var doc any
		if err := json.Unmarshal(seeds[rng.IntN(len(seeds))], &doc); err != nil {
			t.Fatal(err)
		}
		var leaves []func()
		var walk func(v any, key string, set func(any))
		walk = func(v any, key string, set func(any)) {
			switch v := v.(type) {
			case map[string]any:
				keys := make([]string, 0, len(v))
				for k := range v {
					keys = append(keys, k)
				}
				sort.Strings(keys) // the same edits on every run
				for _, k := range keys {
					walk(v[k], k, func(n any) { v[k] = n })
				}
			case []any:
				for i, x := range v {
					walk(x, key, func(n any) { v[i] = n })
				}
				if len(v) > 0 {
					leaves = append(leaves, func() { set(v[:len(v)-1]) })
				}
			case float64:
				leaves = append(leaves, func() { set(v + float64(rng.IntN(5)-2)) })
			case string:
				switch key {
				case "op":
					leaves = append(leaves, func() { set(ops[rng.IntN(len(ops))]) })
				case "dtype":
					leaves = append(leaves, func() { set(dtypes[rng.IntN(len(dtypes))]) })
				}
			}
		}
		walk(doc, "", func(any) {})
		for k := 0; k < 1+rng.IntN(2) && len(leaves) > 0; k++ {
			leaves[rng.IntN(len(leaves))]()
		}
		mutated, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := plan.ReadGraph(mutated)
		if err != nil {
			continue
		}
		g, err := graph.Decode(pg)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			continue
		}
		decoded++
		var elems int64
		for _, v := range g.Values {
			elems += v.NumElements()
		}
		if elems > 1<<20 || evalWork(g) > 1<<22 {
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Eval panics on a decoded graph: %v\n%s", r, mutated)
				}
			}()
			if _, err := hostref.Eval(g, hostref.GenerateInputs(g, 1), hostref.Options{Precision: hostref.Device}); err != nil && !hostrefLacks(err) {
				t.Errorf("Eval of a decoded graph: %v", err)
			}
			if _, err := hostref.ErrorBounds(g, hostref.GenerateInputs(g, 1)); err != nil && !hostrefLacks(err) {
				t.Errorf("ErrorBounds of a decoded graph: %v", err)
			}
		}()
	}
	t.Logf("%d of %d mutated graphs decoded", decoded, iterations)
}
