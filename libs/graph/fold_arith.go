package graph

// Folding of arithmetic, comparisons and casts (see fold.go for what
// folds).

import (
	"encoding/binary"
	"math"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// div32 is the device's FP32 division (libs/codegen, BinaryOp Div): the
// reciprocal, a product, and one Newton correction with fused
// multiply-adds. It is the correctly rounded quotient for normal
// operands and quotients, and a*(1/b) rounded where the correction gives
// NaN (Inf and zero operands).
func div32(a, b float32) float32 {
	z := float32(1 / b)
	q := float32(a * z)
	r := numfmt.FMA32(-q, b, a)
	q2 := numfmt.FMA32(r, z, q)
	if q2 != q2 {
		return q
	}
	return q2
}

// arith32 is one FP32 operation, rounded once (float32 operands give a
// float32 result in Go; the explicit conversions keep the compiler from
// fusing anything).
func arith32(op string, a, b float32) float32 {
	switch op {
	case "Add":
		return float32(a + b)
	case "Sub":
		return float32(a - b)
	case "Mul":
		return float32(a * b)
	}
	return div32(a, b)
}

// evalArith folds Add, Sub, Mul and Div on integers and float.
func evalArith(n *Node) ([]*onnx.Tensor, error) {
	y := n.Outputs[0]
	ia := BroadcastIndex(n.Inputs[0].Shape, y.Shape)
	ib := BroadcastIndex(n.Inputs[1].Shape, y.Shape)
	switch {
	case isInt(y.DType):
		a, err := constInts(n.Inputs[0].Const)
		if err != nil {
			return nil, inputFail(0, "%v", err)
		}
		b, err := constInts(n.Inputs[1].Const)
		if err != nil {
			return nil, inputFail(1, "%v", err)
		}
		out := make([]int64, len(ia))
		for i := range out {
			x, z := a[ia[i]], b[ib[i]]
			switch n.Op {
			case "Add":
				out[i] = x + z
			case "Sub":
				out[i] = x - z
			case "Mul":
				out[i] = x * z
			default:
				if z == 0 {
					return nil, inputFail(1, "division by zero in constant %q", n.Inputs[1].Name)
				}
				out[i] = x / z
			}
		}
		return []*onnx.Tensor{intTensor("", y.DType, y.Shape, out)}, nil
	case y.DType == onnx.Float && len(ia) <= maxFoldFloats:
		a, err := n.Inputs[0].Const.Float32s()
		if err != nil {
			return nil, inputFail(0, "%v", err)
		}
		b, err := n.Inputs[1].Const.Float32s()
		if err != nil {
			return nil, inputFail(1, "%v", err)
		}
		out := make([]float32, len(ia))
		for i := range out {
			out[i] = arith32(n.Op, a[ia[i]], b[ib[i]])
		}
		return []*onnx.Tensor{float32Tensor("", y.Shape, out)}, nil
	case y.DType == onnx.Float16 && len(ia) <= maxFoldFloats:
		// The device's FP16 Add, Sub and Mul (f16v4: the exact result
		// rounded once to FP16) equal the FP32 result rounded to FP16;
		// its Div is FP32's rounded to FP16 (codegen.Binary).
		a, b := halfFloats(n.Inputs[0].Const), halfFloats(n.Inputs[1].Const)
		if a == nil || b == nil {
			return nil, errNoFold
		}
		out := make([]float32, len(ia))
		for i := range out {
			out[i] = arith32(n.Op, a[ia[i]], b[ib[i]])
		}
		return []*onnx.Tensor{float16Tensor(y.Shape, out)}, nil
	}
	return nil, errNoFold
}

// halfFloats returns a float16 constant's elements as float32 (exact),
// nil for another type.
func halfFloats(t *onnx.Tensor) []float32 {
	if t.DType != onnx.Float16 {
		return nil
	}
	v := make([]float32, len(t.Raw)/2)
	for i := range v {
		v[i] = math.Float32frombits(numfmt.F16ToF32(binary.LittleEndian.Uint16(t.Raw[2*i:])))
	}
	return v
}

// canonNaN16 is the NaN the device's FP16 arithmetic writes.
const canonNaN16 = 0x7E00

// float16Tensor rounds FP32 results to a float16 constant as the device
// does (nearest even, overflow to Inf), a NaN the canonical one.
func float16Tensor(dims []int64, v []float32) *onnx.Tensor {
	raw := make([]byte, 2*len(v))
	for i, x := range v {
		h := uint16(canonNaN16)
		if x == x {
			h = numfmt.F32ToF16(math.Float32bits(x))
		}
		binary.LittleEndian.PutUint16(raw[2*i:], h)
	}
	return &onnx.Tensor{DType: onnx.Float16, Dims: append([]int64{}, dims...), Raw: raw}
}

// numbers decodes a constant as integers (ints, bools) or exact float64
// values (float types).
func numbers(t *onnx.Tensor) (ints []int64, floats []float64, err error) {
	if isInt(t.DType) || t.DType == onnx.Bool {
		ints, err = constInts(t)
		return ints, nil, err
	}
	floats, err = DecodeFloats(t)
	return nil, floats, err
}

// evalCompare folds Equal, Greater, GreaterOrEqual, Less, LessOrEqual,
// And and Or: bool outputs; a NaN compares false.
func evalCompare(n *Node) ([]*onnx.Tensor, error) {
	y := n.Outputs[0]
	ia := BroadcastIndex(n.Inputs[0].Shape, y.Shape)
	ib := BroadcastIndex(n.Inputs[1].Shape, y.Shape)
	ai, af, err := numbers(n.Inputs[0].Const)
	if err != nil {
		return nil, inputFail(0, "%v", err)
	}
	bi, bf, err := numbers(n.Inputs[1].Const)
	if err != nil {
		return nil, inputFail(1, "%v", err)
	}
	out := make([]byte, len(ia))
	for i := range out {
		var lt, eq, gt bool
		if ai != nil {
			x, z := ai[ia[i]], bi[ib[i]]
			lt, eq, gt = x < z, x == z, x > z
		} else {
			x, z := af[ia[i]], bf[ib[i]]
			lt, eq, gt = x < z, x == z, x > z
		}
		var r bool
		switch n.Op {
		case "Equal":
			r = eq
		case "Greater":
			r = gt
		case "GreaterOrEqual":
			r = gt || eq
		case "Less":
			r = lt
		case "LessOrEqual":
			r = lt || eq
		case "And":
			r = ai[ia[i]] != 0 && bi[ib[i]] != 0
		case "Or":
			r = ai[ia[i]] != 0 || bi[ib[i]] != 0
		case "Xor":
			r = (ai[ia[i]] != 0) != (bi[ib[i]] != 0)
		}
		if r {
			out[i] = 1
		}
	}
	return one1(out), nil
}

// evalCast folds casts between float, float16, bool, int32 and int64, as
// onnxruntime computes them: floats to integers truncate toward zero,
// integers wrap, anything non-zero (NaN included) is true.
func evalCast(n *Node) ([]*onnx.Tensor, error) {
	x, y := n.Inputs[0], n.Outputs[0]
	to := y.DType
	if !isInt(to) && to != onnx.Bool && !isFloat(to) {
		return nil, errNoFold
	}
	ints, floats, err := numbers(x.Const)
	if err != nil {
		return nil, errNoFold // FP8 sources and the like stay on the device
	}
	count := len(ints) + len(floats)
	switch {
	case isInt(to) || to == onnx.Bool:
		if floats != nil {
			ints = make([]int64, count)
			for i, f := range floats {
				switch {
				case to == onnx.Bool:
					if f != 0 {
						ints[i] = 1
					}
				default:
					ints[i] = truncInt32(f)
				}
			}
		}
		return []*onnx.Tensor{intTensor("", to, y.Shape, ints)}, nil
	case to == onnx.Float:
		out := make([]float32, count)
		for i := range out {
			if floats != nil {
				out[i] = float32(floats[i])
			} else {
				out[i] = float32(ints[i])
			}
		}
		t := onnx.NewFloat32("", y.Shape, out)
		return []*onnx.Tensor{t}, nil
	}
	raw := make([]byte, 2*count)
	for i := 0; i < count; i++ {
		var h uint16
		if floats != nil {
			h = numfmt.F64ToF16(floats[i])
		} else {
			h = numfmt.F64ToF16(float64(ints[i]))
		}
		raw[2*i], raw[2*i+1] = byte(h), byte(h>>8)
	}
	return one1(raw), nil
}

// roundings are the functions of Floor, Ceil, Round and Sign
// (onnxruntime's: +0 for zeros).
var roundings = map[string]func(float64) float64{"Floor": math.Floor, "Ceil": math.Ceil, "Round": math.RoundToEven,
	"Sign": func(x float64) float64 { return float64(b2i(x > 0) - b2i(x < 0)) }}

// evalRounding folds Floor, Ceil, Round and Sign of a float constant:
// exact, every float32 result an integer of at most x's magnitude (or
// x); a NaN keeps its bits (Sign's is +0). Float16 stays on the device.
func evalRounding(n *Node) ([]*onnx.Tensor, error) {
	x := n.Inputs[0].Const
	if x.DType != onnx.Float || len(x.Raw)/4 > maxFoldFloats {
		return nil, errNoFold
	}
	f := roundings[n.Op]
	out := make([]byte, len(x.Raw))
	for i := 0; i+4 <= len(x.Raw); i += 4 {
		w := binary.LittleEndian.Uint32(x.Raw[i:])
		if v := math.Float32frombits(w); v == v || n.Op == "Sign" {
			w = math.Float32bits(float32(f(float64(v))))
		}
		binary.LittleEndian.PutUint32(out[i:], w)
	}
	return one1(out), nil
}

// truncInt32 is the device's cast of a float to an integer (f32toi32,
// for int64 too, which it holds as int32): toward zero, a NaN 0, values
// beyond int32 its nearest end.
func truncInt32(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f <= math.MinInt32:
		return math.MinInt32
	case f >= math.MaxInt32:
		return math.MaxInt32
	}
	return int64(f)
}
