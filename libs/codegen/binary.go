package codegen

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// This file holds Binary, the elementwise kernel of two operands (arrays,
// broadcasts or per-row columns): its operations, its stream body per
// element type and its cost.

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

// binaryLanes are a Binary stream's operand registers: the normalized
// operands, the pairs the op reads (L, R: the arrays' or the
// broadcasts') and the arrays' stream pointers.
type binaryLanes struct {
	A, B       Operand
	L, R       AReg
	lPtr, rPtr MReg
}

func (p Binary) stream() (*stream, error) {
	if err := p.checkStream(); err != nil {
		return nil, err
	}
	A, B := p.A.norm(p.R), p.B.norm(p.R)
	es := p.Type.size()
	s := &stream{n: p.N, unit: 2, workers: p.Workers, rows: p.R, output: array{"Y", p.Y, p.outSize(), p.YStride}}
	g := binaryLanes{A: A, B: B, L: bL, R: bR}
	if A.array() {
		g.lPtr = sIn0
		s.inputs = append(s.inputs, array{"A", A.Addr, es, A.Stride})
	} else {
		g.L = bLs
	}
	if B.array() {
		g.rPtr = sIn0
		if A.array() {
			g.rPtr = sIn1
		}
		s.inputs = append(s.inputs, array{"B", B.Addr, es, B.Stride})
	} else {
		g.R = bRs
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
	s.setup = func(b *Builder) { p.setup(b, A, B, h4) }
	switch {
	case p.Type == F16 && p.Op.Compare():
		p.compareF16(s, g)
	case h4:
		p.h4Body(s, g, h4op)
	case p.Type == F16:
		p.f16Body(s, g)
	default:
		p.f32Body(s, g)
	}
	return s, nil
}

// checkStream checks the op, the element type, the row count and the
// operands.
func (p Binary) checkStream() error {
	if p.Op >= numBinary {
		return fmt.Errorf("unknown binary op %d", p.Op)
	}
	if p.Type >= numElemTypes {
		return fmt.Errorf("unknown element type %d", p.Type)
	}
	if p.R < 0 {
		return fmt.Errorf("row count %d is negative", p.R)
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
			return fmt.Errorf("operand %s has more than one of Scalar, Const and PerRow", x.name)
		}
		if x.o.Const && p.Type == F16 {
			v := math.Float32bits(x.o.Value)
			if numfmt.F16ToF32(numfmt.F32ToF16(v)) != v {
				return fmt.Errorf("operand %s: constant %g is not an FP16 value", x.name, x.o.Value)
			}
		}
	}
	A, B := p.A.norm(p.R), p.B.norm(p.R)
	if p.sel != 0 && p.Type != F32 {
		return fmt.Errorf("a selection of %d-byte elements (want 4)", p.Type.size())
	}
	if !A.array() && !B.array() && p.sel == 0 {
		return fmt.Errorf("both operands are broadcasts")
	}
	return nil
}

// setup emits the broadcasts' loads and the op's constants.
func (p Binary) setup(b *Builder, A, B Operand, h4 bool) {
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

// compareF16 makes s an FP16 comparison: FP16 operands in $a4:5 and
// $a6:7, each half compared as an FP32 pair and stored as two words.
func (p Binary) compareF16(s *stream, g binaryLanes) {
	A, B, L, R, lPtr, rPtr := g.A, g.B, g.L, g.R, g.lPtr, g.rPtr
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
}

// h4Body makes s an FP16 op with an f16v4 instruction (h4op) on the
// FP16 quads.
func (p Binary) h4Body(s *stream, g binaryLanes, h4op isa.Op) {
	A, B, L, R, lPtr, rPtr := g.A, g.B, g.L, g.R, g.lPtr, g.rPtr
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
}

// f16Body makes s an FP16 op computed in FP32: raw FP16 words, A in
// $a4:5, B in $a6:7; the results go to the first array's.
func (p Binary) f16Body(s *stream, g binaryLanes) {
	A, B, L, R, lPtr, rPtr := g.A, g.B, g.L, g.R, g.lPtr, g.rPtr
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
}

// f32Body makes s an FP32 op, or a selection (sel) keeping Y's own value
// where the condition says so.
func (p Binary) f32Body(s *stream, g binaryLanes) {
	A, B, L, R, lPtr, rPtr := g.A, g.B, g.L, g.R, g.lPtr, g.rPtr
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
