package codegen

import (
	"encoding/binary"
	"math"

	"ipu.local/libs/fmath"
	"ipu.local/libs/numfmt"
)

// This file emulates, in plain Go, the arithmetic order each kernel's doc
// defines, with the semantics of the instructions it uses, so that a host
// reference can reproduce the device bit for bit. Every arithmetic result
// that is a NaN is the canonical quiet NaN 0x7fc00000, as on the device.

const canonNaN = 0x7FC00000

// canon returns the bits of an arithmetic result.
func canon(f float32) uint32 {
	if f != f {
		return canonNaN
	}
	return math.Float32bits(f)
}

// cf canonicalises a float32 NaN.
func cf(f float32) float32 { return math.Float32frombits(canon(f)) }

func fb(b uint32) float32 { return math.Float32frombits(b) }

// Instruction semantics (isa table).

func rn32(x float64) float32 { return cf(float32(x)) }

func iexp(x float32) float32  { return cf(fmath.Exp(x)) }
func ilog(x float32) float32  { return cf(fmath.Log(x)) }
func isqrt(x float32) float32 { return rn32(math.Sqrt(float64(x))) }
func itanh(x float32) float32 { return cf(fmath.Tanh(x)) }
func ierf(x float32) float32  { return cf(fmath.Erf(x)) }
func isin(x float32) float32  { return cf(fmath.Sin(x)) }
func icos(x float32) float32  { return cf(fmath.Cos(x)) }
func ircp(x float32) float32  { return cf(1 / x) }
func irsqrt(x float32) float32 {
	return rn32(1 / math.Sqrt(float64(x)))
}
func ipow(x, y float32) float32 { return cf(fmath.Pow(x, y)) }

// ifma is d + a*b as the device's f32fma: rounded once to FP32.
func ifma(d, a, b float32) float32 {
	return rn32(numfmt.SumRTO(float64(float64(a)*float64(b)), float64(d)))
}

func iadd(a, b float32) float32 { return cf(a + b) }
func isub(a, b float32) float32 { return cf(a - b) }
func imul(a, b float32) float32 { return cf(a * b) }

// imax and imin are f32max and f32min: NaN if either is NaN; max(-0, +0)
// is +0, min(-0, +0) is -0.
func imax(a, b float32) float32 {
	switch {
	case a != a || b != b:
		return fb(canonNaN)
	case a > b:
		return a
	case b > a:
		return b
	}
	return fb(math.Float32bits(a) & math.Float32bits(b))
}

func imin(a, b float32) float32 {
	switch {
	case a != a || b != b:
		return fb(canonNaN)
	case a < b:
		return a
	case b < a:
		return b
	}
	return fb(math.Float32bits(a) | math.Float32bits(b))
}

func ineg(a float32) float32 { return fb(math.Float32bits(a) ^ 0x80000000) }
func iabs(a float32) float32 { return fb(math.Float32bits(a) &^ 0x80000000) }

// EmulateMatMul returns what MatMul computes: C (M x N, dense row-major)
// from row-major A (M x K) and B (K x N) holding the input values (for
// FP8, the unscaled FP8 values, with scale = ScaleA + ScaleB), and the
// initial C (nil: zeros).
func EmulateMatMul(m, k, n int, a, b []float32, scale int, c []float32) []float32 {
	return matMulChain(m, k, n, a, b, c, func(acc, x, y float32) float32 {
		p := x * y // exact for FP16 and FP8 values
		if scale != 0 {
			p = float32(math.Ldexp(float64(p), scale))
		}
		return acc + p
	}, true)
}

// EmulateMatMulF32 returns what MatMul computes on FP32 inputs (AMPFP32):
// C (M x N, dense row-major) from row-major A (M x K) and B (K x N) and
// the initial C (nil: zeros), in the kernel's k order with ampf's
// (f32v2fma's) rounding.
func EmulateMatMulF32(m, k, n int, a, b, c []float32) []float32 {
	return matMulChain(m, k, n, a, b, c, ifma, true)
}

// matMulChain returns C (M x N, dense row-major) from row-major A (M x K)
// and B (K x N) and the initial C (nil: zeros): each element's chain
// acc = step(acc, A[i][k], B[k][j]) for k in order, its NaNs made
// canonical when canonical is set.
func matMulChain(m, k, n int, a, b, c []float32, step func(acc, x, y float32) float32, canonical bool) []float32 {
	out := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var acc float32
			if c != nil {
				acc = c[i*n+j]
			}
			for kk := 0; kk < k; kk++ {
				acc = step(acc, a[i*k+kk], b[kk*n+j])
			}
			if canonical {
				acc = cf(acc)
			}
			out[i*n+j] = acc
		}
	}
	return out
}

