package graph

import (
	"strings"
	"testing"

	"ipu.local/libs/onnx"
)

// checkModel is the graph Check's error cases start from:
// x float[2,3], w float[3,4] constant,
// y = MatMul(x, w); z = Transpose(y); s = Softmax(z, axis 1); r = Reshape(s, [8]).
func checkModel(t *testing.T) *Graph {
	t.Helper()
	m := newModel(13)
	input(m, "x", onnx.Float, 2, 3)
	initializer(m, onnx.NewFloat32("w", []int64{3, 4}, make([]float32, 12)))
	initializer(m, ints64("shape", []int64{1}, 8))
	addNode(m, "MatMul", "mm", l("x", "w"), l("y"))
	addNode(m, "Transpose", "tr", l("y"), l("z"))
	addNode(m, "Softmax", "sm", l("z"), l("s"), aInt("axis", 1))
	addNode(m, "Reshape", "rs", l("s", "shape"), l("r"))
	output(m, "r")
	g, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(g); err != nil {
		t.Fatalf("Check of the unedited graph: %v", err)
	}
	return g
}

func TestCheckErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(g *Graph)
		want string
	}{
		{"value index", func(g *Graph) { g.Values[1].Index = 0 }, `values[1] ("w"): index 0, want 1`},
		{"value type", func(g *Graph) { g.Values[0].DType = onnx.Double }, `values[0] ("x"): element type double is not supported`},
		{"value shape", func(g *Graph) { g.Values[0].Shape = []int64{-1} }, `values[0] ("x"): negative dimension in [-1]`},
		{"huge value", func(g *Graph) { g.Values[0].Shape = []int64{1 << 40} }, `values[0] ("x"): shape [1099511627776] has 1099511627776 elements, more than 268435456`},
		{"const bytes", func(g *Graph) { g.Values[1].Const.Raw = g.Values[1].Const.Raw[:4] }, `values[1] ("w"): constant data of 4 bytes, want 48`},
		{"const shape", func(g *Graph) { g.Values[1].Const.Dims = []int64{4, 3} }, `values[1] ("w"): constant data of shape [4,3], value is [3,4]`},
		{"input twice", func(g *Graph) { g.Inputs = append(g.Inputs, g.Inputs[0]) }, `values[0] ("x"): listed twice as a graph input`},
		{"input is const", func(g *Graph) { g.Inputs = append(g.Inputs, g.Values[1]) }, `values[1] ("w"): graph input 1 is a constant or a node output`},
		{"foreign input", func(g *Graph) { g.Inputs[0] = &Value{Name: "x"} }, `input 0 is not a value of the graph`},
		{"not defined", func(g *Graph) { g.Inputs = nil }, `nodes[0] ("mm"): input 0: "x" is not defined before the node`},
		{"order", func(g *Graph) {
			g.Nodes[0], g.Nodes[1] = g.Nodes[1], g.Nodes[0]
			g.Nodes[0].Index, g.Nodes[1].Index = 0, 1
		}, `nodes[0] ("tr"): input 0: "y" is not defined before the node`},
		{"node index", func(g *Graph) { g.Nodes[2].Index = 7 }, `nodes[2] ("sm"): index 7, want 2`},
		{"nil node", func(g *Graph) { g.Nodes[2] = nil }, `nodes[2] (""): nil node`},
		{"nil input", func(g *Graph) { g.Nodes[0].Inputs[1] = nil }, `nodes[0] ("mm"): input 1: missing`},
		{"producer", func(g *Graph) { g.Values[2].Producer = g.Nodes[1] }, `nodes[0] ("mm"): output 0 is not a value of the graph that the node produces`},
		{"stray producer", func(g *Graph) {
			g.Values = append(g.Values, &Value{Name: "v", DType: onnx.Float, Index: len(g.Values), Producer: g.Nodes[1]})
		}, `values[6] ("v"): its producer is not a node of the graph listing it as an output`},
		{"no output", func(g *Graph) { g.Nodes[1].Outputs = nil }, `nodes[1] ("tr"): no output`},
		{"unsupported", func(g *Graph) { g.Nodes[1].Op = "Conv" }, `nodes[1] ("tr"): unsupported operator Conv`},
		{"unsupported constant", func(g *Graph) { g.Nodes[1].Op = "Constant" }, `nodes[1] ("tr"): unsupported operator Constant`},
		{"arity", func(g *Graph) { g.Nodes[1].Inputs = append(g.Nodes[1].Inputs, g.Values[0]) }, `nodes[1] ("tr"): 2 inputs, want 1`},
		{"attrs type", func(g *Graph) { g.Nodes[1].Attrs = &Flatten{} }, `nodes[1] ("tr"): attributes *graph.Flatten, want *graph.Transpose`},
		{"nil attrs", func(g *Graph) { g.Nodes[1].Attrs = nil }, `nodes[1] ("tr"): attributes <nil>, want *graph.Transpose`},
		{"attrs on matmul", func(g *Graph) { g.Nodes[0].Attrs = &Gemm{} }, `nodes[0] ("mm"): attributes *graph.Gemm, want none`},
		{"perm", func(g *Graph) { g.Nodes[1].Attrs = &Transpose{Perm: []int{0, 0}} }, `nodes[1] ("tr"): perm [0 0] is not a permutation of 0..1`},
		{"axis", func(g *Graph) { g.Nodes[2].Attrs = &Softmax{Axis: 2} }, `nodes[2] ("sm"): axis 2 out of range [0,2) for rank 2`},
		{"reshape", func(g *Graph) { g.Nodes[3].Attrs = &Reshape{Shape: []int64{9}} }, `nodes[3] ("rs"): cannot reshape [4,2] (8 elements) to [9] (9 elements)`},
		{"output shape", func(g *Graph) { g.Values[2].Shape = []int64{4, 2} }, `nodes[0] ("mm"): output 0: "y" is float[4,2], the operator gives float[2,4]`},
		{"matmul shapes", func(g *Graph) { g.Values[1].Shape = []int64{4, 3}; g.Values[1].Const.Dims = []int64{4, 3} }, `nodes[0] ("mm"): input 1: shape [4,3] does not match [2,3]: inner dimensions 3 and 4 differ`},
		{"operand type", func(g *Graph) {
			g.Values[1].DType = onnx.Float8E4M3FN
			g.Values[1].Const = &onnx.Tensor{Name: "w", DType: onnx.Float8E4M3FN, Dims: []int64{3, 4}, Raw: make([]byte, 12)}
		}, `nodes[0] ("mm"): input 1: element type float8e4m3fn of "w" is not supported by MatMul`},
		{"output type", func(g *Graph) { g.Values[3].DType = onnx.Float16 }, `nodes[1] ("tr"): output 0: "z" is float16[4,2], the operator gives float[4,2]`},
		{"undefined value", func(g *Graph) {
			g.Values = append(g.Values, &Value{Name: "v", DType: onnx.Float, Index: len(g.Values)})
		}, `values[6] ("v"): not a graph input, a constant or a node output`},
		{"no outputs", func(g *Graph) { g.Outputs = nil }, `graph has no outputs`},
		{"foreign output", func(g *Graph) { g.Outputs[0] = &Value{} }, `output 0 is not a value of the graph`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := checkModel(t)
			tc.edit(g)
			err := Check(g)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check error = %v, want %q", err, tc.want)
			}
		})
	}
	if err := Check(nil); err == nil {
		t.Error("Check(nil) = nil")
	}
}

