package codegen

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

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
	numUnary
)

var unaryNames = [numUnary]string{"neg", "abs", "relu", "exp", "sqrt", "tanh", "sigmoid", "gelu-erf", "gelu-tanh", "pow", "clip",
	"log", "erf", "softplus", "leaky-relu", "elu", "selu", "hard-sigmoid", "hard-swish"}

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

// f16Pair loads the FP16 value h into the four lanes of the pair d.
func f16Pair(b *Builder, d AReg, h uint16) {
	b.LoadA(d, uint32(h)|uint32(h)<<16)
	b.Amov(d+1, d)
}

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
//	softplus    15         32          4
//	leaky-relu   5         12          2+ConstLen(Alpha)
//	elu         10         22          5+ConstLen(Alpha)
//	selu        11         24          3+ConstLen(Alpha)+ConstLen(Gamma)
//	hard-sigm.   6         14          6+ConstLen(Alpha)+ConstLen(Beta)
//	hard-swish   7         16          10
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

// BinaryOp is an elementwise function of two operands.
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
//
// FP16 (Type F16): Add, Sub, Mul, Max and Min are the f16v4 instructions:
// one FP16 rounding of the exact result (NaN 0x7e00). That is also the
// FP32 result rounded to FP16: FP32 has 24 >= 2*11 + 2 significant bits,
// so rounding the exact sum, difference or product first to FP32 then to
// FP16 gives the direct rounding (and FP16 operands neither overflow nor
// underflow FP32 there). Div and Pow convert the operands exactly to
// FP32, compute as above and round once to FP16, as onnxruntime's CPU
// kernels do (they compute these in float).
//
// Comparisons (Equal, Less, LessEq, NotEqual) write BOOL elements: FP32
// words 1.0 (true) or 0.0 (false), whatever Type is (Y's element size is
// 4): f32v2cmpeq and f32v2cmplt masks (false for a NaN operand; -0 equals
// +0) selected onto the constants; LessEq is a < b or a == b, NotEqual
// not a == b (true for a NaN operand). FP16 operands convert exactly to
// FP32 first. The comparisons are FP32 only in their output: Type F16
// reads FP16 operands.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Max
	Min
	Pow
	Equal
	Less
	LessEq
	NotEqual
	numBinary
)

var binaryNames = [numBinary]string{"add", "sub", "mul", "div", "max", "min", "pow", "equal", "less", "less-eq", "not-equal"}

// Compare reports whether op writes BOOL words.
func (op BinaryOp) Compare() bool { return op >= Equal && op <= NotEqual }

// outSize returns the bytes of one Y element.
func (p Binary) outSize() int {
	if p.Op.Compare() {
		return 4
	}
	return p.Type.size()
}

func (op BinaryOp) String() string {
	if op < numBinary {
		return binaryNames[op]
	}
	return fmt.Sprintf("binary(%d)", uint8(op))
}