// roundingFuncs define Floor, Ceil and Round.
var roundingFuncs = map[UnaryOp]func(float64) float64{Floor: math.Floor, Ceil: math.Ceil, Round: math.RoundToEven}

// EmulateUnary returns what Unary computes for one element.
func EmulateUnary(p Unary, x float32) float32 {
	switch p.Op {
	case Neg:
		return ineg(x)
	case Abs:
		return iabs(x)
	case Relu:
		return imax(x, 0)
	case Exp:
		return iexp(x)
	case Sqrt:
		return isqrt(x)
	case Tanh:
		return itanh(x)
	case Sigmoid:
		return ircp(iadd(iexp(ineg(x)), 1))
	case GeluErf:
		t := ierf(imul(x, geluErfC))
		return imul(imul(x, 0.5), iadd(t, 1))
	case GeluTanh:
		q := imul(imul(x, x), x)
		v := iadd(x, imul(q, geluTanh1))
		t := itanh(imul(v, geluTanh0))
		return imul(imul(x, 0.5), iadd(t, 1))
	case PowConst:
		return ipow(x, p.Exponent)
	case Clip:
		return imin(imax(x, p.Min), p.Max)
	case Log:
		return ilog(x)
	case Erf:
		return ierf(x)
	case Sin:
		return isin(x)
	case Cos:
		return icos(x)
	case Softplus:
		e := iexp(ineg(iabs(x)))
		return iadd(imax(x, 0), ilog(iadd(e, 1)))
	case LeakyRelu:
		if x < 0 {
			return imul(x, p.Alpha)
		}
		return x
	case Elu:
		if 0 < x {
			return x
		}
		return imul(isub(iexp(x), 1), p.Alpha)
	case Selu:
		v := isub(imul(iexp(x), p.Alpha), p.Alpha)
		if 0 < x {
			v = x
		}
		return imul(v, p.Gamma)
	case HardSigmoid:
		return imax(imin(iadd(imul(x, p.Alpha), p.Beta), 1), 0)
	case HardSwish:
		h := imax(imin(iadd(imul(x, sixth), 0.5), 1), 0)
		return imul(x, h)
	case Sign:
		switch {
		case 0 < x:
			return 1
		case x < 0:
			return -1
		}
		return 0
	case Floor, Ceil, Round:
		if x != x {
			return x // unchanged, payload and sign
		}
		f := roundingFuncs[p.Op]
		return float32(f(float64(x))) // exact: an integer of x's magnitude at most
	}
	return fb(canonNaN)
}

// EmulateBinary returns what Binary computes for one element.
func EmulateBinary(op BinaryOp, a, b float32) float32 {
	switch op {
	case Add:
		return iadd(a, b)
	case Sub:
		return isub(a, b)
	case Mul:
		return imul(a, b)
	case Max:
		return imax(a, b)
	case Min:
		return imin(a, b)
	case Pow:
		return ipow(a, b)
	case Equal:
		return boolF(a == b)
	case NotEqual:
		return boolF(a != b)
	case Less:
		return boolF(a < b)
	case LessEq:
		return boolF(a < b || a == b)
	case Div:
		z := ircp(b)
		q := imul(a, z)
		r := ifma(a, ineg(q), b)
		q2 := ifma(q, r, z)
		if q2 != q2 {
			return q
		}
		return q2
	}
	return fb(canonNaN)
}

// EmulateUnaryF16 returns what Unary with Type F16 computes for one
// element: x converted exactly to FP32, EmulateUnary, rounded once to
// FP16 (numfmt, as f16v2tof32 and f32v2tof16).
func EmulateUnaryF16(p Unary, x uint16) uint16 {
	return numfmt.F32ToF16(math.Float32bits(EmulateUnary(p, fb(numfmt.F16ToF32(x)))))
}

// boolF is a BOOL element as the device holds it.
func boolF(c bool) float32 {
	if c {
		return 1
	}
	return 0
}

// EmulateCompareF16 returns what a comparison Binary with Type F16
// computes for one element: a BOOL word (1.0 or 0.0) from FP16 operands.
func EmulateCompareF16(op BinaryOp, a, b uint16) float32 {
	return EmulateBinary(op, fb(numfmt.F16ToF32(a)), fb(numfmt.F16ToF32(b)))
}

