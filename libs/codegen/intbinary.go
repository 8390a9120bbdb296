package codegen

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
)

// IntOp is an int32 elementwise operation.
type IntOp uint8

// Int32 operations: Y = A op B on int32 elements (the device's form of
// ONNX int32 and int64 tensors, int64 held as int32). A sum, difference
// or product outside the int32 range faults the device (a load outside
// tile memory after the worker's elements are written) instead of
// wrapping: an int64 value the device cannot hold is an error, not a
// silent wrap. (Trunc, a cast whose out-of-range results ONNX leaves
// undefined, saturates instead; see below.)
//
// The comparisons store BOOL as the device holds it, the FP32 words 0.0
// and 1.0 (0x3F800000): IntEq (A == B), IntNe (A != B), IntLess (A < B)
// and IntLessEq (A <= B), signed. IntNonZero stores the int32 A != B as
// 0 or 1 (a BOOL word against 0: a cast from BOOL to an integer). IntMin
// and IntMax store the signed minimum and maximum. None of them can
// overflow.
//
// IntTrunc reads A's word as FP32 and stores it truncated toward zero
// (f32toi32; B is not read): ONNX Cast from float to int32 and int64,
// which leaves values out of range undefined. As the instruction does, a
// NaN gives 0 and values beyond int32 (infinities too) saturate to its
// range. It does not fault: exporters cast values that the graph then
// discards (T5's relative position buckets cast log(0) = -Inf to int64
// and select them away).
const (
	IntAdd IntOp = iota
	IntSub
	IntMul
	IntEq
	IntNe
	IntLess
	IntLessEq
	IntNonZero
	IntMin
	IntMax
	IntTrunc
	numIntOps
)

var intOpNames = [numIntOps]string{"add", "sub", "mul", "eq", "ne", "less", "lesseq", "nonzero", "min", "max", "trunc"}

// compares reports whether op stores a BOOL word.
func (op IntOp) compares() bool { return op >= IntEq && op <= IntLessEq }

// boolOne is BOOL's true as the device holds it: FP32 1.0.
const boolOne = 0x3F800000

func (op IntOp) String() string {
	if op < numIntOps {
		return intOpNames[op]
	}
	return fmt.Sprintf("int(%d)", uint8(op))
}

// IntBinary is an int32 elementwise kernel of N elements, one row: A and
// B are arrays, Scalar (one element in memory) or Const (the int32 in
// Value's bits: math.Float32frombits(uint32(v))); Y may be an array
// operand (in place). Per element: the array loads (ldm), the operation,
// the store and, for Add, Sub and Mul, the overflow test (3 issues: two signed compares and an
// or into the worker's overflow flag; Add: s < a differs from b < 0;
// Sub: a < s differs from b < 0). Mul stores the low 32 bits (mul) and
// tests the magnitudes' 64-bit product from 16-bit halves, branch-free
// (29 more issues): |a|*|b| must be at most 2^31 - 1, or 2^31 when the
// signs differ. Trunc: mta, f32toi32, mfa and the store. Work is split over the workers
// as Binary's, unit 1.
type IntBinary struct {
	Op      IntOp
	N       int
	A, B    Operand
	Y       uint32
	Workers int
}

// Registers: the operands in $m7 (A) and $m8 (B), the result in $m9,
// scratch $m10 (Mul also $m0, $m1, $m13, $m14, and 2^31 - 1 in $m6: a
// unit of 1 has no tail flag; the comparisons BOOL's 1.0 in $m6; Trunc
// $a0), the overflow flag $m12 (0 for every op but Add, Sub and Mul).
const (
	ibA, ibB, ibS, ibT, ibF = M7, M8, M9, M10, M12
	ibMax                   = M6
)