// h4 returns the f16v4 instruction of op, if it has one.
func (op BinaryOp) h4() (isa.Op, bool) {
	switch op {
	case Add:
		return isa.H4ADD, true
	case Sub:
		return isa.H4SUB, true
	case Mul:
		return isa.H4MUL, true
	case Max:
		return isa.H4MAX, true
	case Min:
		return isa.H4MIN, true
	}
	return 0, false
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

// Binary is Y[i] = A[i] op B[i] for N elements of Type, either operand
// possibly a broadcast (not both). Y may be an array operand (in place:
// the same address and, for R > 1, stride) but may not otherwise overlap
// an operand. The 1-D split is Unary's. R > 1 makes it two-dimensional
// as Unary (YStride for Y; the operands' Stride and PerRow); a PerRow
// operand is loaded (and broadcast) at the start of each row.
type Binary struct {
	Op      BinaryOp
	N       int
	A, B    Operand
	Y       uint32
	Workers int

	Type    ElemType
	R       int // rows (0, 1: one)
	YStride int // elements, R > 1

	// sel, set only by Select, makes the kernel Y = A != 0 ? B : Y
	// (selTrue) or Y = A == 0 ? B : Y (selFalse) instead of Op.
	sel uint8
}

// Binary registers: the left operand in $a0:1 (array) or $a4:5
// (broadcast), the right one in $a2:3 or $a6:7; Div keeps 1/b in $a8:9.
// FP16 arrays of Div and Pow load into $a4:5 (A) and $a6:7 (B); $a14 is
// the lane mask of a PerRow FP16 operand with an odd stride.
const (
	bL  = A0
	bLs = A4
	bR  = A2
	bRs = A6
	bZ  = A8
	bQ  = A10
	bN  = A12
	bM  = A14
)

func (p Binary) stream() (*stream, error) {
	if p.Op >= numBinary {
		return nil, fmt.Errorf("unknown binary op %d", p.Op)
	}
	if p.Type >= numElemTypes {
		return nil, fmt.Errorf("unknown element type %d", p.Type)
	}
	if p.R < 0 {
		return nil, fmt.Errorf("row count %d is negative", p.R)
	}
	for _, x := range []struct {
		name string
		o    Operand
	}{{"A", p.A}, {"B", p.B}} {
		n := 0
		for _, f := range []bool{x.o.Scalar, x.o.Const, x.o.PerRow} {
			if f {
				n++
			}
		}
		if n > 1 {
			return nil, fmt.Errorf("operand %s has more than one of Scalar, Const and PerRow", x.name)
		}
		if x.o.Const && p.Type == F16 {
			v := math.Float32bits(x.o.Value)
			if numfmt.F16ToF32(numfmt.F32ToF16(v)) != v {
				return nil, fmt.Errorf("operand %s: constant %g is not an FP16 value", x.name, x.o.Value)
			}
		}
	}
	A, B := p.A.norm(p.R), p.B.norm(p.R)
	if p.sel != 0 && p.Type != F32 {
		return nil, fmt.Errorf("a selection of %d-byte elements (want 4)", p.Type.size())
	}
	if !A.array() && !B.array() && p.sel == 0 {
		return nil, fmt.Errorf("both operands are broadcasts")
	}
	es := p.Type.size()
	s := &stream{n: p.N, unit: 2, workers: p.Workers, rows: p.R, output: array{"Y", p.Y, p.outSize(), p.YStride}}
	L, R := bL, bR
	var lPtr, rPtr MReg
	if A.array() {
		lPtr = sIn0
		s.inputs = append(s.inputs, array{"A", A.Addr, es, A.Stride})
	} else {
		L = bLs
	}
	if B.array() {
		rPtr = sIn0
		if A.array() {
			rPtr = sIn1
		}
		s.inputs = append(s.inputs, array{"B", B.Addr, es, B.Stride})
	} else {
		R = bRs
	}
	h4op, h4 := p.Op.h4()
	h4 = h4 && p.Type == F16
	for _, x := range []struct {
		name string
		o    Operand
		r    AReg
	}{{"A", A, bLs}, {"B", B, bRs}} {
		if !x.o.PerRow {
			continue
		}
		s.col = &array{x.name, x.o.Addr, es, x.o.Stride}
		s.perRow = func(b *Builder) { p.perRow(b, x.o, x.r, h4) }
		if p.Type == F16 && x.o.Stride%2 == 0 {
			s.colDown = x.o.Addr & 2
		}
	}
	s.setup = func(b *Builder) {
		for _, x := range []struct {
			o Operand
			r AReg
		}{{A, bLs}, {B, bRs}} {
			switch {
			case x.o.Const && h4:
				f16Pair(b, x.r, numfmt.F32ToF16(math.Float32bits(x.o.Value)))
			case x.o.Const:
				pairConst(b, x.r, x.o.Value)
			case x.o.Scalar && p.Type == F16:
				b.LoadAddr(M7, x.o.Addr&^3)
				b.Ld32(x.r, M7, 0)
				f16Bcast(b, x.r, x.o.Addr&2 != 0, h4)
			case x.o.Scalar:
				b.LoadAddr(M7, x.o.Addr)
				b.Ld32(x.r, M7, 0)
				b.Amov(x.r+1, x.r)
			}
		}
		if p.Op == Div && (B.Scalar || B.Const) {
			b.F1(isa.V2RCP, bZ, bRs)
		}
		if p.Op.Compare() {
			pairConst(b, bZ, 1)
			b.LoadA(bN, 0)
			b.Amov(bN+1, bN)
		}
	}
	switch {
	case p.Type == F16 && p.Op.Compare():
		// FP16 operands in $a4:5 and $a6:7, each half compared as an
		// FP32 pair and stored as two words.
		s.unit = 4
		half := func(b *Builder, i AReg, single bool) {
			if A.array() {
				b.F1(isa.CVTHF, bL, bLs+i)
			}
			if B.array() {
				b.F1(isa.CVTHF, bR, bRs+i)
			}
			p.compute(b, L, R, B.array(), single)
		}
		s.body = func(b *Builder) {
			if A.array() {
				b.Ld64P(bLs, lPtr, 8)
			}
			if B.array() {
				b.Ld64P(bRs, rPtr, 8)
			}
			half(b, 0, false)
			b.St64P(A0, sOut, 8)
			half(b, 1, false)
			b.St64P(A0, sOut, 8)
		}
		s.tail = func(b *Builder, rem int) {
			if A.array() {
				f16Load(b, bLs, lPtr, rem)
			}
			if B.array() {
				f16Load(b, bRs, rPtr, rem)
			}
			half(b, 0, rem == 1)
			if rem == 1 {
				b.St32(A0, sOut, 0)
				return
			}
			if rem == 2 {
				b.St64(A0, sOut, 0)
				return
			}
			b.St64P(A0, sOut, 8)
			half(b, 1, true)
			b.St32(A0, sOut, 0)
		}
	case h4:
		s.unit = 4
		s.body = func(b *Builder) {
			if A.array() {
				b.Ld64P(bL, lPtr, 8)
			}
			if B.array() {
				b.Ld64P(bR, rPtr, 8)
			}
			b.F(h4op, A0, L, R)
			b.St64P(A0, sOut, 8)
		}
		s.tail = func(b *Builder, rem int) {
			if A.array() {
				f16Load(b, bL, lPtr, rem)
			}
			if B.array() {
				f16Load(b, bR, rPtr, rem)
			}
			b.F(h4op, A0, L, R)
			f16Store(b, A0, rem)
		}
	case p.Type == F16:
		// Raw FP16 words: A in $a4:5, B in $a6:7; the results go to the
		// first array's.
		s.unit = 4
		out := bRs
		if A.array() {
			out = bLs
		}
		half := func(b *Builder, i AReg, single bool) {
			if A.array() {
				b.F1(isa.CVTHF, bL, bLs+i)
			}
			if B.array() {
				b.F1(isa.CVTHF, bR, bRs+i)
			}
			p.compute(b, L, R, B.array(), single)
			b.F1(isa.CVTFH, out+i, A0)
		}
		s.body = func(b *Builder) {
			if A.array() {
				b.Ld64P(bLs, lPtr, 8)
			}
			if B.array() {
				b.Ld64P(bRs, rPtr, 8)
			}
			half(b, 0, false)
			half(b, 1, false)
			b.St64P(out, sOut, 8)
		}
		s.tail = func(b *Builder, rem int) {
			if A.array() {
				f16Load(b, bLs, lPtr, rem)
			}
			if B.array() {
				f16Load(b, bRs, rPtr, rem)
			}
			half(b, 0, rem == 1)
			if rem == 3 {
				half(b, 1, true)
			}
			f16Store(b, out, rem)
		}
	default:
		op := func(b *Builder, single bool) {
			l := lanes{b, single}
			if A.array() {
				l.load(bL, lPtr)
			}
			if B.array() {
				l.load(bR, rPtr)
			}
			switch p.sel {
			case 0:
				p.compute(b, L, R, B.array(), single)
			default:
				// Y's own value, kept where the condition says so.
				if single {
					b.Ld32(bQ, sOut, 0)
				} else {
					b.Ld64(bQ, sOut, 0)
				}
				if p.sel == selTrue {
					l.sel(A0, L, R, bQ)
				} else {
					l.sel(A0, L, bQ, R)
				}
			}
			l.store(A0, sOut)
		}
		s.body = func(b *Builder) { op(b, false) }
		s.tail = func(b *Builder, _ int) { op(b, true) }
	}
	return s, nil
}

// f16Bcast turns the FP16 element in the low (hi: high) half of $a r
// into the FP32 pair (x, x) in r:r+1, or with h4 into the FP16 quad
// (x, x, x, x). The round trip through FP32 is exact (a NaN stays a NaN,
// which the f16v4 instructions make canonical anyway).
func f16Bcast(b *Builder, r AReg, hi, h4 bool) {
	b.F1(isa.CVTHF, r, r)
	if hi {
		b.Amov(r, r+1)
	} else {
		b.Amov(r+1, r)
	}
	if h4 {
		b.F1(isa.CVTFH, r, r)
		b.Amov(r+1, r)
	}
}

// perRow emits the load of a PerRow operand's element for this row into
// the broadcast pair r, from gCol, and steps gCol to the next row's.
func (p Binary) perRow(b *Builder, o Operand, r AReg, h4 bool) {
	step := int64(p.Type.size()) * int64(o.Stride)
	load := func(d AReg, base MReg) {
		if fitsImm16(step) && base == gCol {
			b.Ld32P(d, base, int32(step))
		} else {
			b.Ld32(d, base, 0)
		}
	}
	switch {
	case p.Type == F32:
		load(r, gCol)
		b.Amov(r+1, r)
	case o.Stride%2 == 0:
		// Every row's element is in the same half of its aligned word,
		// which gCol points to.
		load(r, gCol)
		f16Bcast(b, r, o.Addr&2 != 0, h4)
	default:
		b.Andi(M9, gCol, 2)
		b.Sub(M10, gCol, M9)
		load(r, M10)
		b.F1(isa.CVTHF, r, r)
		b.Mta(bM, M9)
		b.Sel(isa.FSEL, r, bM, r+1, r)
		b.Amov(r+1, r)
		if h4 {
			b.F1(isa.CVTFH, r, r)
			b.Amov(r+1, r)
		}
		addConst(b, gCol, gCol, step, gColStep)
	}
	if !fitsImm16(step) && (p.Type == F32 || o.Stride%2 == 0) {
		b.Add(gCol, gCol, gColStep)
	}
	if p.Op == Div && r == bRs {
		b.F1(isa.V2RCP, bZ, bRs)
	}
}

// compute emits y = L op R on FP32 pairs (the low lanes when single)
// into $a0:1; bArray says B is an array (Div then takes 1/b per pair).
func (p Binary) compute(b *Builder, L, R AReg, bArray, single bool) {
	l := lanes{b, single}
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
	case Equal, NotEqual:
		// Masks in $a10:11 ($a12:13 is 0, $a8:9 1.0).
		b.F(isa.V2CMPEQ, bQ, L, R)
		if p.Op == Equal {
			l.sel(A0, bQ, bZ, bN)
		} else {
			l.sel(A0, bQ, bN, bZ)
		}
	case Less:
		b.F(isa.V2CMPLT, bQ, L, R)
		l.sel(A0, bQ, bZ, bN)
	case LessEq:
		b.F(isa.V2CMPEQ, bQ, L, R)
		b.F(isa.V2CMPLT, A2, L, R)
		l.sel(A0, bQ, bZ, bN)
		l.sel(A0, A2, bZ, A0)
	case Div:
		if bArray {
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
}

// Cost returns the kernel's cost: as Unary's (with one table load per
// array operand, plus Y and the count), with body issues per unit (two
// arrays / one array and a broadcast)
//
//	op                        FP32      FP16
//	add, sub, mul, max, min   4 / 3     4 / 3
//	pow                       11 / 10   25 / 22
//	div                       14 / 9    31 / 20 (b broadcast)
//	div (a broadcast)         14        30
//	equal, less, not-equal    5 / 4     12 / 9
//	less-eq                   7 / 6     16 / 13
//
// and setup, per broadcast operand: from memory (Scalar) ConstLen(Addr)+2,
// FP16 ConstLen(Addr&^3)+3 (+2 for add, sub, mul, max, min); a constant
// 1+ConstLen (of its FP32 bits; FP16 add, sub, mul, max, min: of the
// FP16 pair h | h<<16); +4 for Div with b Scalar or Const. A PerRow
// operand costs, per row (the 2-D stream's perRow): FP32 2, FP16 3 with
// an even Stride, 8 with an odd one; +2 at FP16 for add, sub, mul, max,
// min; +1 when esize*Stride is not an imm16, except FP16 with an odd
// Stride (and then ConstLen(esize*Stride) per worker); +4 for Div with b
// PerRow. A comparison adds 5 setup issues (the pairs 1.0 and 0).
func (p Binary) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("%s: %w", p.name(), err)
	}
	return s.cost(), nil
}

