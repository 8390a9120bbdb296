package codegen

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// Select writes one operand of ONNX Where into Y where a condition says
// so and keeps Y's own value elsewhere:
//
//	WhenTrue:  Y[i] = C[i] != 0 ? V[i] : Y[i]
//	!WhenTrue: Y[i] = C[i] == 0 ? V[i] : Y[i]
//
// Where(c, a, b) is the two launches Select{C: c, V: a, WhenTrue: true}
// and Select{C: c, V: b} into one Y: each element is written by exactly
// one of them, so Y's prior contents do not matter. The condition is BOOL
// words (FP32 0.0 or 1.0, any non-zero bits true); V and Y are 4-byte
// elements (float, BOOL words, int32), copied bit for bit (f32v2sel: NaN
// payloads kept). C and V take every Operand form of Binary (arrays,
// Scalar, Const, PerRow, stride-0 rows), both may be broadcasts (Y is
// walked anyway), and R > 1 makes the kernel two-dimensional as Binary.
// Per pair of elements: the loads of the array operands, ld64 of Y,
// f32v2sel, st64.
//
// Type F16 makes V and Y FP16 (2-byte elements, copied bit for bit:
// V's halves are never converted), the condition staying BOOL words. The
// stream works in units of 4 elements (one 64-bit word of Y): per unit,
// two ld64 of C's words (C an array), each pair made 1.0 or 0 by its
// bits (f32v2sel with the pairs 1.0 and 0) and narrowed to two 16-bit
// lanes (f32v2tof16: 0x3c00 or 0), ld64 of V (an array), ld64 of Y,
// f16v4sel, st64: 10 issues with both arrays, 7 with C a broadcast, 9
// with V one. The N mod 4 last elements (last worker) load what they
// need (ld32 or ld64 of C, V and Y) and store only their halves of Y
// (st32 and a read-modify-write of an odd last half). A broadcast
// condition is made a mask quad once (Scalar, Const: in the setup) or
// per row (PerRow); a broadcast value is its FP16 bits repeated in four
// lanes, by integer operations (a NaN keeps its payload). Row starts are
// 8-byte aligned as for every 2-D stream (C's Stride even, V's and Y's
// multiples of 4); C and V may not both be PerRow.
type Select struct {
	WhenTrue bool
	N        int
	C, V     Operand
	Y        uint32
	Workers  int
	R        int // rows (0, 1: one)
	YStride  int // elements, R > 1
	Type     ElemType
}

const (
	selTrue  = 1
	selFalse = 2
)

func (p Select) binary() Binary {
	sel := uint8(selFalse)
	if p.WhenTrue {
		sel = selTrue
	}
	return Binary{N: p.N, A: p.C, B: p.V, Y: p.Y, Workers: p.Workers, Type: F32, R: p.R, YStride: p.YStride, sel: sel}
}

// Cost returns the kernel's cost, counted from its code.
func (p Select) Cost() (Cost, error) {
	if p.Type == F16 {
		s, err := p.stream16()
		if err == nil {
			err = s.check(nil)
		}
		if err != nil {
			return Cost{}, fmt.Errorf("select: %w", err)
		}
		return s.cost(), nil
	}
	if err := p.checkType(); err != nil {
		return Cost{}, err
	}
	return p.binary().Cost()
}

// checkType checks the FP32 select's type and operand forms: the
// stream takes one operand that is one element per row.
func (p Select) checkType() error {
	if p.Type != F32 {
		return fmt.Errorf("select: element type %v (want f32 or f16)", p.Type)
	}
	if p.C.norm(p.R).PerRow && p.V.norm(p.R).PerRow {
		return fmt.Errorf("select: both C and V are one element per row")
	}
	return nil
}

// EmitSelect emits the kernel at b's current position.
func EmitSelect(b *Builder, p Select) (Kernel, error) {
	if p.Type == F16 {
		s, err := p.stream16()
		if err == nil {
			err = s.check(b)
		}
		if err == nil {
			err = p.checkScalars16(b)
		}
		if err != nil {
			return Kernel{}, fmt.Errorf("select: %w", err)
		}
		return s.emit(b)
	}
	if err := p.checkType(); err != nil {
		return Kernel{}, err
	}
	return EmitBinary(b, p.binary())
}

