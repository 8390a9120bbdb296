package codegen

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// This file holds Unary, the elementwise kernel of one operand: its
// operations, its stream body per element type and its cost.

// UnaryOp is an elementwise function.
type UnaryOp uint8

// Unary operations. Each element y of x is computed as below; RN32 is
// one FP32 rounding to nearest even, every named function is the FP32
// instruction of that name (the exact float64 function of the FP32
// argument, rounded once to FP32), and a NaN result is the canonical NaN
// 0x7fc00000 (except Neg and Abs, which only touch the sign bit, and
// LeakyRelu, which passes a NaN x through).
//
// FP16 (Type F16): x converts exactly to FP32 (f16v2tof32: a NaN keeps
// its sign and payload, made quiet), y is computed as above and rounded
// once to FP16 (f32v2tof16, nearest even, overflow to Inf, a NaN keeps
// its sign and the top 9 bits of its payload): what onnxruntime's CPU
// kernels do for FP16 activations, which compute in float. Relu and Clip
// run as f16v4max/f16v4min on FP16 lanes (with RN16(Min), RN16(Max)),
// which gives the same bits: max and min pick one operand, and RN16 is
// monotone, so RN16(min(max(x, Min), Max)) = min(max(x, RN16(Min)),
// RN16(Max)) for an FP16 x, signed zeros and NaNs (0x7e00) included.
const (
	Neg         UnaryOp = iota // y = -x (sign flip)
	Abs                        // y = |x| (sign cleared)
	Relu                       // y = max(x, +0): relu(-0) = +0, NaN stays NaN
	Exp                        // y = exp(x)
	Sqrt                       // y = sqrt(x)
	Tanh                       // y = tanh(x)
	Sigmoid                    // e = exp(-x); s = RN32(e + 1); y = rcp(s) (= RN32(1/s))
	GeluErf                    // t = erf(RN32(x * c)), c = RN32(1/sqrt 2); u = RN32(t + 1); h = RN32(x * 0.5); y = RN32(h * u)
	GeluTanh                   // q = RN32(RN32(x*x) * x); v = RN32(x + RN32(q * c1)); t = tanh(RN32(v * c0)); y = RN32(RN32(x*0.5) * RN32(t + 1)), c0 = RN32(sqrt(2/pi)), c1 = RN32(0.044715)
	PowConst                   // y = pow(x, Exponent) (FP32 pow; Exponent 2: y = RN32(x*x), the same value)
	Clip                       // y = min(max(x, Min), Max) with f32max and f32min (NaN if x is NaN)
	Log                        // y = log(x) (f32log)
	Erf                        // y = erf(x) (f32erf)
	Softplus                   // a = |x|; e = exp(-a); l = log(RN32(e + 1)); y = RN32(max(x, +0) + l)
	LeakyRelu                  // p = RN32(x * Alpha); y = p if x < 0, else x (bits: -0 and a NaN pass through)
	Elu                        // e = exp(x); p = RN32(Alpha * RN32(e - 1)); y = x if 0 < x, else p
	Selu                       // e = exp(x); p = RN32(RN32(e * Alpha) - Alpha); y = RN32(Gamma * (x if 0 < x, else p))
	HardSigmoid                // t = RN32(RN32(x * Alpha) + Beta); y = max(min(t, 1), +0) (f32min, f32max)
	HardSwish                  // t = RN32(RN32(x * c) + 0.5), c = RN32(1/6); h = max(min(t, 1), +0); y = RN32(x * h)
	Floor                      // y = floor(x), exact (see roundOps); NaN, Inf and |x| >= 2^23 pass through
	Ceil                       // y = ceil(x) = -floor(-x)
	Round                      // y = x rounded to the nearest integer, halves to even
	Sign                       // y = 1 if 0 < x, -1 if x < 0, else +0 (zeros and NaN: onnxruntime's)
	Sin                        // y = sin(x) (f32sin)
	Cos                        // y = cos(x) (f32cos)
	numUnary
)

var unaryNames = [numUnary]string{"neg", "abs", "relu", "exp", "sqrt", "tanh", "sigmoid", "gelu-erf", "gelu-tanh", "pow", "clip",
	"log", "erf", "softplus", "leaky-relu", "elu", "selu", "hard-sigmoid", "hard-swish", "floor", "ceil", "round", "sign", "sin", "cos"}

