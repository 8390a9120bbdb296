package onnx

// Typed access to a tensor's elements, and tensors built from Go values.

import (
	"encoding/binary"
	"fmt"
	"math"
)

// checkType returns an error unless t holds elements of type d.
func (t *Tensor) checkType(d DataType) error {
	if t.DType != d {
		return fmt.Errorf("tensor %q: element type %v, want %v", t.Name, t.DType, d)
	}
	if len(t.Raw)%d.ElemSize() != 0 {
		return fmt.Errorf("tensor %q: %d raw bytes is not a whole number of %v elements", t.Name, len(t.Raw), d)
	}
	return nil
}

// Float32s returns the elements of a float tensor.
func (t *Tensor) Float32s() ([]float32, error) {
	if err := t.checkType(Float); err != nil {
		return nil, err
	}
	v := make([]float32, len(t.Raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Raw[4*i:]))
	}
	return v, nil
}

// Float64s returns the elements of a double tensor.
func (t *Tensor) Float64s() ([]float64, error) {
	if err := t.checkType(Double); err != nil {
		return nil, err
	}
	v := make([]float64, len(t.Raw)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Raw[8*i:]))
	}
	return v, nil
}

// Int32s returns the elements of an int32 tensor.
func (t *Tensor) Int32s() ([]int32, error) {
	if err := t.checkType(Int32); err != nil {
		return nil, err
	}
	v := make([]int32, len(t.Raw)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(t.Raw[4*i:]))
	}
	return v, nil
}

// Int64s returns the elements of an int64 tensor.
func (t *Tensor) Int64s() ([]int64, error) {
	if err := t.checkType(Int64); err != nil {
		return nil, err
	}
	v := make([]int64, len(t.Raw)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(t.Raw[8*i:]))
	}
	return v, nil
}

// Float16Bits returns the elements of a float16 tensor as IEEE binary16
// bit patterns.
func (t *Tensor) Float16Bits() ([]uint16, error) {
	if err := t.checkType(Float16); err != nil {
		return nil, err
	}
	v := make([]uint16, len(t.Raw)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(t.Raw[2*i:])
	}
	return v, nil
}

// NewFloat32 returns a float tensor holding v with the given dims. It does
// not check that dims match len(v).
func NewFloat32(name string, dims []int64, v []float32) *Tensor {
	raw := make([]byte, 0, 4*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	return &Tensor{Name: name, DType: Float, Dims: append([]int64(nil), dims...), Raw: raw}
}

// Bools returns the elements of a bool tensor.
func (t *Tensor) Bools() ([]bool, error) {
	if err := t.checkType(Bool); err != nil {
		return nil, err
	}
	v := make([]bool, len(t.Raw))
	for i, b := range t.Raw {
		v[i] = b != 0
	}
	return v, nil
}

// NewInt64 returns an int64 tensor holding v with the given dims. It does
// not check that dims match len(v).
func NewInt64(name string, dims []int64, v []int64) *Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
	}
	return &Tensor{Name: name, DType: Int64, Dims: append([]int64(nil), dims...), Raw: raw}
}

// NewInt32 returns an int32 tensor holding v with the given dims. It does
// not check that dims match len(v).
func NewInt32(name string, dims []int64, v []int32) *Tensor {
	raw := make([]byte, 0, 4*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint32(raw, uint32(x))
	}
	return &Tensor{Name: name, DType: Int32, Dims: append([]int64(nil), dims...), Raw: raw}
}

// NewBool returns a bool tensor holding v with the given dims. It does not
// check that dims match len(v).
func NewBool(name string, dims []int64, v []bool) *Tensor {
	raw := make([]byte, len(v))
	for i, x := range v {
		if x {
			raw[i] = 1
		}
	}
	return &Tensor{Name: name, DType: Bool, Dims: append([]int64(nil), dims...), Raw: raw}
}
