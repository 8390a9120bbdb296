package codegen

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
)

// UnaryOp is an elementwise FP32 function.
type UnaryOp uint8

// Unary operations. Each element y of x is computed as below; RN32 is
// one FP32 rounding to nearest even, every named function is the FP32
// instruction of that name (the exact float64 function of the FP32
// argument, rounded once to FP32), and a NaN result is the canonical NaN
// 0x7fc00000 (except Neg and Abs, which only touch the sign bit).
const (
	Neg      UnaryOp = iota // y = -x (sign flip)
	Abs                     // y = |x| (sign cleared)
	Relu                    // y = max(x, +0): relu(-0) = +0, NaN stays NaN
	Exp                     // y = exp(x)
	Sqrt                    // y = sqrt(x)
	Tanh                    // y = tanh(x)
	Sigmoid                 // e = exp(-x); s = RN32(e + 1); y = rcp(s) (= RN32(1/s))
	GeluErf                 // t = erf(RN32(x * c)), c = RN32(1/sqrt 2); u = RN32(t + 1); h = RN32(x * 0.5); y = RN32(h * u)
	GeluTanh                // q = RN32(RN32(x*x) * x); v = RN32(x + RN32(q * c1)); t = tanh(RN32(v * c0)); y = RN32(RN32(x*0.5) * RN32(t + 1)), c0 = RN32(sqrt(2/pi)), c1 = RN32(0.044715)
	PowConst                // y = pow(x, Exponent) (FP32 pow; Exponent 2: y = RN32(x*x), the same value)
	Clip                    // y = min(max(x, Min), Max) with f32max and f32min (NaN if x is NaN)
	numUnary
)

var unaryNames = [numUnary]string{"neg", "abs", "relu", "exp", "sqrt", "tanh", "sigmoid", "gelu-erf", "gelu-tanh", "pow", "clip"}

func (op UnaryOp) String() string {
	if op < numUnary {
		return unaryNames[op]
	}
	return fmt.Sprintf("unary(%d)", uint8(op))
}

// Unary is Y[i] = op(X[i]) for n FP32 elements. X and Y are 8-byte
// aligned; Y may be X (in place) but may not otherwise overlap it. The
// work split is a stream kernel's (see stream): f32v2 pairs, the odd
// last element on the last worker.
type Unary struct {
	Op       UnaryOp
	N        int
	X, Y     uint32
	Exponent float32 // PowConst
	Min, Max float32 // Clip
	Workers  int
}

// Constant registers of the elementwise kernels (pairs).
const (
	ewK0   = A8
	ewK1   = A10
	ewK2   = A12
	ewK3   = A6
	ewZero = A14 // with $azero: the pair +0, +0
)

// Unary constants.
var (
	geluErfC  = float32(1 / math.Sqrt2)
	geluTanh0 = float32(math.Sqrt(2 / math.Pi))
	geluTanh1 = float32(0.044715)
)

func (p Unary) stream() (*stream, error) {
	if p.Op >= numUnary {
		return nil, fmt.Errorf("unknown unary op %d", p.Op)
	}
	s := &stream{n: p.N, unit: 2, workers: p.Workers,
		inputs: []array{{"X", p.X, 4}}, output: array{"Y", p.Y, 4}}
	s.setup = func(b *Builder) {
		switch p.Op {
		case Relu:
			b.LoadA(ewZero, 0)
		case Sigmoid:
			pairConst(b, ewK0, 1)
		case GeluErf:
			pairConst(b, ewK0, geluErfC)
			pairConst(b, ewK1, 1)
			pairConst(b, ewK2, 0.5)
		case GeluTanh:
			pairConst(b, ewK0, geluTanh0)
			pairConst(b, ewK1, 1)
			pairConst(b, ewK2, 0.5)
			pairConst(b, ewK3, geluTanh1)
		case PowConst:
			if p.Exponent != 2 {
				b.LoadF32(ewK0, p.Exponent)
			}
		case Clip:
			pairConst(b, ewK0, p.Min)
			pairConst(b, ewK1, p.Max)
		}
	}
	op := func(b *Builder, single bool) {
		l := lanes{b, single}
		l.load(A0, sIn0)
		switch p.Op {
		case Neg:
			l.v1(isa.V2NEG, A0, A0)
		case Abs:
			l.v1(isa.V2ABS, A0, A0)
		case Relu:
			l.v(isa.V2MAX, A0, A0, ewZero)
		case Exp:
			l.v1(isa.V2EXP, A0, A0)
		case Sqrt:
			l.each(isa.FSQRT, A0, A0, 0, 0)
		case Tanh:
			l.each(isa.FTANH, A0, A0, 0, 0)
		case Sigmoid:
			l.v1(isa.V2NEG, A0, A0)
			l.v1(isa.V2EXP, A0, A0)
			l.v(isa.V2ADD, A0, A0, ewK0)
			l.v1(isa.V2RCP, A0, A0)
		case GeluErf:
			l.v(isa.V2MUL, A2, A0, ewK0)
			l.each(isa.FERF, A2, A2, 0, 0)
			l.v(isa.V2ADD, A2, A2, ewK1)
			l.v(isa.V2MUL, A0, A0, ewK2)
			l.v(isa.V2MUL, A0, A0, A2)
		case GeluTanh:
			l.v(isa.V2MUL, A2, A0, A0)
			l.v(isa.V2MUL, A2, A2, A0)
			l.v(isa.V2MUL, A2, A2, ewK3)
			l.v(isa.V2ADD, A2, A0, A2)
			l.v(isa.V2MUL, A2, A2, ewK0)
			l.each(isa.FTANH, A2, A2, 0, 0)
			l.v(isa.V2ADD, A2, A2, ewK1)
			l.v(isa.V2MUL, A0, A0, ewK2)
			l.v(isa.V2MUL, A0, A0, A2)
		case PowConst:
			if p.Exponent == 2 {
				l.v(isa.V2MUL, A0, A0, A0)
			} else {
				l.each(isa.FPOW, A0, A0, ewK0, 0)
			}
		case Clip:
			l.v(isa.V2MAX, A0, A0, ewK0)
			l.v(isa.V2MIN, A0, A0, ewK1)
		}
		l.store(A0, sOut)
	}
	s.body = func(b *Builder) { op(b, false) }
	s.tail = func(b *Builder, _ int) { op(b, true) }
	return s, nil
}

