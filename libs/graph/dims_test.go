package graph

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/onnx"
)

// dynModel has exporter-style dynamic axes: x is [batch, 3], y [batch, seq].
func dynModel(t *testing.T) *onnx.Model {
	t.Helper()
	b := onnx.NewModel(13)
	b.AddInputInfo(onnx.ValueInfo{Name: "x", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: -1, Param: "batch"}, {Value: 3}}})
	b.AddInputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: -1, Param: "batch"}, {Value: -1, Param: "seq"}}})
	b.AddNode("Relu", "r", []string{"x"}, []string{"a"})
	b.AddNode("Relu", "s", []string{"y"}, []string{"c"})
	b.AddOutputInfo(onnx.ValueInfo{Name: "a", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: -1, Param: "batch"}, {Value: 3}}})
	b.AddOutputInfo(onnx.ValueInfo{Name: "c", DType: onnx.Float})
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSymbolicDims(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  BuildOptions
		want string // shapes of x and y, or the error
	}{
		{"unbound", BuildOptions{}, `input "x": dimension 0 is symbolic ("batch"); the device program needs static shapes (ipu-plan --dim batch=N, or --input-shapes DIR)`},
		{"dims", BuildOptions{Dims: map[string]int64{"batch": 2, "seq": 5}}, "[2,3] [2,5]"},
		{"shapes", BuildOptions{InputShapes: map[string][]int64{"x": {4, 3}, "y": {4, 7}}}, "[4,3] [4,7]"},
		{"shapes and dims", BuildOptions{Dims: map[string]int64{"seq": 9}, InputShapes: map[string][]int64{"x": {4, 3}}}, "[4,3] [4,9]"},
		{"a fixed dimension differs", BuildOptions{InputShapes: map[string][]int64{"x": {4, 5}, "y": {4, 7}}}, `input "x": given shape [4,5], the model's dimension 1 is 3`},
		{"a name bound twice", BuildOptions{InputShapes: map[string][]int64{"x": {4, 3}, "y": {5, 7}}}, `input "y": dimension 0 ("batch") is 5, bound to 4 elsewhere`},
		{"rank", BuildOptions{InputShapes: map[string][]int64{"x": {4}}}, `input "x": given shape [4] has rank 1, the model's has 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(c.opt.Dims)
			g, err := BuildWith(dynModel(t), c.opt)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = ShapeString(g.Inputs[0].Shape) + " " + ShapeString(g.Inputs[1].Shape)
			}
			if got != c.want {
				t.Errorf("got %s\nwant %s", got, c.want)
			}
			if len(c.opt.Dims) != before {
				t.Errorf("BuildWith changed the caller's Dims: %v", c.opt.Dims)
			}
		})
	}
}

// tracedModel is what an exporter writes when only the inputs' batch is
// dynamic: the output and a value_info keep the batch it traced at (2).
func tracedModel(t *testing.T) *onnx.Model {
	t.Helper()
	b := onnx.NewModel(13)
	b.AddInputInfo(onnx.ValueInfo{Name: "x", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: -1, Param: "batch_size"}, {Value: 3}}})
	b.AddNode("Relu", "r", []string{"x"}, []string{"a"})
	b.AddNode("Neg", "n", []string{"a"}, []string{"y"})
	b.AddValueInfo("a", onnx.Float, []int64{2, 3})
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: 2}, {Value: 3}}})
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTracedShapes: declared shapes that the bound batch contradicts are
// listed in Graph.Redeclared and the graph takes the bound shapes; a rank
// or element type that differs, or a shape that differs with nothing
// bound, is still refused.
func TestTracedShapes(t *testing.T) {
	g, err := BuildWith(tracedModel(t), BuildOptions{Dims: map[string]int64{"batch_size": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ShapeString(g.Outputs[0].Shape); got != "[5,3]" {
		t.Errorf("output shape %s, want [5,3]", got)
	}
	want := []Redeclared{{What: "output", Name: "y", Shape: []int64{5, 3}, Declared: "[2,3]"}, {What: "value_info", Name: "a", Shape: []int64{5, 3}, Declared: "[2,3]"}}
	if diff := cmp.Diff(want, g.Redeclared); diff != "" {
		t.Errorf("Redeclared (-want +got):\n%s", diff)
	}
	// Bound to the traced batch, nothing is redeclared.
	if g, err := BuildWith(tracedModel(t), BuildOptions{InputShapes: map[string][]int64{"x": {2, 3}}}); err != nil || len(g.Redeclared) != 0 {
		t.Errorf("batch 2: %v, redeclared %v", err, g.Redeclared)
	}

	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{4, 3})
	b.AddNode("Relu", "r", []string{"x"}, []string{"y"})
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: 2}, {Value: 3}}})
	static, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildWith(static, BuildOptions{}); err == nil || err.Error() != `output "y": shape [4,3], model declares [2,3]` {
		t.Errorf("static model: got %v", err)
	}
}

// TestUnusedDims: a binding no input's dimension takes is refused, with
// the names the inputs have.
func TestUnusedDims(t *testing.T) {
	_, err := BuildWith(dynModel(t), BuildOptions{Dims: map[string]int64{"batch": 2, "seq": 5, "btach": 2}})
	if want := `symbolic dimension "btach" is bound, but no input of the model has it (theirs: "batch", "seq")`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{4, 3})
	b.AddNode("Relu", "r", []string{"x"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{4, 3})
	static, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	_, err = BuildWith(static, BuildOptions{Dims: map[string]int64{"batch": 1}})
	if want := `symbolic dimension "batch" is bound, but the model's inputs have no symbolic dimension`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
