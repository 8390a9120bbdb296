package graph

// The operators' parsed attributes (Node.Attrs), one struct per
// operator or family, with ONNX defaults filled in and axes made
// non-negative.

import "ipu.local/libs/onnx"

// Gemm is Y = Alpha * A' * B' + Beta * C, A' = transpose(A) if TransA.
// C (Inputs[2]) may be nil, and broadcasts unidirectionally to [M,N].
type Gemm struct {
	Alpha, Beta    float32
	TransA, TransB bool
}

// Transpose permutes axes: output axis i is input axis Perm[i].
type Transpose struct {
	Perm []int
}

// Cast converts to To; Saturate selects what an FP8 overflow gives
// (ONNX saturate attribute, opset 19 and later; true before).
type Cast struct {
	To       onnx.DataType
	Saturate bool
}

// Clip is Y = min(max(X, Min), Max). Absent bounds are the extremes of the
// input's type (as onnxruntime does: Inf clips to the largest finite
// value).
type Clip struct {
	Min, Max float64
}

// Softmax holds the axis of Softmax and LogSoftmax. With Coerce2D (opset
// < 13) the input is viewed as a matrix [prod(d[:Axis]), prod(d[Axis:])]
// and normalized along its rows; otherwise along the single axis Axis.
type Softmax struct {
	Axis     int
	Coerce2D bool
}

// LayerNorm normalizes over axes Axis..rank-1:
// Y = (X - mean) / sqrt(var + Epsilon) * Scale + Bias (Inputs: X, Scale,
// Bias or nil). The optional outputs Mean and InvStdDev have X's shape with
// the normalized axes set to 1, and type float.
type LayerNorm struct {
	Axis    int
	Epsilon float32
}

// Gelu is x*Phi(x) with the exact normal CDF, or its tanh approximation
// when Tanh is set.
type Gelu struct {
	Tanh bool
}

// Reduce lists the reduced axes, sorted; empty means the node is an
// identity (noop_with_empty_axes). Without an axes operand ONNX reduces
// every axis, and Axes lists them all.
type Reduce struct {
	Axes     []int
	KeepDims bool
}

// Flatten reshapes to [prod(d[:Axis]), prod(d[Axis:])].
type Flatten struct {
	Axis int
}

// Reshape holds the resolved output shape (0 and -1 already applied).
type Reshape struct {
	Shape []int64
}

// Gather takes slices of Inputs[0] along Axis at the indices Inputs[1]
// (int32 or int64, negative counting from the end): the output's shape
// is data[:Axis] + indices + data[Axis+1:]. Constant indices are checked
// in range when the graph is built; computed ones are the device's to
// check.
type Gather struct {
	Axis int
}

// Concat joins its inputs along Axis.
type Concat struct {
	Axis int
}

// Slice takes, along each axis Axes[i], the elements Starts[i] +
// k*Steps[i] for k = 0 .. count-1. Starts and Ends are already clamped
// as ONNX clamps them, so the count is ceil((Ends-Starts)/Steps) (at
// least 0): Starts in [0, d] and Ends in [0, d] for a positive step,
// Starts in [0, d-1] and Ends in [-1, d-1] for a negative one. Axes are
// distinct and non-negative; axes not listed are taken whole.
type Slice struct {
	Axes                []int
	Starts, Ends, Steps []int64
}

// Split cuts Inputs[0] along Axis into pieces of the given Sizes, one
// per output, summing to the axis' dimension.
type Split struct {
	Axis  int
	Sizes []int64
}

// Squeeze removes the listed axes (sorted, of dimension 1). Without an
// axes operand ONNX removes every axis of dimension 1, and Axes lists
// them.
type Squeeze struct {
	Axes []int
}

// Unsqueeze inserts axes of dimension 1 at the listed positions of the
// output (sorted).
type Unsqueeze struct {
	Axes []int
}

// Expand broadcasts Inputs[0] to Shape, the resolved output shape (the
// numpy broadcast of the input's shape and the shape operand).
type Expand struct {
	Shape []int64
}

// Tile repeats Inputs[0] Repeats[i] times along axis i.
type Tile struct {
	Repeats []int64
}

// LeakyRelu is x for x >= 0, Alpha*x otherwise.
type LeakyRelu struct {
	Alpha float32
}

// Elu is x for x > 0, Alpha*(exp(x)-1) otherwise.
type Elu struct {
	Alpha float32
}

// Selu is Gamma*x for x > 0, Gamma*(Alpha*exp(x) - Alpha) otherwise.
type Selu struct {
	Alpha, Gamma float32
}

// HardSigmoid is max(0, min(1, Alpha*x + Beta)).
type HardSigmoid struct {
	Alpha, Beta float32
}

// If runs one of two branches on the value of Inputs[0], a bool with one
// element; Outputs[i] is Then.Outputs[i] or Else.Outputs[i], of the same
// type and shape in both (see the package doc).
type If struct {
	Then, Else *Branch
}

// Branch is one side of an If: its own nodes in topological order, and
// the values it gives the If's outputs. Its values live in the graph's
// Values; a value computed outside the If (an outer-scope value) is read
// as the outer Value itself, and an output may be one (or a constant).
type Branch struct {
	Nodes   []*Node
	Outputs []*Value
}
