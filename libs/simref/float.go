package simref

import (
	"math"

	"ipu.local/libs/fmath"
	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// scalarFloat computes the FP32 instructions with one result register: d is
// the old destination (fma), a, b, c the sources, a1 the register after a
// (the high lane of a pair source).
func scalarFloat(op isa.Op, d, a, b, c, a1 uint32) uint32 {
	fa, fb, fd := f32from(a), f32from(b), f32from(d)
	switch op {
	case isa.FADD:
		return arith32(fa + fb)
	case isa.FSUB:
		return arith32(fa - fb)
	case isa.FMUL:
		return arith32(fa * fb)
	case isa.FMA:
		return arith32(float32(numfmt.SumRTO(float64(float64(fa)*float64(fb)), float64(fd))))
	case isa.FMAX:
		return arith32(fmax(fa, fb))
	case isa.FMIN:
		return arith32(fmin(fa, fb))
	case isa.FCMPLT:
		return mask32(fa < fb)
	case isa.FSEL:
		if a != 0 {
			return b
		}
		return c
	case isa.FEXP:
		return arith32(fmath.Exp(fa))
	case isa.FLOG:
		return arith32(fmath.Log(fa))
	case isa.FRCP:
		return arith32(1 / fa)
	case isa.FRSQRT:
		return arith32(float32(1 / math.Sqrt(float64(fa))))
	case isa.FSQRT:
		return arith32(float32(math.Sqrt(float64(fa))))
	case isa.FTANH:
		return arith32(fmath.Tanh(fa))
	case isa.FERF:
		return arith32(fmath.Erf(fa))
	case isa.FSIN:
		return arith32(fmath.Sin(fa))
	case isa.FCOS:
		return arith32(fmath.Cos(fa))
	case isa.FABS:
		return a &^ (1 << 31)
	case isa.FNEG:
		return a ^ 1<<31
	case isa.FPOW:
		return arith32(fmath.Pow(fa, fb))
	case isa.FSUM2:
		return arith32(fa + f32from(a1))
	case isa.H4SUMF:
		l0, l1 := f32from(f16to32(uint16(a))), f32from(f16to32(uint16(a>>16)))
		l2, l3 := f32from(f16to32(uint16(a1))), f32from(f16to32(uint16(a1>>16)))
		return arith32(((l0 + l1) + l2) + l3)
	}
	panic("simref: not a scalar float op: " + op.String())
}

// vectorFloat computes one lane of an f32v2 instruction.
func vectorFloat(op isa.Op, d, a, b, c uint32) uint32 {
	fa, fb := f32from(a), f32from(b)
	switch op {
	case isa.V2ADD:
		return scalarFloat(isa.FADD, d, a, b, c, 0)
	case isa.V2SUB:
		return scalarFloat(isa.FSUB, d, a, b, c, 0)
	case isa.V2MUL:
		return scalarFloat(isa.FMUL, d, a, b, c, 0)
	case isa.V2FMA:
		return scalarFloat(isa.FMA, d, a, b, c, 0)
	case isa.V2MAX:
		return scalarFloat(isa.FMAX, d, a, b, c, 0)
	case isa.V2MIN:
		return scalarFloat(isa.FMIN, d, a, b, c, 0)
	case isa.V2CMPLT:
		return mask32(fa < fb)
	case isa.V2CMPEQ:
		return mask32(fa == fb)
	case isa.V2SEL:
		return scalarFloat(isa.FSEL, d, a, b, c, 0)
	case isa.V2EXP:
		return scalarFloat(isa.FEXP, d, a, b, c, 0)
	case isa.V2RCP:
		return scalarFloat(isa.FRCP, d, a, b, c, 0)
	case isa.V2ABS:
		return scalarFloat(isa.FABS, d, a, b, c, 0)
	case isa.V2NEG:
		return scalarFloat(isa.FNEG, d, a, b, c, 0)
	}
	panic("simref: not an f32v2 op: " + op.String())
}

// halfFloat computes one lane of an f16v4 instruction: the lanes are exact
// in float64, the result is rounded to FP16 once.
func halfFloat(op isa.Op, d, a, b, c uint16) uint16 {
	fa, fb, fd := f16to64(a), f16to64(b), f16to64(d)
	switch op {
	case isa.H4ADD:
		return arith16(fa + fb)
	case isa.H4SUB:
		return arith16(fa - fb)
	case isa.H4MUL:
		return arith16(fa * fb)
	case isa.H4FMA:
		return arith16(numfmt.SumRTO(float64(fa*fb), fd))
	case isa.H4MAX:
		return arith16(fmax(fa, fb))
	case isa.H4MIN:
		return arith16(fmin(fa, fb))
	case isa.H4CMPLT:
		return uint16(mask32(fa < fb))
	case isa.H4CMPEQ:
		return uint16(mask32(fa == fb))
	case isa.H4SEL:
		if a != 0 {
			return b
		}
		return c
	}
	panic("simref: not an f16v4 op: " + op.String())
}

// fmax is max with NaN if either operand is NaN and max(-0, +0) = +0.
func fmax[F float32 | float64](a, b F) F {
	switch {
	case a != a || b != b:
		return F(math.NaN())
	case a == 0 && b == 0:
		if math.Signbit(float64(a)) {
			return b
		}
		return a
	case a > b:
		return a
	}
	return b
}

// fmin is min with NaN if either operand is NaN and min(-0, +0) = -0.
func fmin[F float32 | float64](a, b F) F {
	switch {
	case a != a || b != b:
		return F(math.NaN())
	case a == 0 && b == 0:
		if math.Signbit(float64(a)) {
			return a
		}
		return b
	case a < b:
		return a
	}
	return b
}

// Arithmetic results that are NaN are the canonical quiet NaN, so that no
// result depends on how the host CPU propagates NaN payloads. Moves,
// abs, neg, selects and the conversions keep their bits.
const (
	canonNaN32 = 0x7fc00000
	canonNaN16 = 0x7e00
)

func arith32(f float32) uint32 {
	if f != f {
		return canonNaN32
	}
	return f32bits(f)
}

// arith16 rounds an f16v4 lane result to FP16 once.
func arith16(f float64) uint16 {
	if f != f {
		return canonNaN16
	}
	return f64to16(f)
}

func mask32(b bool) uint32 {
	if b {
		return 0xffffffff
	}
	return 0
}

func f16to64(h uint16) float64 { return float64(f32from(f16to32(h))) }

// fp8 configuration fields of CSR fp8.
func fp8FormatA(csr uint32) int { return int(csr>>isa.FP8FormatAShift) & 3 }
func fp8FormatB(csr uint32) int { return int(csr>>isa.FP8FormatBShift) & 3 }
func fp8ScaleA(csr uint32) int  { return signed6(csr >> isa.FP8ScaleAShift) }
func fp8ScaleB(csr uint32) int  { return signed6(csr >> isa.FP8ScaleBShift) }
func fp8NaNOnOverflow(csr uint32) bool {
	return csr&isa.FP8NaNOnOverflow != 0
}

func signed6(v uint32) int { return int(int32(v<<26) >> 26) }

// convert computes the conversions: lo is the result register (or the low
// register of a pair result), hi the high register of a pair result.
func convert(op isa.Op, csr, a, a1 uint32) (lo, hi uint32) {
	fa, sa, nan := fp8FormatA(csr), fp8ScaleA(csr), fp8NaNOnOverflow(csr)
	switch op {
	case isa.CVTFH:
		return uint32(f32to16(a)) | uint32(f32to16(a1))<<16, 0
	case isa.CVTHF:
		return f16to32(uint16(a)), f16to32(uint16(a >> 16))
	case isa.CVTH8:
		var out uint32
		for i, h := range []uint16{uint16(a), uint16(a >> 16), uint16(a1), uint16(a1 >> 16)} {
			out |= uint32(f16to8(h, fa, sa, nan)) << (8 * i)
		}
		return out, 0
	case isa.CVT8H:
		var h [4]uint32
		for i := range h {
			h[i] = uint32(f8to16(uint8(a>>(8*i)), fa, sa))
		}
		return h[0] | h[1]<<16, h[2] | h[3]<<16
	case isa.CVTF8:
		return uint32(f32to8(a, fa, sa, nan)) | uint32(f32to8(a1, fa, sa, nan))<<8, 0
	case isa.CVT8F:
		return f8to32(uint8(a), fa, sa), f8to32(uint8(a>>8), fa, sa)
	case isa.CVTIF:
		return f32bits(float32(int32(a))), 0
	case isa.CVTFI:
		f := f32from(a)
		switch {
		case f != f:
			return 0, 0
		case f >= 1<<31:
			return math.MaxInt32, 0
		case f < -(1 << 31):
			return 1 << 31, 0
		}
		return uint32(int32(f)), 0
	}
	panic("simref: not a conversion: " + op.String())
}

// amph is one FP16 AMP step: x = 4 FP16 at xa, w = 16 FP16 at wa.
func (m *Machine) amph(ti int, c *context, xa, wa uint32) {
	for i := uint32(0); i < 4; i++ {
		xi := f32from(f16to32(m.load16(ti, xa+2*i)))
		for j := uint32(0); j < 16; j++ {
			wj := f32from(f16to32(m.load16(ti, wa+2*j)))
			p := &c.acc[i*16+j]
			*p = *p + float32(xi*wj) // the product is exact: two 11-bit significands
		}
	}
}

// ampf is one FP32 AMP step: x = 4 FP32 at xa, w = 16 FP32 at wa, each
// accumulator element fused as f32v2fma is (one rounding).
func (m *Machine) ampf(ti int, c *context, xa, wa uint32) {
	for i := uint32(0); i < 4; i++ {
		xi := m.load32(ti, xa+4*i)
		for j := uint32(0); j < 16; j++ {
			p := &c.acc[i*16+j]
			*p = f32from(scalarFloat(isa.FMA, f32bits(*p), xi, m.load32(ti, wa+4*j), 0, 0))
		}
	}
}

// ampq is one FP8 AMP step over two k: x bytes 0..3 and w bytes 0..15 for
// k, x bytes 4..7 and w bytes 16..31 for k+1.
func (m *Machine) ampq(ti int, c *context, xa, wa uint32) {
	fa, fb := fp8FormatA(c.fp8), fp8FormatB(c.fp8)
	scale := math.Ldexp(1, fp8ScaleA(c.fp8)+fp8ScaleB(c.fp8))
	for k := uint32(0); k < 2; k++ {
		for i := uint32(0); i < 4; i++ {
			xi := float64(f32from(f8to32(m.load8(ti, xa+4*k+i), fa, 0)))
			for j := uint32(0); j < 16; j++ {
				wj := float64(f32from(f8to32(m.load8(ti, wa+16*k+j), fb, 0)))
				p := &c.acc[i*16+j]
				*p = *p + float32(xi*wj*scale)
			}
		}
	}
}