// moveModel is the graph the data-movement Check cases edit: x float[2,3],
// ids int64[4]; s = Slice(x, axis 1, 1:3); g = Gather(x, ids, axis 1);
// a, b = Split(g, axis 1, [1, 3]); c = Concat(a, b, axis 1); p = If(cond)
// then Neg(c) else c.
func moveModel(t *testing.T) *Graph {
	t.Helper()
	m := newModel(13)
	input(m, "x", onnx.Float, 2, 3)
	input(m, "ids", onnx.Int64, 4)
	input(m, "cond", onnx.Bool)
	initializer(m, ints64("st", []int64{1}, 1))
	initializer(m, ints64("en", []int64{1}, 3))
	initializer(m, ints64("ax", []int64{1}, 1))
	initializer(m, ints64("sp", []int64{2}, 1, 3))
	addNode(m, "Slice", "sl", l("x", "st", "en", "ax"), l("s"))
	addNode(m, "Gather", "ga", l("x", "ids"), l("g"), aInt("axis", 1))
	addNode(m, "Split", "spl", l("g", "sp"), l("a", "b"), aInt("axis", 1))
	addNode(m, "Concat", "cat", l("a", "b"), l("c"), aInt("axis", 1))
	then := &onnx.Graph{Nodes: []onnx.Node{node("Neg", l("c"), "n")}, Outputs: []onnx.ValueInfo{{Name: "n"}}}
	els := &onnx.Graph{Outputs: []onnx.ValueInfo{{Name: "c"}}}
	addNode(m, "If", "if", l("cond"), l("p"), aGraph("then_branch", then), aGraph("else_branch", els))
	output(m, "s", "p")
	g, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(g); err != nil {
		t.Fatalf("Check of the unedited graph: %v", err)
	}
	return g
}

