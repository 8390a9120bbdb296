package sim

import (
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// The f16v4 lanes without the generic path: FP16 to float64 and back by
// integer arithmetic on the bits in the common range (normal values), the
// generic conversions for the rest. Results equal h4op's bit for bit.

// h16d returns FP16 bits as a float64, exactly.
func h16d(h uint16) float64 {
	if e := h & 0x7C00; e == 0 || e == 0x7C00 {
		return float64(h16f(h)) // zero, subnormal, Inf, NaN
	}
	// Rebias the exponent: FP16 bias 15, FP64 bias 1023.
	return math.Float64frombits(uint64(h&0x8000)<<48 | (uint64(h&0x7FFF)<<42 + 1008<<52))
}

// Bits of 2^-14 (the smallest normal FP16) and 2^16 as FP64.
const (
	f64MinNormal16 = 1009 << 52
	f64Two16       = 1039 << 52
)

// f64to16fast is f64to16: when |x| is in [2^-14, 2^16) it rounds the FP64
// bits to 10 mantissa bits, to nearest even (a carry into the exponent,
// up to Inf at 65520, is the right result), and rebiases.
func f64to16fast(x float64) uint16 {
	b := math.Float64bits(x)
	a := b &^ (1 << 63)
	if a-f64MinNormal16 >= f64Two16-f64MinNormal16 {
		return f64to16(x)
	}
	r := (a + (1<<41 - 1) + (a>>42)&1) >> 42
	return uint16(b>>48)&0x8000 | uint16(r-1008<<10)
}

// h4arith applies H4ADD, H4SUB, H4MUL or H4FMA to the lanes of a and b
// (and d, fma's addend).
func h4arith(op isa.Op, a, b, d uint64) uint64 {
	var r uint64
	switch op {
	case isa.H4ADD:
		for i := 0; i < 64; i += 16 {
			r |= uint64(f64to16fast(h16d(uint16(a>>i))+h16d(uint16(b>>i)))) << i
		}
	case isa.H4SUB:
		for i := 0; i < 64; i += 16 {
			r |= uint64(f64to16fast(h16d(uint16(a>>i))-h16d(uint16(b>>i)))) << i
		}
	case isa.H4MUL:
		for i := 0; i < 64; i += 16 {
			r |= uint64(f64to16fast(h16d(uint16(a>>i))*h16d(uint16(b>>i)))) << i
		}
	case isa.H4FMA:
		for i := 0; i < 64; i += 16 {
			p := float64(h16d(uint16(a>>i)) * h16d(uint16(b>>i))) // exact
			z := h16d(uint16(d >> i))
			s := p + z
			// Round to odd only when the sum is inexact (rarely): by
			// Fast2Sum, s - p is exact when |p| >= |z| and s - z when
			// |z| >= |p|, so both equal the other operand iff s is exact.
			if s-p != z || s-z != p {
				s = numfmt.SumRTO(p, z)
			}
			r |= uint64(f64to16fast(s)) << i
		}
	}
	return r
}

// h4maxmin is H4MAX (max true) or H4MIN on the bits: NaN if either lane
// is a NaN; equal zeros give the AND (max) or OR (min) of the bits.
func h4maxmin(a, b uint64, max bool) uint64 {
	var r uint64
	for i := 0; i < 64; i += 16 {
		ha, hb := uint16(a>>i), uint16(b>>i)
		var v uint16
		switch {
		case ha&0x7FFF > 0x7C00 || hb&0x7FFF > 0x7C00:
			v = qnan16
		case (ha|hb)&0x7FFF == 0 || ha == hb:
			v = ha & hb
			if !max {
				v = ha | hb
			}
		case (order16(ha) > order16(hb)) == max:
			v = ha
		default:
			v = hb
		}
		r |= uint64(v) << i
	}
	return r
}

// order16 maps non-NaN FP16 bits to integers in the order of their values
// (-0 below +0).
func order16(h uint16) uint16 {
	if h&0x8000 != 0 {
		return ^h
	}
	return h | 0x8000
}