// EmulateBinaryF16 returns what Binary with Type F16 computes for one
// element: the operands converted exactly to FP32, EmulateBinary, rounded
// once to FP16. For Add, Sub, Mul, Max and Min this is the f16v4
// instruction's single rounding (see BinaryOp).
func EmulateBinaryF16(op BinaryOp, a, b uint16) uint16 {
	return numfmt.F32ToF16(math.Float32bits(EmulateBinary(op, fb(numfmt.F16ToF32(a)), fb(numfmt.F16ToF32(b)))))
}

// EmulateCast returns what Cast computes: the bytes of Y from the bytes
// of X (n elements, little-endian).
func EmulateCast(p Cast, x []byte) []byte {
	ein, eout := p.Kind.sizes()
	out := make([]byte, p.N*eout)
	mode := numfmt.Saturate
	if !p.Saturate {
		mode = numfmt.NaNOnOverflow
	}
	for i := 0; i < p.N; i++ {
		src := x[i*ein:]
		dst := out[i*eout:]
		switch p.Kind {
		case F32ToF16:
			h := numfmt.F32ToF16(binary.LittleEndian.Uint32(src))
			if p.MulF16 != 0 {
				h = EmulateBinaryF16(Mul, h, p.MulF16)
			}
			binary.LittleEndian.PutUint16(dst, h)
		case F16ToF32:
			binary.LittleEndian.PutUint32(dst, numfmt.F16ToF32(binary.LittleEndian.Uint16(src)))
		case F32ToF8:
			dst[0] = numfmt.F32ToF8Dev(binary.LittleEndian.Uint32(src), p.Format, p.Scale, mode)
		case F8ToF32:
			binary.LittleEndian.PutUint32(dst, numfmt.F8ToF32(src[0], p.Format, p.Scale))
		case F16ToF8:
			dst[0] = numfmt.F16ToF8Dev(binary.LittleEndian.Uint16(src), p.Format, p.Scale, mode)
		case I32ToF32:
			binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(int32(binary.LittleEndian.Uint32(src)))))
		}
	}
	return out
}

// laneSum is the lane sum of the row operations' doc.
func laneSum(v []float32, f func(acc, x float32) float32) float32 {
	var s [2]float32
	for j, x := range v {
		s[j%2] = f(s[j%2], x)
	}
	return iadd(s[0], s[1])
}

// EmulateRow returns what Rows computes for one row x: the C outputs (one
// for the reductions) and, for LayerNorm, mu and r. g and bias are the
// LayerNorm scale and bias (nil: none).
func EmulateRow(p Rows, x, g, bias []float32) (y []float32, mu, r float32) {
	c := float32(1 / float64(len(x)))
	switch p.Op {
	case ReduceSum, ReduceMean:
		s := laneSum(x, iadd)
		if p.Op == ReduceMean {
			s = imul(s, c)
		}
		return []float32{s}, 0, 0
	case Softmax, LogSoftmax:
		var m [2]float32
		m[0], m[1] = float32(math.Inf(-1)), float32(math.Inf(-1))
		for j, v := range x {
			m[j%2] = imax(m[j%2], v)
		}
		mx := imax(m[0], m[1])
		e := make([]float32, len(x))
		for j, v := range x {
			e[j] = iexp(isub(v, mx))
		}
		s := laneSum(e, iadd)
		y = make([]float32, len(x))
		if p.Op == Softmax {
			z := ircp(s)
			for j := range y {
				y[j] = imul(e[j], z)
			}
			return y, 0, 0
		}
		l := ilog(s)
		for j, v := range x {
			y[j] = isub(isub(v, mx), l)
		}
		return y, 0, 0
	}
	mu = imul(laneSum(x, iadd), c)
	q := laneSum(x, func(acc, v float32) float32 {
		d := isub(v, mu)
		return ifma(acc, d, d)
	})
	r = irsqrt(iadd(imul(q, c), p.Epsilon))
	y = make([]float32, len(x))
	for j, v := range x {
		z := imul(isub(v, mu), r)
		switch {
		case g != nil && bias != nil:
			z = ifma(bias[j], z, g[j])
		case g != nil:
			z = imul(z, g[j])
		case bias != nil:
			z = iadd(z, bias[j])
		}
		y[j] = z
	}
	return y, mu, r
}
