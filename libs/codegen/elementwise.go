package codegen

import "fmt"

// This file holds what the elementwise kernels (Unary, Binary, Select,
// IntBinary) share: the element types, the Operand of a two-operand
// kernel and the loads and stores of partial FP16 words.

// ElemType is the element type of an elementwise kernel's arrays.
type ElemType uint8

// Element types.
const (
	F32 ElemType = iota // FP32 (default)
	F16                 // FP16
	numElemTypes
)

func (t ElemType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// size returns the bytes of one element.
func (t ElemType) size() int {
	if t == F16 {
		return 2
	}
	return 4
}

// f16Pair loads the FP16 value h into the four lanes of the pair d.
func f16Pair(b *Builder, d AReg, h uint16) {
	b.LoadA(d, uint32(h)|uint32(h)<<16)
	b.Amov(d+1, d)
}

// f16Load loads the aligned word holding the rem (1..3) FP16 elements at
// p into the pair d: ld32 for up to 2, ld64 for 3; p does not move.
func f16Load(b *Builder, d AReg, p MReg, rem int) {
	if rem <= 2 {
		b.Ld32(d, p, 0)
	} else {
		b.Ld64(d, p, 0)
	}
}

// f16Store stores the first rem (1..3) FP16 lanes of the pair d at $m4,
// and no other byte: st32 of two lanes, emitMerge of an odd last one.
func f16Store(b *Builder, d AReg, rem int) {
	switch rem {
	case 1:
		b.Mfa(M8, d)
		emitMerge(b, 2)
	case 2:
		b.St32(d, sOut, 0)
	case 3:
		b.St32P(d, sOut, 4)
		b.Mfa(M8, d+1)
		emitMerge(b, 2)
	}
}

// Operand is an operand of a Binary: an array of elements at Addr
// (8-byte aligned), or one value broadcast to every element: read from
// Addr (Scalar, element-aligned) or given (Const: an FP32 value, for FP16
// exactly representable in FP16).
//
// In a 2-D Binary (R > 1) row r of an array operand is at Addr +
// esize*r*Stride (Stride 0: the same row for every row, a row broadcast;
// esize*Stride a multiple of 8), and PerRow makes the operand one element
// per row at Addr + esize*r*Stride (element-aligned, any Stride >= 0),
// broadcast along the row (a column broadcast). With R <= 1, or Stride 0,
// PerRow is Scalar.
type Operand struct {
	Addr   uint32
	Scalar bool
	Const  bool
	Value  float32 // Const

	Stride int  // row stride in elements (R > 1)
	PerRow bool // one element per row (R > 1)
}

func (o Operand) array() bool { return !o.Scalar && !o.Const && !o.PerRow }

// norm returns o with a PerRow that is one element for every row made
// Scalar.
func (o Operand) norm(rows int) Operand {
	if o.PerRow && (rows <= 1 || o.Stride == 0) {
		o.PerRow, o.Scalar = false, true
	}
	return o
}
