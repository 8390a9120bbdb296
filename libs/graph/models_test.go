package graph

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

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

// modelNodes counts the nodes of an ONNX graph, its subgraphs' included.
func modelNodes(g *onnx.Graph) int {
	n := len(g.Nodes)
	for i := range g.Nodes {
		for _, a := range g.Nodes[i].Attrs {
			if a.G != nil {
				n += modelNodes(a.G)
			}
		}
	}
	return n
}

// graphNodes counts the nodes of a graph, its branches' included, by
// operator.
func graphNodes(g *Graph) (int, map[string]int) {
	ops := map[string]int{}
	n := 0
	walkNodes(g.Nodes, func(node *Node) {
		n++
		ops[node.Op]++
	})
	return n, ops
}

// TestTorchModels builds the PyTorch-exporter cases and runs the passes:
// each builds, checks, round-trips through its plan encoding, and comes
// out with the idioms folded and fused. The node counts (model, after
// folding, after the passes) are logged.
func TestTorchModels(t *testing.T) {
	tests := []struct {
		name string
		// ops the simplified graph must have (count) and must not have (0).
		ops map[string]int
	}{
		{"torch_mlp_ln", map[string]int{"LayerNormalization": 2, "Gemm": 3, "ReduceMean": 0, "Pow": 0}},
		{"torch_gate_taken", map[string]int{"If": 1, "LayerNormalization": 4, "Identity": 0, "GreaterOrEqual": 1, "Cast": 0}},
		{"torch_gate_skipped", map[string]int{"If": 1, "LayerNormalization": 4, "Identity": 0}},
		{"torch_attention", map[string]int{"Shape": 0, "Gather": 0, "Concat": 0, "Unsqueeze": 1, "Reshape": 4,
			"LayerNormalization": 1, "Gelu": 1, "Erf": 0}},
		{"torch_embedding", map[string]int{"Gather": 1, "LayerNormalization": 1, "Identity": 0}},
	}
	root := sharedModels(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := onnx.ReadModelFile(filepath.Join(root, tc.name, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			before := modelNodes(m.Graph)
			g, err := Build(m)
			if err != nil {
				t.Fatal(err)
			}
			checkGraph(t, g)
			folded, _ := graphNodes(g)
			g, rw := Simplify(g)
			checkGraph(t, g)
			after, ops := graphNodes(g)
			t.Logf("%s: %d nodes in the model, %d after folding (%d folded), %d after the passes (%d rewrites)",
				tc.name, before, folded, len(g.Folded), after, len(rw))
			for op, want := range tc.ops {
				if ops[op] != want {
					t.Errorf("%d %s nodes, want %d", ops[op], op, want)
				}
			}
			pg := Encode(g)
			g2, err := Decode(&pg)
			if err != nil {
				t.Fatalf("Decode of the encoded graph: %v", err)
			}
			if d := cmp.Diff(g.String(), g2.String()); d != "" {
				t.Errorf("decoded graph: mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// TestBuildConformance builds every conformance model, then runs the
// passes: each builds, except the cases with DOUBLE inputs, which fail
// naming the type and build with DowncastFP64.
func TestBuildConformance(t *testing.T) {
	double := map[string]bool{
		"onnx-pytorch/test_operator_add_broadcast":                 true,
		"onnx-pytorch/test_operator_add_size1_broadcast":           true,
		"onnx-pytorch/test_operator_add_size1_right_broadcast":     true,
		"onnx-pytorch/test_operator_add_size1_singleton_broadcast": true,
		"onnx-pytorch/test_operator_addconstant":                   true,
	}
	dir := conformanceDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "model.onnx"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Skip("no conformance models")
	}
	for _, path := range files {
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		t.Run(rel, func(t *testing.T) {
			m, err := onnx.ReadModelFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Build(m)
			switch {
			case double[rel] && err == nil:
				t.Fatalf("built, want the double error")
			case double[rel] && err.Error() != `input "0": element type double is not supported by the device`:
				t.Fatalf("error %q, want the double error", err)
			case !double[rel] && err != nil:
				t.Fatal(err)
			}
			g, err = BuildWith(m, BuildOptions{DowncastFP64: true})
			if err != nil {
				t.Fatalf("with DowncastFP64: %v", err)
			}
			if double[rel] != (len(g.Downcast) > 0) {
				t.Errorf("downcast %q", g.Downcast)
			}
			checkGraph(t, g)
			g, _ = Simplify(g)
			checkGraph(t, g)
		})
	}
}

// TestDowncast: DOUBLE inputs, initializers, Constant values and Cast
// targets become float under DowncastFP64, rounded to nearest, and are
// listed.
func TestDowncast(t *testing.T) {
	m := newModel(13)
	input(m, "x", onnx.Double, 2)
	w := &onnx.Tensor{Name: "w", DType: onnx.Double, Dims: []int64{2}, Raw: le64f(0.1, -2.5)}
	initializer(m, w)
	addNode(m, "Add", "a", l("x", "w"), l("y"))
	addNode(m, "Cast", "c", l("y"), l("z"), aInt("to", int64(onnx.Double)))
	output(m, "z")
	m.Graph.Outputs[0].DType = onnx.Double
	if _, err := Build(m); err == nil || err.Error() != `input "x": element type double is not supported by the device` {
		t.Errorf("Build error %v", err)
	}
	g, err := BuildWith(m, BuildOptions{DowncastFP64: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `graph "g" opset 13
input x float[2]
const w float[2]
node "a" Add (x, w) -> y float[2]
node "c" Cast {To:float Saturate:true} (y) -> z float[2]
output z
`
	if d := cmp.Diff(want, g.String()); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"w", "x", "z"}, g.Downcast); d != "" {
		t.Errorf("Downcast mismatch (-want +got):\n%s", d)
	}
	f, _ := g.Values[1].Const.Float32s()
	if d := cmp.Diff([]float32{0.1, -2.5}, f); d != "" {
		t.Errorf("w mismatch (-want +got):\n%s", d)
	}
}

// le64f encodes float64 values as raw DOUBLE data.
func le64f(v ...float64) []byte {
	var raw []byte
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(x))
	}
	return raw
}
