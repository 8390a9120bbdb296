package sim

import (
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// The f16v4 lanes without the generic path: FP16 to FP64 back by integer
// arithmetic on the bits in the common range (normal values), the generic
// conversion for the rest, and fma's round to odd only when needed.
// Results equal h4op's bit for bit.

// Bits of 2^-14 (the smallest normal FP16) and 2^16 as FP64.
const (
	f64MinNormal16 = 1009 << 52
	f64Two16       = 1039 << 52
	f64Two4        = 1027 << 52
)

// round16 is f64to16: when |x| is in [2^-14, 2^16) it rounds the FP64
// bits to 10 mantissa bits, to nearest even (a carry into the exponent,
// up to Inf at 65520, is the right result), and rebiases; f64to16 does
// the rest.
func round16(x float64) uint16 {
	b := math.Float64bits(x)
	a := b &^ (1 << 63)
	if a-f64MinNormal16 >= f64Two16-f64MinNormal16 {
		return f64to16(x)
	}
	return uint16(b>>48)&0x8000 | uint16((a+(1<<41-1)+(a>>42)&1)>>42-1008<<10)
}

// h4arith applies H4ADD, H4SUB, H4MUL or H4FMA to the lanes of a and b
// (and d, fma's addend). Sums and products of FP16 values are exact in
// FP64; the fma's sum may not be.
func h4arith(op isa.Op, a, b, d uint64) uint64 {
	if op == isa.H4FMA {
		return h4fma(a, b, d, halfTable())
	}
	var r uint64
	for i := 0; i < 64; i += 16 {
		x, y := float64(h16f(uint16(a>>i))), float64(h16f(uint16(b>>i)))
		var s float64
		switch op {
		case isa.H4ADD:
			s = x + y
		case isa.H4SUB:
			s = x - y
		case isa.H4MUL:
			s = x * y
		}
		r |= uint64(round16(s)) << i
	}
	return r
}

// h4fma is H4FMA, round16 written out (it does not inline).
func h4fma(a, b, d uint64, half *[1 << 16]float32) uint64 {
	var r uint64
	for i := 0; i < 64; i += 16 {
		x, y, z := float64(half[uint16(a>>i)]), float64(half[uint16(b>>i)]), float64(half[uint16(d>>i)])
		p := float64(x * y) // exact
		s := p + z
		// Round to odd only when the sum is inexact (rarely). p and z are
		// multiples of 2^-48, so below 2^4 both (their bits' OR below
		// 2^4's) the sum fits FP64's 53 bits. Else by Fast2Sum, s - p is
		// exact when |p| >= |z| and s - z when |z| >= |p|, so both equal
		// the other operand iff s is exact.
		if (math.Float64bits(p)|math.Float64bits(z))&^(1<<63) >= f64Two4 && (s-p != z || s-z != p) {
			s = numfmt.SumRTO(p, z)
		}
		bits := math.Float64bits(s)
		abs := bits &^ (1 << 63)
		if abs-f64MinNormal16 >= f64Two16-f64MinNormal16 {
			h := uint16(bits>>48) & 0x8000 // zero
			if abs != 0 {
				h = f64to16(s)
			}
			r |= uint64(h) << i
			continue
		}
		r |= uint64(uint16(bits>>48)&0x8000|uint16((abs+(1<<41-1)+(abs>>42)&1)>>42-1008<<10)) << i
	}
	return r
}

// h4maxmin is H4MAX (max true) or H4MIN on the bits: NaN if either lane
// is a NaN; equal zeros give the AND (max) or OR (min) of the bits, which
// is what comparing order16 keys (-0 below +0) picks.
func h4maxmin(a, b uint64, max bool) uint64 {
	// A lane is a NaN when its magnitude exceeds 0x7C00: adding 0x3FF
	// then sets its bit 15 (no carry leaves a lane).
	const mag, nanBias, top = 0x7FFF7FFF7FFF7FFF, 0x03FF03FF03FF03FF, 0x8000800080008000
	if ((a&mag+nanBias)|(b&mag+nanBias))&top != 0 {
		return h4maxminNaN(a, b, max)
	}
	// Order keys for all lanes at once: flip every bit of a negative
	// lane, only the sign bit of a positive one (order16).
	const ones = 0x0001000100010001
	ka := a ^ ((a>>15)&ones*0x7FFF | top)
	kb := b ^ ((b>>15)&ones*0x7FFF | top)
	var sel uint64 // the lanes a wins
	for i := 0; i < 64; i += 16 {
		if (uint16(ka>>i) > uint16(kb>>i)) == max {
			sel |= 0xFFFF << i
		}
	}
	return a&sel | b&^sel
}

// h4maxminNaN is h4maxmin lane by lane, NaN lanes included.
func h4maxminNaN(a, b uint64, max bool) uint64 {
	var r uint64
	for i := 0; i < 64; i += 16 {
		ha, hb := uint16(a>>i), uint16(b>>i)
		var v uint16
		switch {
		case ha&0x7FFF > 0x7C00 || hb&0x7FFF > 0x7C00:
			v = qnan16
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
	return h ^ (uint16(int16(h)>>15) | 0x8000)
}
