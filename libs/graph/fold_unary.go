package graph

// Folding of the float functions the device computes exactly so (fmath:
// the exact value rounded once, the same on every host), of Abs and Neg,
// and of Max and Min of integers.

import (
	"encoding/binary"
	"math"

	"ipu.local/libs/fmath"
	"ipu.local/libs/onnx"
)

// canonNaN is the NaN the device's arithmetic writes.
const canonNaN = 0x7FC00000

// unaryFolds are the float functions folded, each as the device's
// instruction computes it; bits marks those that only touch the sign
// bit (a NaN keeps its payload).
var unaryFolds = map[string]struct {
	f    func(float32) float32
	bits bool
}{
	"Exp": {fmath.Exp, false}, "Log": {fmath.Log, false}, "Tanh": {fmath.Tanh, false}, "Erf": {fmath.Erf, false},
	"Sin": {fmath.Sin, false}, "Cos": {fmath.Cos, false},
	"Sqrt": {func(x float32) float32 { return float32(math.Sqrt(float64(x))) }, false},
	"Neg":  {func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) ^ 0x80000000) }, true},
	"Abs":  {func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0x80000000) }, true},
}

// evalUnary folds a float function of a float constant, and of a
// float16 one as the device computes it (codegen.Unary: in FP32, rounded
// once to FP16; Neg and Abs of float16 stay on the device, whose
// conversion quiets a NaN).
func evalUnary(n *Node) ([]*onnx.Tensor, error) {
	x := n.Inputs[0].Const
	u, ok := unaryFolds[n.Op]
	if ok && !u.bits && x.DType == onnx.Float16 && len(x.Raw)/2 <= maxFoldFloats {
		v := halfFloats(x)
		for i, a := range v {
			v[i] = u.f(a)
		}
		return []*onnx.Tensor{float16Tensor(n.Outputs[0].Shape, v)}, nil
	}
	if !ok || x.DType != onnx.Float || len(x.Raw)/4 > maxFoldFloats {
		return nil, errNoFold
	}
	out := make([]byte, len(x.Raw))
	for i := 0; i+4 <= len(x.Raw); i += 4 {
		v := u.f(math.Float32frombits(binary.LittleEndian.Uint32(x.Raw[i:])))
		w := math.Float32bits(v)
		if v != v && !u.bits {
			w = canonNaN
		}
		binary.LittleEndian.PutUint32(out[i:], w)
	}
	return one1(out), nil
}

// evalMinMax folds Max and Min of integers (any number of inputs,
// broadcast).
func evalMinMax(n *Node) ([]*onnx.Tensor, error) {
	y := n.Outputs[0]
	if !isInt(y.DType) {
		return nil, errNoFold
	}
	var out []int64
	for k, v := range n.Inputs {
		a, err := constInts(v.Const)
		if err != nil {
			return nil, inputFail(k, "%v", err)
		}
		idx := BroadcastIndex(v.Shape, y.Shape)
		if out == nil {
			out = make([]int64, len(idx))
			for i, j := range idx {
				out[i] = a[j]
			}
			continue
		}
		for i, j := range idx {
			if n.Op == "Max" {
				out[i] = max(out[i], a[j])
			} else {
				out[i] = min(out[i], a[j])
			}
		}
	}
	return []*onnx.Tensor{intTensor("", y.DType, y.Shape, out)}, nil
}