func (op UnaryOp) String() string {
	if op < numUnary {
		return unaryNames[op]
	}
	return fmt.Sprintf("unary(%d)", uint8(op))
}

// Unary is Y[i] = op(X[i]) for N elements of Type. X and Y are 8-byte
// aligned; Y may be X (in place) but may not otherwise overlap it. The
// work split is a stream kernel's (see stream): FP32 in f32v2 pairs, the
// odd last element on the last worker; FP16 in units of 4 (one 64-bit
// word), the N mod 4 last elements on the last worker, which reads their
// aligned 32-bit (3 elements: 64-bit) word and writes only their bytes
// (read-modify-write of the last 32-bit word).
//
// R > 1 makes it two-dimensional: R rows of N elements, row r of X at X +
// esize*r*XStride and of Y at Y + esize*r*YStride (strides in elements;
// XStride 0 reads the same row for every row). Row starts are 8-byte
// aligned (esize*stride a multiple of 8), YStride >= N, and in place
// means Y == X and YStride == XStride. Each row is a row of the 1-D
// kernel: the row tail touches only its own bytes of Y, so the padding
// after a row is preserved. The split over workers is the 2-D stream's
// (see stream). R == 0 or 1 is the 1-D kernel (strides unused).
type Unary struct {
	Op       UnaryOp
	N        int
	X, Y     uint32
	Exponent float32 // PowConst
	Min, Max float32 // Clip
	// Alpha, Beta, Gamma: LeakyRelu (Alpha), Elu (Alpha), Selu (Alpha,
	// Gamma), HardSigmoid (Alpha, Beta).
	Alpha, Beta, Gamma float32
	Workers            int

	Type             ElemType
	R                int // rows (0, 1: one)
	XStride, YStride int // elements, R > 1
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
	sixth     = float32(1.0 / 6)
)

func (p Unary) stream() (*stream, error) {
	if p.Op >= numUnary {
		return nil, fmt.Errorf("unknown unary op %d", p.Op)
	}
	if p.Type >= numElemTypes {
		return nil, fmt.Errorf("unknown element type %d", p.Type)
	}
	if p.R < 0 {
		return nil, fmt.Errorf("row count %d is negative", p.R)
	}
	es := p.Type.size()
	s := &stream{n: p.N, unit: 2, workers: p.Workers, rows: p.R,
		inputs: []array{{"X", p.X, es, p.XStride}}, output: array{"Y", p.Y, es, p.YStride}}
	s.setup = p.setup
	if p.Type == F16 {
		p.f16(s)
		return s, nil
	}
	op := func(b *Builder, single bool) {
		l := lanes{b, single}
		l.load(A0, sIn0)
		p.compute(b, single)
		l.store(A0, sOut)
	}
	s.body = func(b *Builder) { op(b, false) }
	s.tail = func(b *Builder, _ int) { op(b, true) }
	return s, nil
}

// setup loads the FP32 constants of the op.
func (p Unary) setup(b *Builder) {
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
	case Softplus:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, 1)
	case LeakyRelu:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, p.Alpha)
	case Elu:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, 1)
		pairConst(b, ewK1, p.Alpha)
	case Selu:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, p.Alpha)
		pairConst(b, ewK1, p.Gamma)
	case HardSigmoid:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, p.Alpha)
		pairConst(b, ewK1, p.Beta)
		pairConst(b, ewK2, 1)
	case HardSwish:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, sixth)
		pairConst(b, ewK1, 0.5)
		pairConst(b, ewK2, 1)
	case Floor, Ceil, Round:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK0, 0x1p23)
		pairConst(b, ewK1, 1)
	case Sign:
		b.LoadA(ewZero, 0)
		pairConst(b, ewK1, 1)
	}
}