func (p IntBinary) stream() (*stream, error) {
	if p.Op >= numIntOps {
		return nil, fmt.Errorf("unknown int op %d", p.Op)
	}
	for _, x := range []struct {
		name string
		o    Operand
	}{{"A", p.A}, {"B", p.B}} {
		if x.o.PerRow || x.o.Stride != 0 {
			return nil, fmt.Errorf("operand %s: an int32 kernel takes arrays, Scalar and Const operands of one row", x.name)
		}
		if x.o.Scalar && x.o.Const {
			return nil, fmt.Errorf("operand %s is both Scalar and Const", x.name)
		}
	}
	A, B := p.A, p.B
	if !A.array() && !B.array() {
		return nil, fmt.Errorf("both operands are broadcasts")
	}
	s := &stream{n: p.N, unit: 1, workers: p.Workers, output: array{"Y", p.Y, 4, 0}}
	var aPtr, bPtr MReg
	if A.array() {
		aPtr = sIn0
		s.inputs = append(s.inputs, array{"A", A.Addr, 4, 0})
	}
	if B.array() {
		bPtr = sIn0
		if A.array() {
			bPtr = sIn1
		}
		s.inputs = append(s.inputs, array{"B", B.Addr, 4, 0})
	}
	s.setup = func(b *Builder) {
		for _, x := range []struct {
			o Operand
			r MReg
		}{{A, ibA}, {B, ibB}} {
			switch {
			case x.o.Const:
				b.LoadConst(x.r, math.Float32bits(x.o.Value))
			case x.o.Scalar:
				b.LoadAddr(ibT, x.o.Addr)
				b.Ldm(x.r, ibT, 0)
			}
		}
		b.Add(ibF, MZero, MZero)
		switch {
		case p.Op == IntMul:
			b.LoadConst(ibMax, math.MaxInt32)
		case p.Op.compares():
			b.LoadConst(ibMax, boolOne)
		}
	}
	s.body = func(b *Builder) {
		if A.array() {
			b.LdmP(ibA, aPtr, 4)
		}
		if B.array() {
			b.LdmP(ibB, bPtr, 4)
		}
		if p.Op == IntTrunc {
			truncWord(b)
			return
		}
		if p.Op == IntMul {
			b.Mul(ibS, ibA, ibB)
			b.StmP(ibS, sOut, 4)
			mulOverflow(b)
			return
		}
		switch p.Op {
		case IntMin, IntMax:
			op := isa.MIN
			if p.Op == IntMax {
				op = isa.MAX
			}
			b.r(op, uint8(ibS), uint8(ibA), uint8(ibB))
			b.StmP(ibS, sOut, 4)
			return
		}
		if p.Op >= IntEq {
			intCompare(b, p.Op)
			b.StmP(ibS, sOut, 4)
			return
		}
		switch p.Op {
		case IntAdd:
			b.Add(ibS, ibA, ibB)
			b.r(isa.CMPLT, uint8(ibT), uint8(ibS), uint8(ibA)) // s < a
		case IntSub:
			b.Sub(ibS, ibA, ibB)
			b.r(isa.CMPLT, uint8(ibT), uint8(ibA), uint8(ibS)) // a < s
		}
		b.StmP(ibS, sOut, 4)
		b.r(isa.CMPLT, uint8(ibS), uint8(ibB), uint8(MZero)) // b < 0
		b.Xor(ibT, ibT, ibS)
		b.Or(ibF, ibF, ibT)
	}
	s.tail = func(*Builder, int) {}
	var fault Label // a label of the builder finish last ran on
	s.finish = func(b *Builder) {
		fault = b.Label()
		b.Brnz(ibF, fault)
	}
	s.after = func(b *Builder) {
		b.Bind(fault)
		b.Ldm(ibT, MZero, 0) // an int32 overflow: fault outside tile memory
	}
	return s, nil
}

// intCompare sets $m9 to the comparison op of $m7 and $m8: a BOOL word
// (the 0/1 of the compare made 0 or all ones, and with FP32 1.0 in
// $m6), or, for IntNonZero, 0 or 1.
func intCompare(b *Builder, op IntOp) {
	r := func(op isa.Op, d, a, c MReg) { b.r(op, uint8(d), uint8(a), uint8(c)) }
	switch op {
	case IntEq, IntNe, IntNonZero:
		r(isa.CMPEQ, ibS, ibA, ibB)
	case IntLess:
		r(isa.CMPLT, ibS, ibA, ibB)
	case IntLessEq:
		r(isa.CMPLT, ibS, ibB, ibA) // a <= b is not b < a
	}
	switch op {
	case IntEq, IntLess:
		b.Sub(ibS, MZero, ibS) // 1 -> all ones
	case IntNe, IntLessEq:
		b.Addi(ibS, ibS, -1) // 0 -> all ones, 1 -> 0
	case IntNonZero:
		b.i(isa.XORI, uint8(ibS), uint8(ibS), 1)
		return
	}
	b.And(ibS, ibS, ibMax)
}

