package graph

import (
	"testing"

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