// compute emits the op on the FP32 pair $a0:1 (the low lane when
// single), in place; it uses $a2:3 and the constants, never $a4:5.
func (p Unary) compute(b *Builder, single bool) {
	l := lanes{b, single}
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
	case Log:
		l.each(isa.FLOG, A0, A0, 0, 0)
	case Sin:
		l.each(isa.FSIN, A0, A0, 0, 0)
	case Cos:
		l.each(isa.FCOS, A0, A0, 0, 0)
	case Erf:
		l.each(isa.FERF, A0, A0, 0, 0)
	case Softplus:
		l.v1(isa.V2ABS, A2, A0)
		l.v1(isa.V2NEG, A2, A2)
		l.v1(isa.V2EXP, A2, A2)
		l.v(isa.V2ADD, A2, A2, ewK0)
		l.each(isa.FLOG, A2, A2, 0, 0)
		l.v(isa.V2MAX, A0, A0, ewZero)
		l.v(isa.V2ADD, A0, A0, A2)
	case LeakyRelu:
		// The mask goes to $a12:13 (no constant there).
		l.v(isa.V2MUL, A2, A0, ewK0)
		b.F(isa.V2CMPLT, ewK2, A0, ewZero)
		l.sel(A0, ewK2, A2, A0)
	case Elu:
		l.v1(isa.V2EXP, A2, A0)
		l.v(isa.V2SUB, A2, A2, ewK0)
		l.v(isa.V2MUL, A2, A2, ewK1)
		b.F(isa.V2CMPLT, ewK2, ewZero, A0)
		l.sel(A0, ewK2, A0, A2)
	case Selu:
		l.v1(isa.V2EXP, A2, A0)
		l.v(isa.V2MUL, A2, A2, ewK0)
		l.v(isa.V2SUB, A2, A2, ewK0)
		b.F(isa.V2CMPLT, ewK2, ewZero, A0)
		l.sel(A0, ewK2, A0, A2)
		l.v(isa.V2MUL, A0, A0, ewK1)
	case HardSigmoid:
		l.v(isa.V2MUL, A0, A0, ewK0)
		l.v(isa.V2ADD, A0, A0, ewK1)
		l.v(isa.V2MIN, A0, A0, ewK2)
		l.v(isa.V2MAX, A0, A0, ewZero)
	case HardSwish:
		l.v(isa.V2MUL, A2, A0, ewK0)
		l.v(isa.V2ADD, A2, A2, ewK1)
		l.v(isa.V2MIN, A2, A2, ewK2)
		l.v(isa.V2MAX, A2, A2, ewZero)
		l.v(isa.V2MUL, A0, A0, A2)
	case Floor, Ceil, Round:
		p.rounding(l)
	case Sign:
		// The masks in $a2:3 and $a6:7, -1 in $a12:13.
		l.v(isa.V2CMPLT, A2, ewZero, A0)
		l.v(isa.V2CMPLT, A6, A0, ewZero)
		l.v1(isa.V2NEG, ewK2, ewK1)
		l.sel(A6, A6, ewK2, ewZero)
		l.sel(A0, A2, ewK1, A6)
	}
}

// rounding emits Floor, Ceil and Round (roundOps) on $a0:1, with 2^23 in
// ewK0, 1.0 in ewK1 and scratch $a2:3, $a6:7 and $a12:13 (the masks;
// the compares run on both lanes, the high one unused when single).
//
// For |x| < 2^23, m = +-2^23 with x's sign and r = RN32(RN32(x + m) - m)
// is x rounded to an integer, halves to even: x + m lies where the FP32
// spacing is 1, and its rounding is the only one (the subtraction is
// exact). A zero r takes x's sign as x * 0 (the sum gives +0 for a
// negative x). Floor is then r - 1 where x < r, else r; Ceil is
// -floor(-x). NaN, infinities and |x| >= 2^23 (integers already) pass
// through unchanged: only exact operations, compares and selects touch
// a value, so the results are exact.
func (p Unary) rounding(l lanes) {
	if p.Op == Ceil {
		l.v1(isa.V2NEG, A0, A0)
	}
	l.v(isa.V2CMPLT, A2, A0, ewZero)
	l.v1(isa.V2NEG, A6, ewK0)
	l.sel(A2, A2, A6, ewK0)
	l.v(isa.V2ADD, A6, A0, A2)
	l.v(isa.V2SUB, A6, A6, A2)
	l.v(isa.V2MUL, A2, A0, ewZero)
	l.v(isa.V2CMPEQ, ewK2, A6, ewZero)
	l.sel(A6, ewK2, A2, A6)
	if p.Op != Round {
		l.v(isa.V2CMPLT, ewK2, A0, A6)
		l.v(isa.V2SUB, A2, A6, ewK1)
		l.sel(A6, ewK2, A2, A6)
	}
	l.v1(isa.V2ABS, A2, A0)
	l.v(isa.V2CMPLT, A2, A2, ewK0)
	l.sel(A0, A2, A6, A0)
	if p.Op == Ceil {
		l.v1(isa.V2NEG, A0, A0)
	}
}

