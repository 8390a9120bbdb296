package graph

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// MaxElements bounds the element count of any tensor of a graph. The
// device holds well under a gigabyte, so larger tensors can only come from
// a malformed or hostile model; refusing them keeps every size product in
// range and every host buffer allocatable.
const MaxElements = 1 << 28

// ShapeString formats a shape as "[3,4]" ("[]" for a scalar).
func ShapeString(s []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// NumElements returns the product of the dims (1 for a scalar). Shapes in
// a built graph never overflow it.
func NumElements(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// checkedElements returns the product of dims, or an error when a dim is
// negative or the product exceeds MaxElements.
func checkedElements(s []int64) (int64, error) {
	n := uint64(1)
	for _, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in %s", ShapeString(s))
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %s has more than %d elements", ShapeString(s), int64(MaxElements))
		}
		n = lo
	}
	if n > MaxElements {
		return 0, fmt.Errorf("shape %s has %d elements, more than %d", ShapeString(s), n, int64(MaxElements))
	}
	return int64(n), nil
}

// Strides returns the row-major element strides of a shape.
func Strides(s []int64) []int64 {
	st := make([]int64, len(s))
	acc := int64(1)
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// Broadcast returns the numpy (multidirectional) broadcast of shapes, or
// an error naming the first shape that does not fit.
func Broadcast(shapes ...[]int64) ([]int64, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for k, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			o := &out[off+i]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, &broadcastError{input: k, shape: s, with: out}
			}
		}
	}
	return out, nil
}

type broadcastError struct {
	input int
	shape []int64
	with  []int64
}

func (e *broadcastError) Error() string {
	return fmt.Sprintf("shape %s does not broadcast with %s", ShapeString(e.shape), ShapeString(e.with))
}

// Unidirectional reports whether shape s broadcasts to target without
// changing target (ONNX unidirectional broadcasting).
func Unidirectional(s, target []int64) bool {
	if len(s) > len(target) {
		return false
	}
	off := len(target) - len(s)
	for i, d := range s {
		if d != 1 && d != target[off+i] {
			return false
		}
	}
	return true
}

// BroadcastIndex maps the elements of out (row-major) to the elements of
// an input of shape in that broadcasts to out: it returns, per element of
// out, the input's element index. Used by evaluators; out must be the
// broadcast shape.
func BroadcastIndex(in, out []int64) []int64 {
	n := NumElements(out)
	idx := make([]int64, n)
	inSt := Strides(in)
	// Stride of each output axis in the input: 0 where the input
	// broadcasts (missing or size-1 axis).
	st := make([]int64, len(out))
	off := len(out) - len(in)
	for i := range in {
		if in[i] != 1 {
			st[off+i] = inSt[i]
		}
	}
	counter := make([]int64, len(out))
	var cur int64
	for e := int64(0); e < n; e++ {
		idx[e] = cur
		for ax := len(out) - 1; ax >= 0; ax-- {
			counter[ax]++
			cur += st[ax]
			if counter[ax] < out[ax] {
				break
			}
			cur -= st[ax] * counter[ax]
			counter[ax] = 0
		}
	}
	return idx
}

func equalShapes(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// normAxis maps axis in [-rank, rank) (or [-rank, rank] when inclusive) to
// its non-negative form.
func normAxis(axis int64, rank int, inclusive bool) (int, error) {
	hi := int64(rank)
	if inclusive {
		hi++
	}
	if axis < -int64(rank) || axis >= hi {
		if inclusive {
			return 0, fmt.Errorf("axis %d out of range [%d,%d] for rank %d", axis, -rank, rank, rank)
		}
		return 0, fmt.Errorf("axis %d out of range [%d,%d] for rank %d", axis, -rank, rank-1, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}
