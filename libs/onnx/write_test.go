package onnx_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// qkEarlyHex is the conformance model ort/qk_early_e4m3fnuz (written by
// onnx's Python helpers): the writer must give these bytes for the same
// graph.
const qkEarlyHex = "" +
	"080a12086f727463617365733aa2020a210a0171120271381a0771385f436173" +
	"742204436173742a090a02746f1812a001020a220a027138120271661a077166" +
	"5f436173742204436173742a090a02746f1801a001020a210a016b12026b381a" +
	"076b385f436173742204436173742a090a02746f1812a001020a220a026b3812" +
	"026b661a076b665f436173742204436173742a090a02746f1801a001020a300a" +
	"026b6612026b741a0c6b745f5472616e73706f736522095472616e73706f7365" +
	"2a0d0a047065726d42020100a001070a1d0a0271660a026b741201731a08735f" +
	"4d61744d756c22064d61744d756c1202716b5a130a0171120e0a0c080112080a" +
	"0208400a0208405a130a016b120e0a0c080112080a0208400a02084062130a01" +
	"73120e0a0c080112080a0208400a02084042040a001015"

func TestMarshalMatchesReferenceWriter(t *testing.T) {
	want, err := hex.DecodeString(qkEarlyHex)
	if err != nil {
		t.Fatal(err)
	}
	b := onnx.NewModel(21)
	b.Producer, b.GraphName = "ortcases", "qk"
	b.AddNode("Cast", "q8_Cast", []string{"q"}, []string{"q8"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FNUZ)))
	b.AddNode("Cast", "qf_Cast", []string{"q8"}, []string{"qf"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Cast", "k8_Cast", []string{"k"}, []string{"k8"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FNUZ)))
	b.AddNode("Cast", "kf_Cast", []string{"k8"}, []string{"kf"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Transpose", "kt_Transpose", []string{"kf"}, []string{"kt"}, onnx.IntsAttr("perm", 1, 0))
	b.AddNode("MatMul", "s_MatMul", []string{"qf", "kt"}, []string{"s"})
	b.AddInput("q", onnx.Float, []int64{64, 64})
	b.AddInput("k", onnx.Float, []int64{64, 64})
	b.AddOutput("s", onnx.Float, []int64{64, 64})
	if got := b.Marshal(); !bytes.Equal(got, want) {
		t.Errorf("bytes differ from the reference writer's:\n got %x\nwant %x", got, want)
	}
}

// rebuild writes a decoded model back with the builder.
func rebuild(t *testing.T, m *onnx.Model) *onnx.ModelBuilder {
	t.Helper()
	if len(m.Opsets) != 1 {
		t.Skipf("imports %d operator sets; the builder writes only the default one", len(m.Opsets))
	}
	b := onnx.NewModel(m.Opset(""))
	b.IRVersion, b.Producer, b.GraphName = m.IRVersion, m.Producer, m.Graph.Name
	for _, n := range m.Graph.Nodes {
		if n.Domain != "" {
			t.Skipf("node %q has domain %q", n.Name, n.Domain)
		}
		b.AddNode(n.OpType, n.Name, n.Inputs, n.Outputs, n.Attrs...)
	}
	for _, init := range m.Graph.Initializers {
		b.AddInitializer(init)
	}
	for _, vi := range m.Graph.Inputs {
		b.AddInputInfo(vi)
	}
	for _, vi := range m.Graph.Outputs {
		b.AddOutputInfo(vi)
	}
	if len(m.Graph.ValueInfo) > 0 {
		t.Skip("has value_info")
	}
	return b
}

// The conformance models that onnx's helpers wrote for opset 21 come out
// byte for byte the same after a read and a write.
func TestRewriteConformanceModels(t *testing.T) {
	r, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	dir := r.Dir
	files, _ := filepath.Glob(filepath.Join(dir, "ort", "*", "model.onnx"))
	if len(files) == 0 {
		t.Skipf("no conformance models under %s", dir)
	}
	sort.Strings(files)
	for _, path := range files {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := onnx.ReadModel(want)
			if err != nil {
				t.Fatal(err)
			}
			if got := rebuild(t, m).Marshal(); !bytes.Equal(got, want) {
				t.Errorf("rewritten model differs: %d bytes, want %d", len(got), len(want))
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	w := onnx.NewFloat32("w", []int64{4, 3}, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	bias := onnx.NewFloat32("bias", []int64{3}, []float32{0.5, -0.5, 0})
	shape := &onnx.Tensor{Name: "", DType: onnx.Int64, Dims: []int64{2}, Raw: []byte{
		3, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}

	tests := []struct {
		name  string
		build func() *onnx.ModelBuilder
		model *onnx.Model
		graph string // graph.Build's String, "" when Build is not expected to accept it
	}{
		{
			name: "every attribute type",
			build: func() *onnx.ModelBuilder {
				b := onnx.NewModel(21)
				b.AddInput("x", onnx.Float, []int64{2, 4})
				b.AddInitializer(w)
				b.AddInitializer(bias)
				b.AddNode("Gemm", "g", []string{"x", "w", "bias"}, []string{"y"},
					onnx.FloatAttr("alpha", 0.25), onnx.IntAttr("transB", 0))
				b.AddNode("Gelu", "", []string{"y"}, []string{"z"}, onnx.StringAttr("approximate", "tanh"))
				b.AddNode("Constant", "c", nil, []string{"shape"}, onnx.TensorAttr("value", shape))
				b.AddNode("Reshape", "r", []string{"z", "shape"}, []string{"r"})
				b.AddNode("Transpose", "t", []string{"r"}, []string{"out"}, onnx.IntsAttr("perm", 1, 0))
				b.AddNode("Foo", "f", []string{"", "out"}, []string{"unused"}, onnx.FloatsAttr("fs", 1.5, -2))
				b.AddOutput("out", onnx.Float, []int64{-1, 3})
				b.AddValueInfo("z", onnx.Float, []int64{2, 3})
				return b
			},
			model: &onnx.Model{
				IRVersion: 10, Opsets: map[string]int64{"": 21},
				Graph: &onnx.Graph{
					Name: "main",
					Nodes: []onnx.Node{
						{Name: "g", OpType: "Gemm", Inputs: []string{"x", "w", "bias"}, Outputs: []string{"y"}, Attrs: []onnx.Attr{
							{Name: "alpha", Type: onnx.AttrFloat, F: 0.25}, {Name: "transB", Type: onnx.AttrInt}}},
						{OpType: "Gelu", Inputs: []string{"y"}, Outputs: []string{"z"}, Attrs: []onnx.Attr{
							{Name: "approximate", Type: onnx.AttrString, S: "tanh"}}},
						{Name: "c", OpType: "Constant", Outputs: []string{"shape"}, Attrs: []onnx.Attr{
							{Name: "value", Type: onnx.AttrTensor, T: shape}}},
						{Name: "r", OpType: "Reshape", Inputs: []string{"z", "shape"}, Outputs: []string{"r"}},
						{Name: "t", OpType: "Transpose", Inputs: []string{"r"}, Outputs: []string{"out"}, Attrs: []onnx.Attr{
							{Name: "perm", Type: onnx.AttrInts, Ints: []int64{1, 0}}}},
						{Name: "f", OpType: "Foo", Inputs: []string{"", "out"}, Outputs: []string{"unused"}, Attrs: []onnx.Attr{
							{Name: "fs", Type: onnx.AttrFloats, Floats: []float32{1.5, -2}}}},
					},
					Initializers: []*onnx.Tensor{w, bias},
					Inputs:       []onnx.ValueInfo{{Name: "x", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: 2}, {Value: 4}}}},
					Outputs:      []onnx.ValueInfo{{Name: "out", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: -1}, {Value: 3}}}},
					ValueInfo:    []onnx.ValueInfo{{Name: "z", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: 2}, {Value: 3}}}},
				},
			},
		},
		{
			name: "full value infos",
			build: func() *onnx.ModelBuilder {
				b := onnx.NewModel(13)
				b.Producer, b.GraphName = "test", "g"
				b.AddInputInfo(onnx.ValueInfo{Name: "a", DType: onnx.Float16, HasShape: true, Shape: []onnx.Dim{{Value: -1, Param: "batch"}, {Value: 8}}})
				b.AddInputInfo(onnx.ValueInfo{Name: "b", DType: onnx.Float})
				b.AddInputInfo(onnx.ValueInfo{Name: "c", NotTensor: true})
				b.AddInput("s", onnx.Float, nil)
				b.AddNode("Relu", "n", []string{"a"}, []string{"y"})
				b.AddOutput("y", onnx.Float16, []int64{-1, 8})
				return b
			},
			model: &onnx.Model{
				IRVersion: 7, Producer: "test", Opsets: map[string]int64{"": 13},
				Graph: &onnx.Graph{
					Name:  "g",
					Nodes: []onnx.Node{{Name: "n", OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"y"}}},
					Inputs: []onnx.ValueInfo{
						{Name: "a", DType: onnx.Float16, HasShape: true, Shape: []onnx.Dim{{Value: -1, Param: "batch"}, {Value: 8}}},
						{Name: "b", DType: onnx.Float},
						{Name: "c", NotTensor: true},
						{Name: "s", DType: onnx.Float, HasShape: true}, // a scalar
					},
					Outputs: []onnx.ValueInfo{{Name: "y", DType: onnx.Float16, HasShape: true, Shape: []onnx.Dim{{Value: -1}, {Value: 8}}}},
				},
			},
		},
		{
			name: "fp8 attention scores",
			build: func() *onnx.ModelBuilder {
				b := onnx.NewModel(21)
				b.AddInput("q", onnx.Float, []int64{8, 4})
				b.AddInput("k", onnx.Float, []int64{8, 4})
				b.AddNode("Cast", "", []string{"q"}, []string{"q8"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FNUZ)), onnx.IntAttr("saturate", 0))
				b.AddNode("Cast", "", []string{"q8"}, []string{"qf"}, onnx.IntAttr("to", int64(onnx.Float)))
				b.AddNode("Transpose", "", []string{"k"}, []string{"kt"}, onnx.IntsAttr("perm", 1, 0))
				b.AddNode("MatMul", "", []string{"qf", "kt"}, []string{"s"})
				b.AddOutput("s", onnx.Float, []int64{8, 8})
				return b
			},
			graph: `graph "main" opset 21
input q float[8,4]
input k float[8,4]
node "q8" Cast {To:float8e4m3fnuz Saturate:false} (q) -> q8 float8e4m3fnuz[8,4]
node "qf" Cast {To:float Saturate:true} (q8) -> qf float[8,4]
node "kt" Transpose {Perm:[1 0]} (k) -> kt float[4,8]
node "s" MatMul (qf, kt) -> s float[8,8]
output s
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.build().Marshal()
			if again := tt.build().Marshal(); !bytes.Equal(data, again) {
				t.Fatal("two builds of the same model give different bytes")
			}
			m, err := onnx.ReadModel(data)
			if err != nil {
				t.Fatal(err)
			}
			if tt.model != nil {
				if diff := cmp.Diff(tt.model, m); diff != "" {
					t.Errorf("model mismatch (-want +got):\n%s", diff)
				}
			}
			if tt.graph == "" {
				return
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.graph, g.String()); diff != "" {
				t.Errorf("graph mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIRVersionFor(t *testing.T) {
	for _, tt := range []struct{ opset, ir int64 }{
		{1, 4}, {9, 4}, {10, 5}, {11, 6}, {12, 7}, {14, 7}, {15, 8}, {18, 8}, {19, 9}, {20, 9}, {21, 10}, {22, 10},
	} {
		if got := onnx.IRVersionFor(tt.opset); got != tt.ir {
			t.Errorf("IRVersionFor(%d) = %d, want %d", tt.opset, got, tt.ir)
		}
	}
}

// A model the builder writes goes through graph.Build with the shapes it
// declares, and graph.Build's complaints about it name the node.
func TestBuildErrors(t *testing.T) {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{2, 3})
	b.AddInput("y", onnx.Float, []int64{4, 5})
	b.AddNode("MatMul", "mm", []string{"x", "y"}, []string{"z"})
	b.AddOutput("z", onnx.Float, []int64{2, 5})
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	_, err = graph.Build(m)
	if err == nil || !strings.Contains(err.Error(), `"mm"`) {
		t.Errorf("Build: %v, want an error naming node \"mm\"", err)
	}
}

// TestGraphAttributes: If branches written with GraphAttr read back as
// they were, with the names they read from the enclosing graph, and
// graph.Build builds the If from them.
func TestGraphAttributes(t *testing.T) {
	then := &onnx.Graph{Name: "then",
		Initializers: []*onnx.Tensor{onnx.NewFloat32("two", []int64{}, []float32{2})},
		Nodes:        []onnx.Node{{Name: "m", OpType: "Mul", Inputs: []string{"x", "two"}, Outputs: []string{"t"}}},
		Outputs:      []onnx.ValueInfo{{Name: "t", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: 2}}}},
	}
	inner := &onnx.Graph{Name: "inner",
		Nodes:   []onnx.Node{{Name: "r", OpType: "Relu", Inputs: []string{"s"}, Outputs: []string{"ri"}}},
		Outputs: []onnx.ValueInfo{{Name: "ri"}},
	}
	els := &onnx.Graph{Name: "else",
		Nodes: []onnx.Node{{Name: "inner_if", OpType: "If", Inputs: []string{"c"}, Outputs: []string{"e"},
			Attrs: []onnx.Attr{onnx.GraphAttr("then_branch", inner), onnx.GraphAttr("else_branch", &onnx.Graph{Outputs: []onnx.ValueInfo{{Name: "x"}}})}}},
		Outputs: []onnx.ValueInfo{{Name: "e"}},
	}
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{2})
	b.AddInput("c", onnx.Bool, []int64{1})
	b.AddNode("Neg", "neg", []string{"x"}, []string{"s"})
	b.AddNode("If", "if", []string{"c"}, []string{"y"}, onnx.GraphAttr("then_branch", then), onnx.GraphAttr("else_branch", els))
	b.AddOutput("y", onnx.Float, []int64{2})
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	n := &m.Graph.Nodes[1]
	for name, want := range map[string]*onnx.Graph{"then_branch": then, "else_branch": els} {
		got, err := n.AttrGraph(name)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", name, d)
		}
	}
	if d := cmp.Diff([]string{"c", "s", "x"}, n.OuterRefs()); d != "" {
		t.Errorf("OuterRefs mismatch (-want +got):\n%s", d)
	}
	if _, err := n.AttrGraph("absent"); err != nil {
		t.Errorf("absent graph: %v", err)
	}
	if _, err := m.Graph.Nodes[0].AttrGraph("then_branch"); err != nil {
		t.Errorf("no attribute: %v", err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `graph "main" opset 13
input x float[2]
input c bool[1]
const two float[]
node "neg" Neg (x) -> s float[2]
node "if" If (c) -> y float[2]
  then
    node "m" Mul (x, two) -> t float[2]
    output t
  else
    node "inner_if" If (c) -> e float[2]
      then
        node "r" Relu (s) -> ri float[2]
        output ri
      else
        output x
    output e
output y
`
	if d := cmp.Diff(want, g.String()); d != "" {
		t.Errorf("graph mismatch (-want +got):\n%s", d)
	}
}