// name names the kernel in errors.
func (p Binary) name() string {
	if p.sel != 0 {
		return "select"
	}
	return "binary " + p.Op.String()
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
		return Kernel{}, fmt.Errorf("%s: %w", p.name(), err)
	}
	return s.emit(b)
}

// checkScalars checks the Scalar operands: element-aligned, in memory,
// and not written by the kernel.
func (p Binary) checkScalars(b *Builder) error {
	a := b.Arch()
	es := p.Type.size()
	y := rowSet{name: "Y", addr: int64(p.Y), size: int64(p.outSize()) * int64(p.N), rows: 1}
	if p.R > 1 {
		y.step, y.rows = int64(p.outSize())*int64(p.YStride), int64(p.R)
	}
	for _, x := range []struct {
		name string
		o    Operand
	}{{"A", p.A.norm(p.R)}, {"B", p.B.norm(p.R)}} {
		if !x.o.Scalar {
			continue
		}
		if err := checkBuffer(buffer{x.name, x.o.Addr, uint64(es), false}, uint32(es), a.Memory, "tile memory"); err != nil {
			return err
		}
		if (rowSet{addr: int64(x.o.Addr), size: int64(es), rows: 1}).overlaps(y) {
			return fmt.Errorf("scalar %s at %#x lies in Y", x.name, x.o.Addr)
		}
	}
	return nil
}