// Registers of the FP16 select: the mask quad, C's two word pairs, V,
// Y, the result, the pairs 1.0 and 0 ($a14:$azero).
const (
	s16M   = A0
	s16C0  = A2
	s16C1  = A4
	s16V   = A6
	s16Y   = A8
	s16Out = A10
	s16One = A12
	s16Nil = A14
)

// stream16 is the FP16 select's stream.
func (p Select) stream16() (*stream, error) {
	if p.R < 0 {
		return nil, fmt.Errorf("row count %d is negative", p.R)
	}
	for _, x := range []struct {
		name string
		o    Operand
	}{{"C", p.C}, {"V", p.V}} {
		n := 0
		for _, f := range []bool{x.o.Scalar, x.o.Const, x.o.PerRow} {
			if f {
				n++
			}
		}
		if n > 1 {
			return nil, fmt.Errorf("operand %s has more than one of Scalar, Const and PerRow", x.name)
		}
	}
	C, V := p.C.norm(p.R), p.V.norm(p.R)
	if V.Const {
		v := math.Float32bits(V.Value)
		if numfmt.F16ToF32(numfmt.F32ToF16(v)) != v {
			return nil, fmt.Errorf("operand V: constant %g is not an FP16 value", V.Value)
		}
	}
	if C.PerRow && V.PerRow {
		return nil, fmt.Errorf("both C and V are one element per row")
	}
	s := &stream{n: p.N, unit: 4, workers: p.Workers, rows: p.R, output: array{"Y", p.Y, 2, p.YStride}}
	var cPtr, vPtr MReg
	if C.array() {
		cPtr = sIn0
		s.inputs = append(s.inputs, array{"C", C.Addr, 4, C.Stride})
	}
	if V.array() {
		vPtr = sIn0
		if C.array() {
			vPtr = sIn1
		}
		s.inputs = append(s.inputs, array{"V", V.Addr, 2, V.Stride})
	}
	// mask makes the mask quad from the condition pair in s16C0 (and,
	// with two, s16C1).
	mask := func(b *Builder, two bool) {
		b.Sel(isa.V2SEL, s16C0, s16C0, s16One, s16Nil)
		b.F1(isa.CVTFH, s16M, s16C0)
		if two {
			b.Sel(isa.V2SEL, s16C1, s16C1, s16One, s16Nil)
			b.F1(isa.CVTFH, s16M+1, s16C1)
		}
	}
	// quad repeats the half in the low 16 bits of $m8 (high bits zero)
	// in the four lanes of s16V.
	quad := func(b *Builder) {
		b.Shli(M9, M8, 16)
		b.Or(M8, M8, M9)
		b.Mta(s16V, M8)
		b.Amov(s16V+1, s16V)
	}
	// half keeps the half (hi: high) of the word in $m8.
	half := func(b *Builder, hi bool) {
		if hi {
			b.Shri(M8, M8, 16)
		} else {
			b.Andi(M8, M8, 0xFFFF)
		}
	}
	s.setup = func(b *Builder) {
		pairConst(b, s16One, 1)
		b.Amov(s16Nil, AZero)
		switch {
		case C.Const:
			m := uint32(0)
			if math.Float32bits(C.Value) != 0 {
				m = 0xFFFFFFFF
			}
			b.LoadA(s16M, m)
			b.Amov(s16M+1, s16M)
		case C.Scalar:
			b.LoadAddr(M7, C.Addr)
			b.Ld32(s16C0, M7, 0)
			b.Amov(s16C0+1, s16C0)
			mask(b, false)
			b.Amov(s16M+1, s16M)
		}
		switch {
		case V.Const:
			f16Pair(b, s16V, numfmt.F32ToF16(math.Float32bits(V.Value)))
		case V.Scalar:
			b.LoadAddr(M7, V.Addr&^3)
			b.Ldm(M8, M7, 0)
			half(b, V.Addr&2 != 0)
			quad(b)
		}
	}
	if C.PerRow {
		s.col = &array{"C", C.Addr, 4, C.Stride}
		step := 4 * int64(C.Stride)
		s.perRow = func(b *Builder) {
			if fitsImm16(step) {
				b.Ld32P(s16C0, gCol, int32(step))
			} else {
				b.Ld32(s16C0, gCol, 0)
				b.Add(gCol, gCol, gColStep)
			}
			b.Amov(s16C0+1, s16C0)
			mask(b, false)
			b.Amov(s16M+1, s16M)
		}
	}
	if V.PerRow {
		s.col = &array{"V", V.Addr, 2, V.Stride}
		step := 2 * int64(V.Stride)
		if V.Stride%2 == 0 {
			// Every row's element is in the same half of its word.
			s.colDown = V.Addr & 2
			s.perRow = func(b *Builder) {
				if fitsImm16(step) {
					b.LdmP(M8, gCol, int32(step))
				} else {
					b.Ldm(M8, gCol, 0)
					b.Add(gCol, gCol, gColStep)
				}
				half(b, V.Addr&2 != 0)
				quad(b)
			}
		} else {
			// The half alternates: h = lo + (hi - lo) * (byte 2 of the
			// address) / 2.
			s.perRow = func(b *Builder) {
				b.Andi(M9, gCol, 2)
				b.Sub(M10, gCol, M9)
				b.Ldm(M8, M10, 0)
				b.Shri(M10, M8, 16)
				b.Andi(M8, M8, 0xFFFF)
				b.Sub(M10, M10, M8)
				b.Shri(M9, M9, 1)
				b.Mul(M10, M10, M9)
				b.Add(M8, M8, M10)
				quad(b)
				addConst(b, gCol, gCol, step, gColStep)
			}
		}
	}
	sel := func(b *Builder) {
		if p.WhenTrue {
			b.Sel(isa.H4SEL, s16Out, s16M, s16V, s16Y)
		} else {
			b.Sel(isa.H4SEL, s16Out, s16M, s16Y, s16V)
		}
	}
	s.body = func(b *Builder) {
		if C.array() {
			b.Ld64P(s16C0, cPtr, 8)
			b.Ld64P(s16C1, cPtr, 8)
			mask(b, true)
		}
		if V.array() {
			b.Ld64P(s16V, vPtr, 8)
		}
		b.Ld64(s16Y, sOut, 0)
		sel(b)
		b.St64P(s16Out, sOut, 8)
	}
	s.tail = func(b *Builder, rem int) {
		if C.array() {
			if rem == 1 {
				b.Ld32(s16C0, cPtr, 0)
			} else {
				b.Ld64(s16C0, cPtr, 0)
			}
			if rem == 3 {
				b.Ld32(s16C1, cPtr, 8)
			}
			mask(b, rem == 3)
		}
		if V.array() {
			f16Load(b, s16V, vPtr, rem)
		}
		f16Load(b, s16Y, sOut, rem)
		sel(b)
		f16Store(b, s16Out, rem)
	}
	return s, nil
}

