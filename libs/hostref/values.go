package hostref

// Typed storage of values: the float types as float64 slices, int32,
// int64 and bool as int64 slices (bools 0 or 1), so that integers flow
// through the reference exactly.

import (
	"encoding/binary"
	"fmt"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// isIntType reports whether values of type d are held as integers.
func isIntType(d onnx.DataType) bool {
	return d == onnx.Int32 || d == onnx.Int64 || d == onnx.Bool
}

// data is one value's elements: f for the float types, i for int32,
// int64 and bool. Exactly one is non-nil once computed (an empty
// tensor has an empty, non-nil slice).
type data struct {
	f []float64
	i []int64
}

func floatData(v []float64) data { return data{f: nonNilF(v)} }
func intData(v []int64) data     { return data{i: nonNilI(v)} }

func nonNilF(v []float64) []float64 {
	if v == nil {
		return []float64{}
	}
	return v
}

func nonNilI(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

// clone copies a value's elements.
func (d data) clone() data {
	if d.i != nil {
		return data{i: append([]int64{}, d.i...)}
	}
	return data{f: append([]float64{}, d.f...)}
}

// length is the element count.
func (d data) length() int {
	if d.i != nil {
		return len(d.i)
	}
	return len(d.f)
}

// decodeInts returns the elements of an int32, int64 or bool tensor.
func decodeInts(t *onnx.Tensor) ([]int64, error) {
	switch t.DType {
	case onnx.Int64:
		v, err := t.Int64s()
		return nonNilI(v), err
	case onnx.Int32:
		v, err := t.Int32s()
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, nil
	case onnx.Bool:
		v, err := t.Bools()
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(v))
		for i, b := range v {
			if b {
				out[i] = 1
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: element type %v is not an integer type", t.Name, t.DType)
}

// decode returns a tensor's elements, held as its type is.
func decode(t *onnx.Tensor) (data, error) {
	if isIntType(t.DType) {
		v, err := decodeInts(t)
		return data{i: v}, err
	}
	v, err := graph.DecodeFloats(t)
	return data{f: nonNilF(v)}, err
}

// encodeInts returns a tensor of type d (int32, int64 or bool) holding
// v; int32 elements wrap as two's complement, bools are v != 0.
func encodeInts(name string, d onnx.DataType, shape []int64, v []int64) (*onnx.Tensor, error) {
	t := &onnx.Tensor{Name: name, DType: d, Dims: append([]int64{}, shape...)}
	switch d {
	case onnx.Int64:
		t.Raw = make([]byte, 0, 8*len(v))
		for _, x := range v {
			t.Raw = binary.LittleEndian.AppendUint64(t.Raw, uint64(x))
		}
	case onnx.Int32:
		t.Raw = make([]byte, 0, 4*len(v))
		for _, x := range v {
			t.Raw = binary.LittleEndian.AppendUint32(t.Raw, uint32(x))
		}
	case onnx.Bool:
		t.Raw = make([]byte, len(v))
		for i, x := range v {
			if x != 0 {
				t.Raw[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("tensor %q: element type %v is not an integer type", name, d)
	}
	return t, nil
}

// wrapInt gives x as an element of type d: int32 wraps as two's
// complement, bool is x != 0.
func wrapInt(x int64, d onnx.DataType) int64 {
	switch d {
	case onnx.Int32:
		return int64(int32(x))
	case onnx.Bool:
		if x != 0 {
			return 1
		}
		return 0
	}
	return x
}

// toFloats returns integers as float64 (exact up to 2^53).
func toFloats(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