// Cost returns the kernel's cost. Worker w with u pairs issues
// 4 + 3 table loads (+1 tail flag when N is odd) + setup + 1 + u*body
// (+1 when N is odd, + tail on the last worker) before exit; body (per
// pair) and setup (per worker) issues:
//
//	neg, abs    3, 0        sigmoid    12, 3     pow        10, ConstLen(e)
//	relu        3, 1        gelu-erf   10, 9     pow (e=2)   3, 0
//	exp         6, 0        gelu-tanh  14, 12    clip        4, ConstLen(Min)+ConstLen(Max)+2
//	sqrt, tanh  6, 0
//
// (ConstLen of the constants' FP32 bits: 1 below 2^20, else 2.) The tail
// is the body on one element, with scalar twins of the pair instructions.
func (p Unary) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("unary %s: %w", p.Op, err)
	}
	return s.cost(), nil
}

// EmitUnary emits the kernel at b's current position.
func EmitUnary(b *Builder, p Unary) (Kernel, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(b)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("unary %s: %w", p.Op, err)
	}
	return s.emit(b)
}

// BinaryOp is an elementwise FP32 function of two operands.
type BinaryOp uint8

// Binary operations: y = a op b with one FP32 rounding (RN32), a NaN
// result canonical, except Div:
//
//	z = rcp(b)                        RN32(1/b)
//	q = RN32(a * z)
//	r = RN32(a - q*b)                 f32fma: one rounding (of the float64 fma)
//	q' = RN32(q + r*z)                f32fma
//	y = q' unless q' is NaN, then q   (Inf and zero operands keep q)
//
// which is the correctly rounded quotient for normal operands and
// quotients (one Newton correction of q, Markstein's theorem), and q =
// a * (1/b) rounded for the special cases. Max and Min are f32max and
// f32min (NaN if either is NaN); Pow is the FP32 pow instruction.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Max
	Min
	Pow
	numBinary
)

var binaryNames = [numBinary]string{"add", "sub", "mul", "div", "max", "min", "pow"}

func (op BinaryOp) String() string {
	if op < numBinary {
		return binaryNames[op]
	}
	return fmt.Sprintf("binary(%d)", uint8(op))
}

// Operand is an operand of a Binary: an array of n FP32 elements at Addr
// (8-byte aligned), or one FP32 value broadcast to every element: read
// from Addr (Scalar, 4-byte aligned) or given (Const).
type Operand struct {
	Addr   uint32
	Scalar bool
	Const  bool
	Value  float32 // Const
}

func (o Operand) array() bool { return !o.Scalar && !o.Const }

// Binary is Y[i] = A[i] op B[i] for n FP32 elements, either operand
// possibly a broadcast scalar (not both). Y may be an input array (in
// place) but may not otherwise overlap one.
type Binary struct {
	Op      BinaryOp
	N       int
	A, B    Operand
	Y       uint32
	Workers int
}