func TestCheckNewOperators(t *testing.T) {
	tests := []struct {
		name string
		edit func(g *Graph)
		want string
	}{
		{"slice unresolved", func(g *Graph) { g.Nodes[0].Attrs.(*Slice).Ends[0] = 7 }, `nodes[0] ("sl"): axis 1 of dimension 3: start 1, end 7, step 1 are not resolved`},
		{"slice lists", func(g *Graph) { g.Nodes[0].Attrs.(*Slice).Steps = nil }, `nodes[0] ("sl"): 1 axes, 1 starts, 1 ends, 0 steps: want as many of each`},
		{"slice axis", func(g *Graph) { g.Nodes[0].Attrs.(*Slice).Axes[0] = 5 }, `nodes[0] ("sl"): axis 5 out of range [0,2) for rank 2`},
		{"gather axis", func(g *Graph) { g.Nodes[1].Attrs = &Gather{Axis: -1} }, `nodes[1] ("ga"): axis -1 out of range [0,2) for rank 2`},
		{"gather indices type", func(g *Graph) { g.Nodes[1].Inputs[1] = g.Values[0] }, `nodes[1] ("ga"): input 1: element type float of "x" is not supported by Gather`},
		{"split sizes", func(g *Graph) { g.Nodes[2].Attrs.(*Split).Sizes[0] = 2 }, `nodes[2] ("spl"): sizes [2 3] sum to 5, axis 1 has dimension 4`},
		{"split count", func(g *Graph) { g.Nodes[2].Attrs.(*Split).Sizes = []int64{4} }, `nodes[2] ("spl"): 1 sizes for 2 outputs`},
		{"concat shapes", func(g *Graph) { g.Nodes[3].Attrs = &Concat{Axis: 0} }, `nodes[3] ("cat"): input 1: shape [2,3] does not match [2,1] outside axis 0`},
		{"if branch missing", func(g *Graph) { g.Nodes[4].Attrs.(*If).Else = nil }, `nodes[4] ("if"): a branch is missing`},
		{"if branch output undefined", func(g *Graph) {
			a := g.Nodes[4].Attrs.(*If)
			a.Else.Outputs[0] = a.Then.Outputs[0]
		}, `nodes[4] ("if"): else branch output 0: "n" is not defined in the branch or before the node`},
		{"if branch value read outside", func(g *Graph) {
			g.Outputs[1] = g.Nodes[4].Attrs.(*If).Then.Nodes[0].Outputs[0]
			g.Nodes[3].Inputs[0] = g.Outputs[1]
		}, `nodes[3] ("cat"): input 0: "n" is not defined before the node`},
		{"if node twice", func(g *Graph) {
			a := g.Nodes[4].Attrs.(*If)
			a.Else.Nodes = append(a.Else.Nodes, a.Then.Nodes[0])
		}, `nodes[0] ("n"): listed twice`},
		{"if outputs", func(g *Graph) { g.Nodes[4].Attrs.(*If).Then.Outputs = nil }, `nodes[4] ("if"): then branch has 0 outputs, else branch 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := moveModel(t)
			tc.edit(g)
			err := Check(g)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check error = %v, want %q", err, tc.want)
			}
		})
	}
}
