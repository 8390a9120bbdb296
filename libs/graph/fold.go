package graph

// Constant folding during Build: a node whose inputs are all constant is
// evaluated here and its outputs become constants.
//
// What folds:
//
//   - data movement, any element type, up to maxFoldElements and
//     maxFoldBytes per output: Identity, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
//     Gather, Slice, Split, Concat, Expand, Tile, Where;
//   - Cast between float, float16, bool, int32 and int64 (not to FP8; a
//     float to an integer as the device casts it: a NaN 0, beyond int32
//     saturated);
//   - comparisons and logic: Equal, Greater, GreaterOrEqual, Less,
//     LessOrEqual, Not, And, Or, Xor;
//   - Add, Sub, Mul and Div on int32 and int64 (two's complement
//     wrap-around; Div truncates toward zero, as onnxruntime does; a
//     division by zero is an error) and on float (float32 arithmetic,
//     one rounding per operation, Div by the device's sequence: see
//     div32), up to maxFoldFloats elements;
//   - Floor, Ceil, Round and Sign on float (exact; a NaN keeps its bits
//     as on the device, Sign's is +0), up to maxFoldFloats elements;
//   - Exp, Log, Tanh, Erf, Sin, Cos and Sqrt on float as the device's
//     instructions compute them (fmath: the exact value rounded once,
//     the canonical NaN), Neg and Abs on float (the sign bit) and on
//     integers (built as Sub and Max), Max and Min on integers, up to
//     maxFoldFloats elements (fold_unary.go);
//   - Add, Sub, Mul, Div and those functions (not Neg and Abs) on
//     float16 as the device computes them: in FP32, rounded once to FP16
//     (for Add, Sub and Mul the same bits as the f16v4 instructions'
//     single rounding), a NaN the canonical 0x7e00 (a batch
//     normalization's scale and bias in an FP16 model).
//
// Other float math (Sigmoid, Pow, MatMul, ...) stays on the device: the
// folder computes only what it can compute
// exactly as the device does, and what exporters write for shapes and
// masks. Shape, ConstantOfShape, Range and If on a constant condition
// are folded by their builders.

import (
	"errors"
	"fmt"
	"strings"

	"ipu.local/libs/onnx"
)

// maxFoldFloats bounds the float arithmetic folded: a larger float
// computation on constants is left to the device.
const maxFoldFloats = 1 << 20

// errNoFold says the folder does not evaluate a node (its types or
// values); the node stays in the graph.
var errNoFold = errors.New("not folded")

var foldable = map[string]bool{
	"Identity": true, "Reshape": true, "Flatten": true, "Squeeze": true, "Unsqueeze": true,
	"Transpose": true, "Gather": true, "Slice": true, "Split": true, "Concat": true,
	"Expand": true, "Tile": true, "Where": true, "Cast": true,
	"Equal": true, "Greater": true, "GreaterOrEqual": true, "Less": true, "LessOrEqual": true,
	"Not": true, "And": true, "Or": true, "Xor": true,
	"Add": true, "Sub": true, "Mul": true, "Div": true,
	"Floor": true, "Ceil": true, "Round": true, "Sign": true,
	"Exp": true, "Log": true, "Tanh": true, "Erf": true, "Sin": true, "Cos": true, "Sqrt": true,
	"Neg": true, "Abs": true, "Max": true, "Min": true,
}

// fold evaluates the node c built when its inputs are all constant, and
// reports whether it did.
func (b *builder) fold(c *nodeCtx) (bool, error) {
	n := c.node
	if !foldable[n.Op] {
		return false, nil
	}
	for _, v := range n.Inputs {
		if v == nil || v.Const == nil {
			return false, nil
		}
	}
	for _, v := range n.Outputs {
		if v != nil && (v.NumElements() > maxFoldElements || v.NumElements()*int64(v.DType.ElemSize()) > maxFoldBytes) {
			return false, nil
		}
	}
	outs, err := evalNode(n)
	if errors.Is(err, errNoFold) {
		return false, nil
	}
	if err != nil {
		return false, c.opErr(err)
	}
	var names []string
	for k, v := range n.Outputs {
		if v == nil {
			continue
		}
		t := outs[k]
		t.Name, t.DType, t.Dims = v.Name, v.DType, copyShape(v.Shape)
		v.Const, v.Producer = t, nil
		names = append(names, valueString(v))
	}
	b.g.Folded = append(b.g.Folded, Rewrite{Node: c.name, What: fmt.Sprintf("%s folded: %s", n.Op, strings.Join(names, ", "))})
	return true, nil
}

// evalNode computes the outputs of n from its constant inputs: tensors
// with the outputs' data (names and dims are the caller's to set).
func evalNode(n *Node) ([]*onnx.Tensor, error) {
	x := n.Inputs[0].Const
	switch n.Op {
	case "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze":
		return []*onnx.Tensor{{Raw: x.Raw}}, nil
	case "Transpose", "Slice", "Expand", "Tile", "Split":
		return evalMove(n)
	case "Gather":
		return evalGather(n)
	case "Concat":
		return evalConcat(n), nil
	case "Where":
		return evalWhere(n), nil
	case "Cast":
		return evalCast(n)
	case "Not":
		out := make([]byte, len(x.Raw))
		for i, b := range x.Raw {
			if b == 0 {
				out[i] = 1
			}
		}
		return []*onnx.Tensor{{Raw: out}}, nil
	case "Add", "Sub", "Mul", "Div":
		return evalArith(n)
	case "Floor", "Ceil", "Round", "Sign":
		return evalRounding(n)
	case "Max", "Min":
		return evalMinMax(n)
	case "Exp", "Log", "Tanh", "Erf", "Sin", "Cos", "Sqrt", "Neg", "Abs":
		return evalUnary(n)
	}
	return evalCompare(n)
}