// Binary registers: the left operand in $a0:1 (array) or $a4:5
// (broadcast), the right one in $a2:3 or $a6:7; Div keeps 1/b in $a8:9.
const (
	bL  = A0
	bLs = A4
	bR  = A2
	bRs = A6
	bZ  = A8
	bQ  = A10
	bN  = A12
)

func (p Binary) stream() (*stream, error) {
	if p.Op >= numBinary {
		return nil, fmt.Errorf("unknown binary op %d", p.Op)
	}
	for _, o := range []Operand{p.A, p.B} {
		if o.Scalar && o.Const {
			return nil, fmt.Errorf("operand both Scalar and Const")
		}
	}
	if !p.A.array() && !p.B.array() {
		return nil, fmt.Errorf("both operands are scalars")
	}
	s := &stream{n: p.N, unit: 2, workers: p.Workers, output: array{"Y", p.Y, 4}}
	L, R := bL, bR
	var lPtr, rPtr MReg
	if p.A.array() {
		lPtr = sIn0
		s.inputs = append(s.inputs, array{"A", p.A.Addr, 4})
	} else {
		L = bLs
	}
	if p.B.array() {
		rPtr = sIn0
		if p.A.array() {
			rPtr = sIn1
		}
		s.inputs = append(s.inputs, array{"B", p.B.Addr, 4})
	} else {
		R = bRs
	}
	s.setup = func(b *Builder) {
		for _, x := range []struct {
			o Operand
			r AReg
		}{{p.A, bLs}, {p.B, bRs}} {
			switch {
			case x.o.Const:
				pairConst(b, x.r, x.o.Value)
			case x.o.Scalar:
				b.LoadAddr(M7, x.o.Addr)
				b.Ld32(x.r, M7, 0)
				b.Amov(x.r+1, x.r)
			}
		}
		if p.Op == Div && !p.B.array() {
			b.F1(isa.V2RCP, bZ, bRs)
		}
	}
	op := func(b *Builder, single bool) {
		l := lanes{b, single}
		if p.A.array() {
			l.load(bL, lPtr)
		}
		if p.B.array() {
			l.load(bR, rPtr)
		}
		switch p.Op {
		case Add:
			l.v(isa.V2ADD, A0, L, R)
		case Sub:
			l.v(isa.V2SUB, A0, L, R)
		case Mul:
			l.v(isa.V2MUL, A0, L, R)
		case Max:
			l.v(isa.V2MAX, A0, L, R)
		case Min:
			l.v(isa.V2MIN, A0, L, R)
		case Pow:
			l.each(isa.FPOW, A0, L, R, 1)
		case Div:
			if p.B.array() {
				l.v1(isa.V2RCP, bZ, R)
			}
			l.v(isa.V2MUL, bQ, L, bZ)
			l.v1(isa.V2NEG, bN, bQ)
			if L != A0 {
				l.sel(A0, L, L, L) // a copy: whichever way it selects
			}
			l.v(isa.V2FMA, A0, bN, R)  // r = a - q*b
			l.v(isa.V2FMA, bQ, A0, bZ) // q' = q + r*z
			b.F(isa.V2CMPEQ, A2, bQ, bQ)
			l.v1(isa.V2NEG, A0, bN)
			l.sel(A0, A2, bQ, A0)
		}
		l.store(A0, sOut)
	}
	s.body = func(b *Builder) { op(b, false) }
	s.tail = func(b *Builder, _ int) { op(b, true) }
	return s, nil
}

// Cost returns the kernel's cost: as Unary's (with one table load per
// array operand, plus Y and the count), with body issues per pair (two
// arrays / one array and a broadcast)
//
//	add, sub, mul, max, min   4 / 3
//	pow                       11 / 10
//	div                       14 / 9 (b broadcast), 14 (a broadcast)
//
// and setup 3 for a broadcast from memory or 1+ConstLen for a constant
// (+4 for Div with b broadcast).
func (p Binary) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("binary %s: %w", p.Op, err)
	}
	return s.cost(), nil
}

// EmitBinary emits the kernel at b's current position.
func EmitBinary(b *Builder, p Binary) (Kernel, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(b)
	}
	if err == nil {
		err = p.checkScalars(b)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("binary %s: %w", p.Op, err)
	}
	return s.emit(b)
}

func (p Binary) checkScalars(b *Builder) error {
	a := b.Arch()
	for _, x := range []struct {
		name string
		o    Operand
	}{{"A", p.A}, {"B", p.B}} {
		if x.o.Scalar {
			if err := checkBuffer(buffer{x.name, x.o.Addr, 4, false}, 4, a.Memory, "tile memory"); err != nil {
				return err
			}
		}
	}
	return nil
}
