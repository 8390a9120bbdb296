package graph

import (
	"testing"

	"ipu.local/libs/onnx"
)

func aGraph(name string, g *onnx.Graph) onnx.Attr {
	return onnx.Attr{Name: name, Type: onnx.AttrGraph, G: g}
}

func f32(name string, dims []int64, v ...float32) *onnx.Tensor { return onnx.NewFloat32(name, dims, v) }

// opModel builds opset-v model y = op(x, consts...) with x float of dims;
// each constant is an initializer named after its position (c1, c2...).
func opModel(v int64, op string, xdims []int64, consts []*onnx.Tensor, attrs ...onnx.Attr) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(v)
		input(m, "x", onnx.Float, xdims...)
		ins := l("x")
		for _, t := range consts {
			if t == nil {
				ins = append(ins, "")
				continue
			}
			initializer(m, t)
			ins = append(ins, t.Name)
		}
		addNode(m, op, "n", ins, l("y"), attrs...)
		output(m, "y")
		return m
	}
}

func TestBuildDataMovement(t *testing.T) {
	runBuildCases(t, []buildCase{
		{name: "identity", model: unary(13, "Identity", []int64{2}), want: `
input x float[2]
node "n" Identity (x) -> y float[2]
output y
`},
		{name: "gather rows by int64 ids", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "ids", onnx.Int64, 1, 4)
			initializer(m, f32("emb", []int64{10, 3}, make([]float32, 30)...))
			addNode(m, "Gather", "g", l("emb", "ids"), l("y"))
			output(m, "y")
			return m
		}, want: `
input ids int64[1,4]
const emb float[10,3]
node "g" Gather {Axis:0} (emb, ids) -> y float[1,4,3]
output y
`},
		{name: "gather on a negative axis", model: opModel(13, "Gather", []int64{2, 3, 4}, []*onnx.Tensor{ints64("i", []int64{2}, -1, 0)}, aInt("axis", -1)), want: `
input x float[2,3,4]
const i int64[2]
node "n" Gather {Axis:2} (x, i) -> y float[2,3,2]
output y
`},
		{name: "gather scalar index", model: opModel(13, "Gather", []int64{2, 3}, []*onnx.Tensor{ints64("i", []int64{}, 2)}, aInt("axis", 1)), want: `
input x float[2,3]
const i int64[]
node "n" Gather {Axis:1} (x, i) -> y float[2]
output y
`},
		{name: "gather bad axis", model: opModel(13, "Gather", []int64{2, 3}, []*onnx.Tensor{ints64("i", []int64{1}, 0)}, aInt("axis", 2)),
			err: `node "n" (Gather): axis 2 out of range [-2,1] for rank 2`},
		{name: "gather index out of range", model: opModel(13, "Gather", []int64{2, 3}, []*onnx.Tensor{ints64("i", []int64{2}, 0, -4)}, aInt("axis", 1)),
			err: `node "n" (Gather) input 1: index -4 of "i" out of range [-3,2] for axis 1 of [2,3]`},
		{name: "gather float indices", model: opModel(13, "Gather", []int64{2, 3}, []*onnx.Tensor{f32("i", []int64{1}, 0)}),
			err: `node "n" (Gather) input 1: element type float of "i" is not supported by Gather`},
		{name: "gather scalar data", model: opModel(13, "Gather", []int64{}, []*onnx.Tensor{ints64("i", []int64{1}, 0)}),
			err: `node "n" (Gather) input 0: "x" is a scalar`},

		{name: "concat", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 3)
			input(m, "b", onnx.Float, 2, 1)
			addNode(m, "Concat", "c", l("a", "b", "a"), l("y"), aInt("axis", -1))
			output(m, "y")
			return m
		}, want: `
input a float[2,3]
input b float[2,1]
node "c" Concat {Axis:1} (a, b, a) -> y float[2,7]
output y
`},
		{name: "concat mismatched shapes", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 3)
			input(m, "b", onnx.Float, 3, 3)
			addNode(m, "Concat", "c", l("a", "b"), l("y"), aInt("axis", 1))
			output(m, "y")
			return m
		}, err: `node "c" (Concat) input 1: shape [3,3] does not match [2,3] outside axis 1`},
		{name: "concat wrong rank", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 3)
			input(m, "b", onnx.Float, 2, 3, 1)
			addNode(m, "Concat", "c", l("a", "b"), l("y"), aInt("axis", 1))
			output(m, "y")
			return m
		}, err: `node "c" (Concat) input 1: shape [2,3,1] does not match [2,3] outside axis 1`},
		{name: "concat mixed types", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2)
			input(m, "b", onnx.Int64, 2)
			addNode(m, "Concat", "c", l("a", "b"), l("y"), aInt("axis", 0))
			output(m, "y")
			return m
		}, err: `node "c" (Concat) input 1: element type int64 does not match float`},
		{name: "concat bad axis", model: opModel(13, "Concat", []int64{2}, nil, aInt("axis", 1)),
			err: `node "n" (Concat): axis 1 out of range [-1,0] for rank 1`},
		{name: "concat without axis", model: opModel(13, "Concat", []int64{2}, nil),
			err: `node "n" (Concat): missing attribute "axis"`},

		{name: "slice opset 6 attributes", model: opModel(6, "Slice", []int64{1, 5}, nil, aInts("starts", 0, 1), aInts("ends", 1, 1000)), want: `
input x float[1,5]
node "n" Slice {Axes:[0 1] Starts:[0 1] Ends:[1 5] Steps:[1 1]} (x) -> y float[1,4]
output y
`},
		{name: "slice inputs with negative steps and clamping", model: opModel(13, "Slice", []int64{4, 10},
			[]*onnx.Tensor{ints64("s", []int64{2}, -1, 100), ints64("e", []int64{2}, -1<<63, -100), ints64("a", []int64{2}, -1, 0), ints64("st", []int64{2}, -3, -1)}), want: `
input x float[4,10]
node "n" Slice {Axes:[0 1] Starts:[3 9] Ends:[-1 -1] Steps:[-1 -3]} (x) -> y float[4,4]
output y
`},
		{name: "slice int32 operands, axes omitted", model: opModel(13, "Slice", []int64{6},
			[]*onnx.Tensor{onnx.NewInt32("s", []int64{1}, []int32{1}), onnx.NewInt32("e", []int64{1}, []int32{-1}), nil, onnx.NewInt32("st", []int64{1}, []int32{2})}), want: `
input x float[6]
node "n" Slice {Axes:[0] Starts:[1] Ends:[5] Steps:[2]} (x) -> y float[2]
output y
`},
		{name: "slice step 0", model: opModel(13, "Slice", []int64{6},
			[]*onnx.Tensor{ints64("s", []int64{1}, 0), ints64("e", []int64{1}, 2), ints64("a", []int64{1}, 0), ints64("st", []int64{1}, 0)}),
			err: `node "n" (Slice): steps [0]: a step is 0`},
		{name: "slice bad axis", model: opModel(13, "Slice", []int64{6},
			[]*onnx.Tensor{ints64("s", []int64{1}, 0), ints64("e", []int64{1}, 2), ints64("a", []int64{1}, 1)}),
			err: `node "n" (Slice): axes [1]: axis 1 out of range [-1,0] for rank 1`},
		{name: "slice lengths differ", model: opModel(13, "Slice", []int64{6},
			[]*onnx.Tensor{ints64("s", []int64{2}, 0, 0), ints64("e", []int64{1}, 2)}),
			err: `node "n" (Slice): starts [0 0], ends [2], axes [], steps []: want as many of each`},
		{name: "slice computed starts", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 6)
			input(m, "s", onnx.Int64, 1)
			initializer(m, ints64("e", []int64{1}, 2))
			addNode(m, "Slice", "n", l("x", "s", "e"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (Slice) input 1: starts "s" must be a constant (an initializer, a Constant or a value computed from them)`},
		{name: "slice 2-D starts", model: opModel(13, "Slice", []int64{6},
			[]*onnx.Tensor{ints64("s", []int64{1, 1}, 0), ints64("e", []int64{1}, 2)}),
			err: `node "n" (Slice) input 1: starts "s": shape [1,1], want a 1-D tensor`},

		{name: "split opset 6 attribute", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float, 3)
			addNode(m, "Split", "s", l("x"), l("a", "b"), aInts("split", 2, 1))
			output(m, "a", "b")
			return m
		}, want: `
input x float[3]
node "s" Split {Axis:0 Sizes:[2 1]} (x) -> a float[2], b float[1]
output a
output b
`},
		{name: "split equal, negative axis", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 5, 6)
			addNode(m, "Split", "s", l("x"), l("a", "b", "c"), aInt("axis", -1))
			output(m, "a", "b", "c")
			return m
		}, want: `
input x float[5,6]
node "s" Split {Axis:1 Sizes:[2 2 2]} (x) -> a float[5,2], b float[5,2], c float[5,2]
output a
output b
output c
`},
		{name: "split input", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 5)
			initializer(m, ints64("sp", []int64{2}, 1, 4))
			addNode(m, "Split", "s", l("x", "sp"), l("a", "b"))
			output(m, "a", "b")
			return m
		}, want: `
input x float[5]
node "s" Split {Axis:0 Sizes:[1 4]} (x) -> a float[1], b float[4]
output a
output b
`},
		{name: "split num_outputs uneven", model: func() *onnx.Model {
			m := newModel(18)
			input(m, "x", onnx.Float, 7)
			addNode(m, "Split", "s", l("x"), l("a", "b", "c"), aInt("num_outputs", 3))
			output(m, "a", "b", "c")
			return m
		}, want: `
input x float[7]
node "s" Split {Axis:0 Sizes:[3 3 1]} (x) -> a float[3], b float[3], c float[1]
output a
output b
output c
`},
		{name: "split sizes do not sum", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 5)
			initializer(m, ints64("sp", []int64{2}, 1, 3))
			addNode(m, "Split", "s", l("x", "sp"), l("a", "b"))
			output(m, "a", "b")
			return m
		}, err: `node "s" (Split): split [1 3] sums to 4, the axis has dimension 5`},
		{name: "split unequal", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 5)
			addNode(m, "Split", "s", l("x"), l("a", "b"))
			output(m, "a", "b")
			return m
		}, err: `node "s" (Split): cannot split dimension 5 equally into 2 outputs`},
		{name: "split bad axis", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 4)
			addNode(m, "Split", "s", l("x"), l("a", "b"), aInt("axis", 1))
			output(m, "a", "b")
			return m
		}, err: `node "s" (Split): axis 1 out of range [-1,0] for rank 1`},

		{name: "squeeze all ones (opset 11)", model: unary(11, "Squeeze", []int64{1, 3, 1}), want: `
input x float[1,3,1]
node "n" Squeeze {Axes:[0 2]} (x) -> y float[3]
output y
`},
		{name: "squeeze axes input", model: opModel(13, "Squeeze", []int64{1, 3, 1}, []*onnx.Tensor{ints64("a", []int64{1}, -1)}), want: `
input x float[1,3,1]
node "n" Squeeze {Axes:[2]} (x) -> y float[1,3]
output y
`},
		{name: "squeeze a dimension that is not 1", model: unary(11, "Squeeze", []int64{1, 3}, aInts("axes", 1)),
			err: `node "n" (Squeeze): axes [1]: axis 1 of [1,3] has dimension 3, not 1`},
		{name: "squeeze bad axis", model: unary(11, "Squeeze", []int64{1, 3}, aInts("axes", 2)),
			err: `node "n" (Squeeze): axes [2]: axis 2 out of range [-2,1] for rank 2`},

		{name: "unsqueeze attribute", model: unary(11, "Unsqueeze", []int64{3}, aInts("axes", 0, -1)), want: `
input x float[3]
node "n" Unsqueeze {Axes:[0 2]} (x) -> y float[1,3,1]
output y
`},
		{name: "unsqueeze axes input", model: opModel(13, "Unsqueeze", []int64{1, 32}, []*onnx.Tensor{ints64("a", []int64{2}, 1, 2)}), want: `
input x float[1,32]
node "n" Unsqueeze {Axes:[1 2]} (x) -> y float[1,1,1,32]
output y
`},
		{name: "unsqueeze repeated axis", model: unary(11, "Unsqueeze", []int64{3}, aInts("axes", 0, -3)),
			err: `node "n" (Unsqueeze): axes [0 -3] name axis 0 twice`},
		{name: "unsqueeze bad axis", model: unary(11, "Unsqueeze", []int64{3}, aInts("axes", 2)),
			err: `node "n" (Unsqueeze): axes [2]: axis 2 out of range [-2,1] for rank 2`},
		{name: "unsqueeze without axes", model: opModel(13, "Unsqueeze", []int64{3}, nil),
			err: `node "n" (Unsqueeze) input 1: missing`},

		{name: "expand", model: opModel(13, "Expand", []int64{3, 1}, []*onnx.Tensor{ints64("s", []int64{3}, 2, 1, 4)}), want: `
input x float[3,1]
node "n" Expand {Shape:[2 3 4]} (x) -> y float[2,3,4]
output y
`},
		{name: "expand mismatched shapes", model: opModel(13, "Expand", []int64{3, 2}, []*onnx.Tensor{ints64("s", []int64{2}, 3, 4)}),
			err: `node "n" (Expand) input 1: shape [3 4] does not broadcast with [3,2]`},
		{name: "expand negative dimension", model: opModel(13, "Expand", []int64{3}, []*onnx.Tensor{ints64("s", []int64{1}, -3)}),
			err: `node "n" (Expand) input 1: shape [-3]: dimension -3 out of range`},

		{name: "tile", model: opModel(13, "Tile", []int64{2, 3}, []*onnx.Tensor{ints64("r", []int64{2}, 3, 1)}), want: `
input x float[2,3]
node "n" Tile {Repeats:[3 1]} (x) -> y float[6,3]
output y
`},
		{name: "tile wrong rank", model: opModel(13, "Tile", []int64{2, 3}, []*onnx.Tensor{ints64("r", []int64{1}, 3)}),
			err: `node "n" (Tile) input 1: repeats [3]: 1 entries, input rank is 2`},
		{name: "tile negative", model: opModel(13, "Tile", []int64{2}, []*onnx.Tensor{ints64("r", []int64{1}, -1)}),
			err: `node "n" (Tile) input 1: repeats [-1]: entry -1 out of range [0,268435456]`},
		{name: "tile huge", model: opModel(13, "Tile", []int64{2}, []*onnx.Tensor{ints64("r", []int64{1}, 1<<28)}),
			err: `node "n" (Tile): output 0: shape [536870912] has 536870912 elements, more than 268435456`},
	})
}