// one1 wraps a single output's data.
func one1(raw []byte) []*onnx.Tensor { return []*onnx.Tensor{{Raw: raw}} }

// pick gathers elements of t (of size bytes each) at the indices idx.
func pick(t *onnx.Tensor, idx []int64) []byte {
	size := t.DType.ElemSize()
	raw := make([]byte, len(idx)*size)
	for i, j := range idx {
		copy(raw[i*size:(i+1)*size], t.Raw[int(j)*size:])
	}
	return raw
}

// indexMap returns, for each element of a tensor of shape out in
// row-major order, the sum over axes of offset[axis][coordinate].
func indexMap(out []int64, offset [][]int64) []int64 {
	n := NumElements(out)
	idx := make([]int64, n)
	if n == 0 {
		return idx
	}
	coord := make([]int64, len(out))
	var cur int64
	for _, o := range offset {
		cur += o[0]
	}
	for e := int64(0); e < n; e++ {
		idx[e] = cur
		for ax := len(out) - 1; ax >= 0; ax-- {
			cur -= offset[ax][coord[ax]]
			coord[ax]++
			if coord[ax] < out[ax] {
				cur += offset[ax][coord[ax]]
				break
			}
			coord[ax] = 0
			cur += offset[ax][0]
		}
	}
	return idx
}

// evalMove evaluates the operators that read each output element from one
// input element, through an index map per output.
func evalMove(n *Node) ([]*onnx.Tensor, error) {
	x := n.Inputs[0]
	st := Strides(x.Shape)
	var outs []*onnx.Tensor
	for k, y := range n.Outputs {
		if y == nil {
			outs = append(outs, nil)
			continue
		}
		offset := make([][]int64, len(y.Shape))
		for ax, d := range y.Shape {
			o := make([]int64, max(d, 1))
			for i := int64(0); i < d; i++ {
				o[i] = moveOffset(n, k, ax, i, x.Shape, st)
			}
			offset[ax] = o
		}
		outs = append(outs, &onnx.Tensor{Raw: pick(x.Const, indexMap(y.Shape, offset))})
	}
	return outs, nil
}

// moveOffset is the input element offset that coordinate i of output
// axis ax of output k contributes.
func moveOffset(n *Node, k, ax int, i int64, in, st []int64) int64 {
	switch a := n.Attrs.(type) {
	case *Transpose:
		return i * st[a.Perm[ax]]
	case *Slice:
		for j, sa := range a.Axes {
			if sa == ax {
				return (a.Starts[j] + i*a.Steps[j]) * st[ax]
			}
		}
		return i * st[ax]
	case *Expand:
		off := len(a.Shape) - len(in)
		if ax < off || in[ax-off] == 1 {
			return 0
		}
		return i * st[ax-off]
	case *Tile:
		return (i % in[ax]) * st[ax]
	case *Split:
		if ax != a.Axis {
			return i * st[ax]
		}
		var start int64
		for _, s := range a.Sizes[:k] {
			start += s
		}
		return (start + i) * st[ax]
	}
	return 0
}

func evalGather(n *Node) ([]*onnx.Tensor, error) {
	data, idxV := n.Inputs[0], n.Inputs[1]
	axis := n.Attrs.(*Gather).Axis
	indices, err := constInts(idxV.Const)
	if err != nil {
		return nil, inputFail(1, "%v", err)
	}
	d := data.Shape[axis]
	outer := NumElements(data.Shape[:axis])
	inner := NumElements(data.Shape[axis+1:])
	idx := make([]int64, 0, outer*int64(len(indices))*inner)
	for o := int64(0); o < outer; o++ {
		for _, j := range indices {
			if j < -d || j >= d {
				return nil, inputFail(1, "index %d of %q out of range [%d,%d]", j, idxV.Name, -d, d-1)
			}
			if j < 0 {
				j += d
			}
			base := (o*d + j) * inner
			for i := int64(0); i < inner; i++ {
				idx = append(idx, base+i)
			}
		}
	}
	return one1(pick(data.Const, idx)), nil
}

func evalConcat(n *Node) []*onnx.Tensor {
	axis := n.Attrs.(*Concat).Axis
	y := n.Outputs[0]
	size := int64(y.DType.ElemSize())
	outer := NumElements(y.Shape[:axis])
	raw := make([]byte, 0, NumElements(y.Shape)*size)
	for o := int64(0); o < outer; o++ {
		for _, v := range n.Inputs {
			chunk := NumElements(v.Shape[axis:]) * size
			raw = append(raw, v.Const.Raw[o*chunk:(o+1)*chunk]...)
		}
	}
	return one1(raw)
}

func evalWhere(n *Node) []*onnx.Tensor {
	out := n.Outputs[0].Shape
	ic := BroadcastIndex(n.Inputs[0].Shape, out)
	ix := BroadcastIndex(n.Inputs[1].Shape, out)
	iy := BroadcastIndex(n.Inputs[2].Shape, out)
	cond, x, y := n.Inputs[0].Const.Raw, n.Inputs[1].Const.Raw, n.Inputs[2].Const.Raw
	size := n.Outputs[0].DType.ElemSize()
	raw := make([]byte, len(ic)*size)
	for i := range ic {
		src, j := y, iy[i]
		if cond[ic[i]] != 0 {
			src, j = x, ix[i]
		}
		copy(raw[i*size:(i+1)*size], src[int(j)*size:])
	}
	return one1(raw)
}