// checkScalars16 checks the FP16 select's Scalar operands: aligned, in
// memory, and not in Y.
func (p Select) checkScalars16(b *Builder) error {
	a := b.Arch()
	y := rowSet{name: "Y", addr: int64(p.Y), size: 2 * int64(p.N), rows: 1}
	if p.R > 1 {
		y.step, y.rows = 2*int64(p.YStride), int64(p.R)
	}
	for _, x := range []struct {
		name string
		o    Operand
		es   int
	}{{"C", p.C.norm(p.R), 4}, {"V", p.V.norm(p.R), 2}} {
		if !x.o.Scalar {
			continue
		}
		if err := checkBuffer(buffer{x.name, x.o.Addr, uint64(x.es), false}, uint32(x.es), a.Memory, "tile memory"); err != nil {
			return err
		}
		if (rowSet{addr: int64(x.o.Addr), size: int64(x.es), rows: 1}).overlaps(y) {
			return fmt.Errorf("scalar %s at %#x lies in Y", x.name, x.o.Addr)
		}
	}
	return nil
}

// EmulateSelect16 returns what an FP16 Select writes into an element
// holding y.
func EmulateSelect16(whenTrue bool, c uint32, v, y uint16) uint16 {
	if (c != 0) == whenTrue {
		return v
	}
	return y
}

// EmulateSelect returns what Select writes into an element holding y.
func EmulateSelect(whenTrue bool, c, v, y uint32) uint32 {
	if (c != 0) == whenTrue {
		return v
	}
	return y
}
