package graph

import (
	"encoding/binary"
	"fmt"
	"math"

	"ipu.local/libs/onnx"
)

// doubleMsg is how Build refuses a DOUBLE tensor without
// BuildOptions.DowncastFP64.
const doubleMsg = "element type double is not supported by the device"

// runtimeType reports whether d may be the element type of a value: the
// float types the device computes in, and bool, int32 and int64 (ids,
// shapes, masks).
func runtimeType(d onnx.DataType) bool {
	switch d {
	case onnx.Float, onnx.Float16, onnx.Float8E4M3FN, onnx.Float8E4M3FNUZ, onnx.Float8E5M2, onnx.Float8E5M2FNUZ,
		onnx.Bool, onnx.Int32, onnx.Int64:
		return true
	}
	return false
}

// isFloat reports whether arithmetic computes on d (float or float16:
// ONNX arithmetic has no FP8).
func isFloat(d onnx.DataType) bool { return d == onnx.Float || d == onnx.Float16 }

// isInt reports whether d is one of the integer types of a value.
func isInt(d onnx.DataType) bool { return d == onnx.Int32 || d == onnx.Int64 }

// isNumeric reports whether d is a float or integer type arithmetic and
// comparisons compute on.
func isNumeric(d onnx.DataType) bool { return isFloat(d) || isInt(d) }

// valueType returns the element type a tensor declared of type d gets:
// d itself, float for double under DowncastFP64 (recording name), or an
// error.
func (b *builder) valueType(name string, d onnx.DataType) (onnx.DataType, error) {
	switch {
	case d == onnx.Double && b.opt.DowncastFP64:
		b.downcast[name] = true
		return onnx.Float, nil
	case d == onnx.Double:
		return 0, fmt.Errorf("%s", doubleMsg)
	case !runtimeType(d):
		return 0, fmt.Errorf("element type %v is not supported", d)
	}
	return d, nil
}

// downcastTensor returns a DOUBLE tensor's data as FLOAT, each element
// rounded to nearest (Go's float64 to float32 conversion), and records
// the tensor's name.
func (b *builder) downcastTensor(t *onnx.Tensor) (*onnx.Tensor, error) {
	v, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	b.downcast[t.Name] = true
	return onnx.NewFloat32(t.Name, t.Dims, f), nil
}

// Typed access to constant data, for folding and for operands.

// constInts returns the elements of an int32 or int64 tensor as int64.
func constInts(t *onnx.Tensor) ([]int64, error) {
	switch t.DType {
	case onnx.Int64:
		return t.Int64s()
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
		if _, err := t.Bools(); err != nil {
			return nil, err
		}
		out := make([]int64, len(t.Raw))
		for i, x := range t.Raw {
			if x != 0 {
				out[i] = 1
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: element type %v is not an integer type", t.Name, t.DType)
}

// intTensor encodes integers (or bools, as 0 and 1) as a tensor of type
// d; int32 elements wrap as two's complement.
func intTensor(name string, d onnx.DataType, dims []int64, v []int64) *onnx.Tensor {
	size := d.ElemSize()
	raw := make([]byte, len(v)*size)
	for i, x := range v {
		switch d {
		case onnx.Int64:
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
		case onnx.Int32:
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
		case onnx.Bool:
			if x != 0 {
				raw[i] = 1
			}
		}
	}
	return &onnx.Tensor{Name: name, DType: d, Dims: append([]int64{}, dims...), Raw: raw}
}

// float32Tensor encodes float32 elements, NaNs made the canonical quiet
// NaN the device gives.
func float32Tensor(name string, dims []int64, v []float32) *onnx.Tensor {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		bits := math.Float32bits(x)
		if x != x {
			bits = 0x7FC00000
		}
		binary.LittleEndian.PutUint32(raw[4*i:], bits)
	}
	return &onnx.Tensor{Name: name, DType: onnx.Float, Dims: append([]int64{}, dims...), Raw: raw}
}
