package codegen

import "ipu.local/libs/isa"

// This file holds the lane helpers of the FP32 stream bodies: an f32v2
// pair operation or its scalar twin on a single element, and pair
// constants.

// lanes emits the f32v2 form of an operation, or its scalar FP32 twin
// for a single element (the low lane), which computes the same value.
type lanes struct {
	b      *Builder
	single bool
}

var scalarTwin = map[isa.Op]isa.Op{
	isa.V2ADD: isa.FADD, isa.V2SUB: isa.FSUB, isa.V2MUL: isa.FMUL, isa.V2FMA: isa.FMA,
	isa.V2MAX: isa.FMAX, isa.V2MIN: isa.FMIN, isa.V2EXP: isa.FEXP, isa.V2RCP: isa.FRCP,
	isa.V2ABS: isa.FABS, isa.V2NEG: isa.FNEG, isa.V2SEL: isa.FSEL,
}

// v emits a two-operand pair operation.
func (l lanes) v(op isa.Op, d, a, c AReg) {
	if t, ok := scalarTwin[op]; ok && l.single {
		op = t
	}
	l.b.F(op, d, a, c)
}

// v1 emits a one-operand pair operation.
func (l lanes) v1(op isa.Op, d, a AReg) {
	if t, ok := scalarTwin[op]; ok && l.single {
		op = t
	}
	l.b.F1(op, d, a)
}

// sel emits a pair select.
func (l lanes) sel(d, a, c, e AReg) {
	op := isa.V2SEL
	if l.single {
		op = isa.FSEL
	}
	l.b.Sel(op, d, a, c, e)
}

// each emits a scalar instruction on each lane: d, a, c then d+1, a+1,
// c+1 (c+stepC).
func (l lanes) each(op isa.Op, d, a, c AReg, stepC AReg) {
	l.b.F(op, d, a, c)
	if !l.single {
		l.b.F(op, d+1, a+1, c+stepC)
	}
}

// load and store the pair (or the single element) at the pointers.
func (l lanes) load(d AReg, p MReg) {
	if l.single {
		l.b.Ld32(d, p, 0)
	} else {
		l.b.Ld64P(d, p, 8)
	}
}

func (l lanes) store(d AReg, p MReg) {
	if l.single {
		l.b.St32(d, p, 0)
	} else {
		l.b.St64P(d, p, 8)
	}
}

// pairConst loads the FP32 value f into both lanes of the pair d.
func pairConst(b *Builder, d AReg, f float32) {
	b.LoadF32(d, f)
	b.Amov(d+1, d)
}