// f16 makes s the FP16 kernel: units of 4. Relu and Clip work on the FP16
// lanes in $a0:1; the other ops convert each half of the word in $a4:5
// to the FP32 pair $a0:1, compute and convert back into $a4 (then $a5).
func (p Unary) f16(s *stream) {
	s.unit = 4
	if p.Op == Relu || p.Op == Clip {
		op := func(b *Builder) {
			if p.Op == Relu {
				b.F(isa.H4MAX, A0, A0, ewZero)
				return
			}
			b.F(isa.H4MAX, A0, A0, ewK0)
			b.F(isa.H4MIN, A0, A0, ewK1)
		}
		if p.Op == Clip {
			s.setup = func(b *Builder) {
				f16Pair(b, ewK0, numfmt.F32ToF16(math.Float32bits(p.Min)))
				f16Pair(b, ewK1, numfmt.F32ToF16(math.Float32bits(p.Max)))
			}
		}
		s.body = func(b *Builder) {
			b.Ld64P(A0, sIn0, 8)
			op(b)
			b.St64P(A0, sOut, 8)
		}
		s.tail = func(b *Builder, rem int) {
			f16Load(b, A0, sIn0, rem)
			op(b)
			f16Store(b, A0, rem)
		}
		return
	}
	half := func(b *Builder, r AReg, single bool) {
		b.F1(isa.CVTHF, A0, r)
		p.compute(b, single)
		b.F1(isa.CVTFH, r, A0)
	}
	s.body = func(b *Builder) {
		b.Ld64P(A4, sIn0, 8)
		half(b, A4, false)
		half(b, A5, false)
		b.St64P(A4, sOut, 8)
	}
	s.tail = func(b *Builder, rem int) {
		f16Load(b, A4, sIn0, rem)
		half(b, A4, rem == 1)
		if rem == 3 {
			half(b, A5, true)
		}
		f16Store(b, A4, rem)
	}
}

// Cost returns the kernel's cost. 1-D (R <= 1, or every stride N): a
// stream kernel whose worker w with u units (FP32 pairs, FP16 fours)
// issues 4 + 3 table loads (+1 tail flag when N mod unit != 0) + setup +
// 1 + u*body (+1 when N mod unit != 0, + tail on the last worker) before
// exit. 2-D: the 2-D stream's formula (see stream) with the same body,
// setup and tail. Body issues per unit and setup issues per worker:
//
//	op          FP32 body  FP16 body  setup
//	neg, abs     3          8          0
//	relu         3          3          1
//	exp          6         14          0
//	sqrt, tanh   6         14          0
//	sigmoid     12         26          3
//	gelu-erf    10         22          9
//	gelu-tanh   14         30         12
//	pow         10         22          ConstLen(e)
//	pow (e=2)    3          8          0
//	clip         4          4          ConstLen(Min)+ConstLen(Max)+2
//	log, erf     6         14          0
//	sin, cos     6         14          0
//	softplus    15         32          4
//	leaky-relu   5         12          2+ConstLen(Alpha)
//	elu         10         22          5+ConstLen(Alpha)
//	selu        11         24          3+ConstLen(Alpha)+ConstLen(Gamma)
//	hard-sigm.   6         14          6+ConstLen(Alpha)+ConstLen(Beta)
//	hard-swish   7         16          10
//	floor       16         34          7
//	ceil        18         38          7
//	round       13         28          7
//	sign         7         16          4
//
// (ConstLen of the constants' FP32 bits, 1 below 2^20, else 2; FP16 clip:
// of the FP16 pair h | h<<16.) The FP32 tail is the body on one element,
// with scalar twins of the pair instructions; the FP16 tail of r
// elements loads one word, computes one pair (r = 1: one element) and a
// second single element when r = 3, and stores as f16Store.
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
