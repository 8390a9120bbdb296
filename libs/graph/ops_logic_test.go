package graph

import (
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// binaryModel builds y = op(a, b) over two inputs of the given types and
// shapes.
func binaryModel(v int64, op string, da onnx.DataType, sa []int64, db onnx.DataType, sb []int64, attrs ...onnx.Attr) func() *onnx.Model {
	return func() *onnx.Model {
		m := newModel(v)
		input(m, "a", da, sa...)
		input(m, "b", db, sb...)
		addNode(m, op, "n", l("a", "b"), l("y"), attrs...)
		output(m, "y")
		return m
	}
}

func TestBuildLogicAndMath(t *testing.T) {
	runBuildCases(t, []buildCase{
		{name: "where", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "c", onnx.Bool, 1, 4)
			input(m, "a", onnx.Float, 3, 1)
			initializer(m, f32("b", []int64{}, 0))
			addNode(m, "Where", "n", l("c", "a", "b"), l("y"))
			output(m, "y")
			return m
		}, want: `
input c bool[1,4]
input a float[3,1]
const b float[]
node "n" Where (c, a, b) -> y float[3,4]
output y
`},
		{name: "where float condition", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "c", onnx.Float, 4)
			input(m, "a", onnx.Float, 4)
			addNode(m, "Where", "n", l("c", "a", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (Where) input 0: element type float of "c" is not supported by Where`},
		{name: "where mismatched shapes", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "c", onnx.Bool, 4)
			input(m, "a", onnx.Float, 3)
			addNode(m, "Where", "n", l("c", "a", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (Where) input 1: shape [3] does not broadcast with [4]`},
		{name: "where mixed types", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "c", onnx.Bool, 4)
			input(m, "a", onnx.Float, 4)
			input(m, "b", onnx.Int64, 4)
			addNode(m, "Where", "n", l("c", "a", "b"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (Where) input 2: element type int64 does not match float`},

		{name: "greater or equal", model: binaryModel(13, "GreaterOrEqual", onnx.Float, []int64{1, 1}, onnx.Float, []int64{}), want: `
input a float[1,1]
input b float[]
node "n" GreaterOrEqual (a, b) -> y bool[1,1]
output y
`},
		{name: "equal on int64", model: binaryModel(13, "Equal", onnx.Int64, []int64{2, 1}, onnx.Int64, []int64{3}), want: `
input a int64[2,1]
input b int64[3]
node "n" Equal (a, b) -> y bool[2,3]
output y
`},
		{name: "equal on bool", model: binaryModel(13, "Equal", onnx.Bool, []int64{2}, onnx.Bool, []int64{2}), want: `
input a bool[2]
input b bool[2]
node "n" Equal (a, b) -> y bool[2]
output y
`},
		{name: "less legacy broadcast", model: binaryModel(6, "Less", onnx.Float, []int64{2, 3}, onnx.Float, []int64{3}, aInt("broadcast", 1)), want: `
input a float[2,3]
input b float[3]
node "n" Less (a, b) -> y bool[2,3]
output y
`},
		{name: "greater on bool", model: binaryModel(13, "Greater", onnx.Bool, []int64{2}, onnx.Bool, []int64{2}),
			err: `node "n" (Greater) input 0: element type bool of "a" is not supported by Greater`},
		{name: "less mixed types", model: binaryModel(13, "Less", onnx.Float, []int64{2}, onnx.Int64, []int64{2}),
			err: `node "n" (Less) input 1: element type int64 does not match float`},
		{name: "less or equal mismatched shapes", model: binaryModel(13, "LessOrEqual", onnx.Float, []int64{2}, onnx.Float, []int64{3}),
			err: `node "n" (LessOrEqual) input 1: shape [3] does not broadcast with [2]`},
		{name: "greater or equal before opset 12", model: binaryModel(11, "GreaterOrEqual", onnx.Float, []int64{2}, onnx.Float, []int64{2}),
			err: `node "n" (GreaterOrEqual): operator needs opset 12, the model imports 11`},
		{name: "and", model: binaryModel(13, "And", onnx.Bool, []int64{2, 2}, onnx.Bool, []int64{2}), want: `
input a bool[2,2]
input b bool[2]
node "n" And (a, b) -> y bool[2,2]
output y
`},
		{name: "or on float", model: binaryModel(13, "Or", onnx.Float, []int64{2}, onnx.Float, []int64{2}),
			err: `node "n" (Or) input 0: element type float of "a" is not supported by Or`},
		{name: "not", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Bool, 3)
			addNode(m, "Not", "n", l("a"), l("y"))
			output(m, "y")
			return m
		}, want: `
input a bool[3]
node "n" Not (a) -> y bool[3]
output y
`},
		{name: "not on float", model: unary(13, "Not", []int64{2}),
			err: `node "n" (Not) input 0: element type float of "x" is not supported by Not`},

		{name: "int64 arithmetic", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "a", onnx.Int64, 2, 2)
			input(m, "b", onnx.Int64, 2, 2)
			addNode(m, "Add", "s", l("a", "b"), l("c"))
			addNode(m, "Mul", "p", l("a", "c"), l("y"))
			output(m, "y")
			return m
		}, want: `
input a int64[2,2]
input b int64[2,2]
node "s" Add (a, b) -> c int64[2,2]
node "p" Mul (a, c) -> y int64[2,2]
output y
`},
		{name: "pow on int64", model: binaryModel(13, "Pow", onnx.Int64, []int64{2}, onnx.Int64, []int64{2}),
			err: `node "n" (Pow) input 0: element type int64 of "a" is not supported by Pow`},
		{name: "cast to int64 and bool", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 2)
			addNode(m, "Cast", "c", l("x"), l("i"), aInt("to", int64(onnx.Int64)))
			addNode(m, "Cast", "b", l("i"), l("y"), aInt("to", int64(onnx.Bool)))
			output(m, "y")
			return m
		}, want: `
input x float[2]
node "c" Cast {To:int64 Saturate:true} (x) -> i int64[2]
node "b" Cast {To:bool Saturate:true} (i) -> y bool[2]
output y
`},

		{name: "activations with defaults", model: func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Float, 2)
			addNode(m, "LeakyRelu", "a", l("x"), l("a"))
			addNode(m, "Elu", "b", l("a"), l("b"))
			addNode(m, "Selu", "c", l("b"), l("c"))
			addNode(m, "HardSigmoid", "d", l("c"), l("d"))
			addNode(m, "Softplus", "e", l("d"), l("e"))
			addNode(m, "HardSwish", "f", l("e"), l("f"))
			addNode(m, "Erf", "g", l("f"), l("g"))
			addNode(m, "Log", "h", l("g"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x float[2]
node "a" LeakyRelu {Alpha:0.01} (x) -> a float[2]
node "b" Elu {Alpha:1} (a) -> b float[2]
node "c" Selu {Alpha:1.6732632 Gamma:1.050701} (b) -> c float[2]
node "d" HardSigmoid {Alpha:0.2 Beta:0.5} (c) -> d float[2]
node "e" Softplus (d) -> e float[2]
node "f" HardSwish (e) -> f float[2]
node "g" Erf (f) -> g float[2]
node "h" Log (g) -> y float[2]
output y
`},
		{name: "activation attributes", model: func() *onnx.Model {
			m := newModel(6)
			input(m, "x", onnx.Float16, 2)
			addNode(m, "LeakyRelu", "a", l("x"), l("a"), aFloat("alpha", 0.5))
			addNode(m, "Elu", "b", l("a"), l("b"), aFloat("alpha", 2))
			addNode(m, "Selu", "c", l("b"), l("c"), aFloat("alpha", 1.5), aFloat("gamma", 3))
			addNode(m, "HardSigmoid", "d", l("c"), l("y"), aFloat("alpha", 0.25), aFloat("beta", 0.75))
			output(m, "y")
			return m
		}, want: `
input x float16[2]
node "a" LeakyRelu {Alpha:0.5} (x) -> a float16[2]
node "b" Elu {Alpha:2} (a) -> b float16[2]
node "c" Selu {Alpha:1.5 Gamma:3} (b) -> c float16[2]
node "d" HardSigmoid {Alpha:0.25 Beta:0.75} (c) -> y float16[2]
output y
`},
		{name: "leaky relu on int64", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Int64, 2)
			addNode(m, "LeakyRelu", "n", l("x"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (LeakyRelu) input 0: element type int64 of "x" is not supported by LeakyRelu`},
		{name: "elu alpha of the wrong type", model: unary(13, "Elu", []int64{2}, aInt("alpha", 1)),
			err: `node "n" (Elu): attribute "alpha": type int, want float`},
		{name: "erf on int32", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Int32, 2)
			addNode(m, "Erf", "n", l("x"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (Erf) input 0: element type int32 of "x" is not supported by Erf`},
		{name: "hardswish before opset 14", model: unary(13, "HardSwish", []int64{2}),
			err: `node "n" (HardSwish): operator needs opset 14, the model imports 13`},

		{name: "sum and mean broadcast", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "a", onnx.Float, 2, 1)
			input(m, "b", onnx.Float, 3)
			addNode(m, "Sum", "s", l("a", "b", "a"), l("s"))
			addNode(m, "Mean", "m", l("s"), l("y"))
			output(m, "y")
			return m
		}, want: `
input a float[2,1]
input b float[3]
node "s" Sum (a, b, a) -> s float[2,3]
node "m" Mean (s) -> y float[2,3]
output y
`},
		{name: "sum mismatched shapes before opset 8", model: binaryModel(6, "Sum", onnx.Float, []int64{2}, onnx.Float, []int64{1}),
			err: `node "n" (Sum) input 1: shape [1] does not match [2] (no broadcasting before opset 8)`},
		{name: "mean mismatched shapes", model: binaryModel(13, "Mean", onnx.Float, []int64{2}, onnx.Float, []int64{3}),
			err: `node "n" (Mean) input 1: shape [3] does not broadcast with [2]`},

		{name: "reduce max and min", model: func() *onnx.Model {
			m := newModel(18)
			input(m, "x", onnx.Int64, 2, 3)
			initializer(m, ints64("ax", []int64{1}, -1))
			addNode(m, "ReduceMax", "a", l("x", "ax"), l("a"), aInt("keepdims", 0))
			addNode(m, "ReduceMin", "b", l("a"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x int64[2,3]
node "a" ReduceMax {Axes:[1] KeepDims:false} (x) -> a int64[2]
node "b" ReduceMin {Axes:[0] KeepDims:true} (a) -> y int64[1]
output y
`},
		{name: "reduce max attribute axes before opset 18", model: unary(13, "ReduceMax", []int64{2, 3}, aInts("axes", 0)), want: `
input x float[2,3]
node "n" ReduceMax {Axes:[0] KeepDims:true} (x) -> y float[1,3]
output y
`},
		{name: "reduce min bad axis", model: unary(13, "ReduceMin", []int64{2, 3}, aInts("axes", 2)),
			err: `node "n" (ReduceMin): axes [2]: axis 2 out of range [-2,1] for rank 2`},
	})
}

func TestBuildConstantOperators(t *testing.T) {
	runBuildCases(t, []buildCase{
		{name: "shape start and end", model: func() *onnx.Model {
			m := newModel(15)
			input(m, "x", onnx.Float, 2, 3, 4)
			addNode(m, "Shape", "s", l("x"), l("s"), aInt("start", -2), aInt("end", 100))
			addNode(m, "Cast", "c", l("s"), l("y"), aInt("to", int64(onnx.Float)))
			output(m, "y")
			return m
		}, want: `
input x float[2,3,4]
const y float[2]
output y
`},
		{name: "constant of shape", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Int64, 2, 3)
			initializer(m, ints64("s", []int64{2}, 2, 3))
			addNode(m, "ConstantOfShape", "c", l("s"), l("k"), aTensor("value", ints64("", []int64{1}, 7)))
			addNode(m, "Add", "a", l("x", "k"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x int64[2,3]
const k int64[2,3]
node "a" Add (x, k) -> y int64[2,3]
output y
`},
		{name: "constant of shape default float zero", model: func() *onnx.Model {
			m := newModel(13)
			initializer(m, ints64("s", []int64{1}, 3))
			addNode(m, "ConstantOfShape", "c", l("s"), l("y"))
			output(m, "y")
			return m
		}, want: `
const y float[3]
output y
`},
		{name: "constant of shape computed", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "s", onnx.Int64, 1)
			addNode(m, "ConstantOfShape", "c", l("s"), l("y"))
			output(m, "y")
			return m
		}, err: `node "c" (ConstantOfShape) input 0: shape "s" must be a constant (an initializer, a Constant or a value computed from them)`},
		{name: "constant of shape negative", model: func() *onnx.Model {
			m := newModel(13)
			initializer(m, ints64("s", []int64{1}, -3))
			addNode(m, "ConstantOfShape", "c", l("s"), l("y"))
			output(m, "y")
			return m
		}, err: `node "c" (ConstantOfShape) input 0: shape [-3] has a negative dimension`},
		{name: "constant of shape two values", model: func() *onnx.Model {
			m := newModel(13)
			initializer(m, ints64("s", []int64{1}, 3))
			addNode(m, "ConstantOfShape", "c", l("s"), l("y"), aTensor("value", ints64("", []int64{2}, 7, 8)))
			output(m, "y")
			return m
		}, err: `node "c" (ConstantOfShape): value has shape [2], want one element`},
		{name: "range", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Int64, 4)
			initializer(m, ints64("a", []int64{}, 10))
			initializer(m, ints64("b", []int64{}, 2))
			initializer(m, ints64("d", []int64{}, -2))
			addNode(m, "Range", "r", l("a", "b", "d"), l("r"))
			addNode(m, "Add", "n", l("x", "r"), l("y"))
			output(m, "y")
			return m
		}, want: `
input x int64[4]
const r int64[4]
node "n" Add (x, r) -> y int64[4]
output y
`},
		{name: "range computed limit", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "b", onnx.Int64)
			initializer(m, ints64("a", []int64{}, 0))
			addNode(m, "Range", "r", l("a", "b", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Range) input 1: limit "b" must be a constant (an initializer, a Constant or a value computed from them)`},
		{name: "range delta 0", model: func() *onnx.Model {
			m := newModel(13)
			initializer(m, ints64("a", []int64{}, 0))
			initializer(m, ints64("b", []int64{}, 3))
			addNode(m, "Range", "r", l("a", "b", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Range): delta is 0`},
		{name: "range mixed types", model: func() *onnx.Model {
			m := newModel(13)
			initializer(m, ints64("a", []int64{}, 0))
			initializer(m, f32("b", []int64{}, 3))
			addNode(m, "Range", "r", l("a", "b", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Range) input 1: limit "b": element type float does not match int64`},
		{name: "range of a vector", model: func() *onnx.Model {
			m := newModel(13)
			initializer(m, ints64("a", []int64{2}, 0, 1))
			addNode(m, "Range", "r", l("a", "a", "a"), l("y"))
			output(m, "y")
			return m
		}, err: `node "r" (Range) input 0: start "a" has shape [2], want a scalar`},
		{name: "double constant", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Float, 2)
			initializer(m, &onnx.Tensor{Name: "d", DType: onnx.Double, Dims: []int64{2}, Raw: make([]byte, 16)})
			addNode(m, "Add", "a", l("x", "d"), l("y"))
			output(m, "y")
			return m
		}, err: `node "a" (Add) input 1: constant "d": element type double is not supported by the device`},
	})
}

// TestBuildBadInputs: the remaining operators' refusals, each one line
// naming the node and, where one is at fault, the input.
func TestBuildBadInputs(t *testing.T) {
	intUnary := func(op string) func() *onnx.Model {
		return func() *onnx.Model {
			m := newModel(14)
			input(m, "x", onnx.Int64, 2)
			addNode(m, op, "n", l("x"), l("y"))
			output(m, "y")
			return m
		}
	}
	runBuildCases(t, []buildCase{
		{name: "shape with two inputs", model: opModel(13, "Shape", []int64{2}, []*onnx.Tensor{ints64("k", []int64{1}, 1)}),
			err: `node "n" (Shape): 2 inputs, want at most 1`},
		{name: "identity with two inputs", model: opModel(13, "Identity", []int64{2}, []*onnx.Tensor{ints64("k", []int64{1}, 1)}),
			err: `node "n" (Identity): 2 inputs, want at most 1`},
		{name: "equal mixed types", model: binaryModel(13, "Equal", onnx.Bool, []int64{2}, onnx.Int64, []int64{2}),
			err: `node "n" (Equal) input 1: element type int64 does not match bool`},
		{name: "equal on fp8", model: binaryModel(19, "Equal", onnx.Float8E4M3FN, []int64{2}, onnx.Float8E4M3FN, []int64{2}),
			err: `node "n" (Equal) input 0: element type float8e4m3fn of "a" is not supported by Equal`},
		{name: "and mismatched shapes", model: binaryModel(13, "And", onnx.Bool, []int64{2, 3}, onnx.Bool, []int64{2}),
			err: `node "n" (And) input 1: shape [2] does not broadcast with [2,3]`},
		{name: "log on int64", model: intUnary("Log"), err: `node "n" (Log) input 0: element type int64 of "x" is not supported by Log`},
		{name: "softplus on int64", model: intUnary("Softplus"), err: `node "n" (Softplus) input 0: element type int64 of "x" is not supported by Softplus`},
		{name: "hardsigmoid on int64", model: intUnary("HardSigmoid"), err: `node "n" (HardSigmoid) input 0: element type int64 of "x" is not supported by HardSigmoid`},
		{name: "hardswish on int64", model: intUnary("HardSwish"), err: `node "n" (HardSwish) input 0: element type int64 of "x" is not supported by HardSwish`},
		{name: "selu NaN alpha", model: unary(13, "Selu", []int64{2}, aFloat("alpha", float32(math.NaN()))),
			err: `node "n" (Selu): attribute "alpha" is NaN, want a finite value`},
		{name: "reduce max axis twice", model: unary(13, "ReduceMax", []int64{2, 3}, aInts("axes", 1, -1)),
			err: `node "n" (ReduceMax): axes [1 -1] name axis 1 twice`},
		{name: "reduce max on bool", model: func() *onnx.Model {
			m := newModel(13)
			input(m, "x", onnx.Bool, 2)
			addNode(m, "ReduceMax", "n", l("x"), l("y"))
			output(m, "y")
			return m
		}, err: `node "n" (ReduceMax) input 0: element type bool of "x" is not supported by ReduceMax`},
		{name: "sum of int64", model: binaryModel(13, "Sum", onnx.Int64, []int64{2}, onnx.Int64, []int64{2}),
			err: `node "n" (Sum) input 0: element type int64 of "a" is not supported by Sum`},
		{name: "gather wrong indices rank in a constant", model: opModel(13, "Gather", []int64{3}, []*onnx.Tensor{ints64("i", []int64{2, 2}, 0, 1, 2, 3)}),
			err: `node "n" (Gather) input 1: index 3 of "i" out of range [-3,2] for axis 0 of [3]`},
	})
}