// truncWord stores the FP32 in $m7 truncated to int32, saturating.
func truncWord(b *Builder) {
	b.Mta(A0, ibA)
	b.F1(isa.CVTFI, A0, A0)
	b.Mfa(ibS, A0)
	b.StmP(ibS, sOut, 4)
}

// mulOverflow ors into the flag whether a*b leaves int32.
func mulOverflow(b *Builder) {
	r := func(op isa.Op, d, a, c MReg) { b.r(op, uint8(d), uint8(a), uint8(c)) }
	const ua, ub, x, y = M13, M14, M0, M1
	abs := func(d, v MReg) { // d = |v| as uint32 (|MinInt32| = 2^31)
		b.i(isa.SARI, uint8(ibT), uint8(v), 31)
		b.Xor(d, v, ibT)
		b.Sub(d, d, ibT)
	}
	abs(ua, ibA)
	abs(ub, ibB)
	b.Shri(x, ua, 16)
	b.Shri(y, ub, 16)
	b.Mul(ibT, x, y) // both high halves: at least 2^32
	b.Or(ibF, ibF, ibT)
	b.Andi(ua, ua, 0xFFFF)
	b.Andi(ub, ub, 0xFFFF)
	b.Mul(ibT, x, ub) // the middle terms (one of them 0 unless flagged)
	b.Mul(x, ua, y)
	b.Add(ibT, ibT, x)
	b.Shri(x, ibT, 16) // the middle term times 2^16 reaches 2^32
	b.Or(ibF, ibF, x)
	b.Mul(ua, ua, ub) // low halves' product (< 2^32, exact)
	b.Shli(ibT, ibT, 16)
	b.Add(ub, ibT, ua)
	r(isa.CMPULT, x, ub, ua) // carry out of 32 bits
	b.Or(ibF, ibF, x)
	b.Xor(x, ibA, ibB)
	r(isa.CMPLT, x, x, MZero) // the signs differ: 2^31 is in range
	b.Add(x, x, ibMax)
	r(isa.CMPULT, x, x, ub) // the magnitude above the limit
	b.Or(ibF, ibF, x)
}

// Cost returns the kernel's cost, counted from its code.
func (p IntBinary) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("int %s: %w", p.Op, err)
	}
	return s.cost(), nil
}

// EmitIntBinary emits the kernel at b's current position.
func EmitIntBinary(b *Builder, p IntBinary) (Kernel, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(b)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("int %s: %w", p.Op, err)
	}
	return s.emit(b)
}

// EmulateIntBinary returns op's int32 result (a comparison's BOOL word
// as an int32) and whether it is in range.
func EmulateIntBinary(op IntOp, a, b int32) (int32, bool) {
	var r int64
	truth := func(v bool) int64 {
		if v {
			return boolOne
		}
		return 0
	}
	switch op {
	case IntAdd:
		r = int64(a) + int64(b)
	case IntSub:
		r = int64(a) - int64(b)
	case IntMul:
		r = int64(a) * int64(b)
	case IntEq:
		r = truth(a == b)
	case IntNe:
		r = truth(a != b)
	case IntLess:
		r = truth(a < b)
	case IntLessEq:
		r = truth(a <= b)
	case IntNonZero:
		if a != b {
			r = 1
		}
	case IntMin:
		r = int64(min(a, b))
	case IntMax:
		r = int64(max(a, b))
	case IntTrunc:
		switch f := float64(math.Float32frombits(uint32(a))); {
		case f != f:
			r = 0
		case f <= math.MinInt32:
			r = math.MinInt32
		case f >= math.MaxInt32:
			r = math.MaxInt32
		default:
			r = int64(f) // toward zero
		}
	}
	return int32(r), r >= math.MinInt32 && r <= math.MaxInt32
}
