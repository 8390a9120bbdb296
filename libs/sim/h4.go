package sim

import (
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// The f16v4 lanes without the generic path: FP16 to FP32 through the
// table (halfTable), FP64 to FP16 by integer arithmetic on the bits when
// every lane is zero or normal (round4), the generic conversion for the
// rest, and fma's round to odd only when needed. The four lanes are
// written out, with no branch per lane. Results equal h4op's bit for bit.

// Bits of 2^-14 (the smallest normal FP16) and 2^16 as FP64.
const (
	f64MinNormal16 = 1009 << 52
	f64Two16       = 1039 << 52
	f64Two4        = 1027 << 52
)

// h4arith applies H4ADD, H4SUB, H4MUL or H4FMA to the lanes of a and b
// (and d, fma's addend); half is halfTable(). Sums and products of FP16
// values are exact in FP64 (products even in FP32); the fma's sum may not
// be.
func h4arith(op isa.Op, a, b, d uint64, half *[1 << 16]float32) uint64 {
	if op == isa.H4FMA {
		return h4fma(a, b, d, half)
	}
	x0, x1, x2, x3 := half[uint16(a)], half[uint16(a>>16)], half[uint16(a>>32)], half[uint16(a>>48)]
	y0, y1, y2, y3 := half[uint16(b)], half[uint16(b>>16)], half[uint16(b>>32)], half[uint16(b>>48)]
	switch op {
	case isa.H4ADD:
		return round4(float64(x0)+float64(y0), float64(x1)+float64(y1), float64(x2)+float64(y2), float64(x3)+float64(y3))
	case isa.H4SUB:
		return round4(float64(x0)-float64(y0), float64(x1)-float64(y1), float64(x2)-float64(y2), float64(x3)-float64(y3))
	}
	return round4(float64(x0*y0), float64(x1*y1), float64(x2*y2), float64(x3*y3))
}

// h4fma is H4FMA, the four lanes written out. Each product is exact in
// FP32 and its sum with the addend is computed in FP64; that sum is
// rounded to odd only when it is inexact (rarely). p and z are multiples
// of 2^-48, so when every operand is below 2^4 (their bits' OR below
// 2^4's) every sum fits FP64's 53 bits. Else fma16Sums checks each. The
// rounding is round4 written out: the call costs on the addend's
// dependency chain, which a loop of fmas into one register repeats.
func h4fma(a, b, d uint64, half *[1 << 16]float32) uint64 {
	p0 := float64(half[uint16(a)] * half[uint16(b)])
	p1 := float64(half[uint16(a>>16)] * half[uint16(b>>16)])
	p2 := float64(half[uint16(a>>32)] * half[uint16(b>>32)])
	p3 := float64(half[uint16(a>>48)] * half[uint16(b>>48)])
	z0, z1 := float64(half[uint16(d)]), float64(half[uint16(d>>16)])
	z2, z3 := float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])
	s0, s1, s2, s3 := p0+z0, p1+z1, p2+z2, p3+z3
	big := math.Float64bits(p0) | math.Float64bits(z0) | math.Float64bits(p1) | math.Float64bits(z1) |
		math.Float64bits(p2) | math.Float64bits(z2) | math.Float64bits(p3) | math.Float64bits(z3)
	if big&^(1<<63) >= f64Two4 {
		s0, s1, s2, s3 = fma16Sums(p0, z0, s0, p1, z1, s1, p2, z2, s2, p3, z3, s3)
	}
	b0, b1, b2, b3 := math.Float64bits(s0), math.Float64bits(s1), math.Float64bits(s2), math.Float64bits(s3)
	const abs = 1<<63 - 1
	a0, a1, a2, a3 := b0&abs, b1&abs, b2&abs, b3&abs
	if a0|a1|a2|a3 == 0 {
		return (b0>>48 | b1>>32 | b2>>16 | b3) & 0x8000800080008000
	}
	if max(a0, a1, a2, a3) >= f64Two16 || min(a0-1, a1-1, a2-1, a3-1) < f64MinNormal16-1 {
		return round4Slow(s0, s1, s2, s3)
	}
	return uint64(fast16(b0)) | uint64(fast16(b1))<<16 | uint64(fast16(b2))<<32 | uint64(fast16(b3))<<48
}

// round4Slow is f64to16 of four lanes.
func round4Slow(s0, s1, s2, s3 float64) uint64 {
	return uint64(f64to16(s0)) | uint64(f64to16(s1))<<16 | uint64(f64to16(s2))<<32 | uint64(f64to16(s3))<<48
}

// fma16Sums returns each lane's s = p + z when it is exact, else p + z
// rounded to odd. By Fast2Sum, s - p is exact when |p| >= |z| and s - z
// when |z| >= |p|, so both equal the other operand iff s is exact (an Inf
// or NaN operand fails the test, and SumRTO returns its sum).
func fma16Sums(p0, z0, s0, p1, z1, s1, p2, z2, s2, p3, z3, s3 float64) (float64, float64, float64, float64) {
	if s0-p0 != z0 || s0-z0 != p0 {
		s0 = numfmt.SumRTO(p0, z0)
	}
	if s1-p1 != z1 || s1-z1 != p1 {
		s1 = numfmt.SumRTO(p1, z1)
	}
	if s2-p2 != z2 || s2-z2 != p2 {
		s2 = numfmt.SumRTO(p2, z2)
	}
	if s3-p3 != z3 || s3-z3 != p3 {
		s3 = numfmt.SumRTO(p3, z3)
	}
	return s0, s1, s2, s3
}

// round4 is f64to16 of four lanes (NaN gives qnan16): all zeros give
// their signs; by fast16 when every lane is zero or its magnitude in
// [2^-14, 2^16) (the minimum of the magnitudes minus one skips the
// zeros); else lane by lane.
func round4(s0, s1, s2, s3 float64) uint64 {
	b0, b1, b2, b3 := math.Float64bits(s0), math.Float64bits(s1), math.Float64bits(s2), math.Float64bits(s3)
	const abs = 1<<63 - 1
	a0, a1, a2, a3 := b0&abs, b1&abs, b2&abs, b3&abs
	if a0|a1|a2|a3 == 0 {
		return (b0>>48 | b1>>32 | b2>>16 | b3) & 0x8000800080008000
	}
	if max(a0, a1, a2, a3) >= f64Two16 || min(a0-1, a1-1, a2-1, a3-1) < f64MinNormal16-1 {
		return round4Slow(s0, s1, s2, s3)
	}
	return uint64(fast16(b0)) | uint64(fast16(b1))<<16 | uint64(fast16(b2))<<32 | uint64(fast16(b3))<<48
}

// fast16 is f64to16 of FP64 bits that are zero or of magnitude in
// [2^-14, 2^16): it rounds to 10 mantissa bits, to nearest even (a carry
// into the exponent, up to Inf at 65520, is the right result), and
// rebiases.
func fast16(bits uint64) uint16 {
	abs := bits &^ (1 << 63)
	h := uint16((abs+(1<<41-1)+(abs>>42)&1)>>42 - 1008<<10)
	if abs == 0 {
		h = 0
	}
	return uint16(bits>>48)&0x8000 | h
}

// h4maxmin is H4MAX (max true) or H4MIN on the bits: NaN if either lane
// is a NaN; equal zeros give the AND (max) or OR (min) of the bits, which
// is what comparing order16 keys (-0 below +0) picks.
func h4maxmin(a, b uint64, max bool) uint64 {
	if h4nan(a, b) {
		return h4maxminNaN(a, b, max)
	}
	sel := h4gt(a, b) // the lanes a wins
	if !max {
		sel = ^sel
	}
	return a&sel | b&^sel
}

// h4nan reports whether a lane of a or b is a NaN: its magnitude exceeds
// 0x7C00, so adding 0x3FF sets its bit 15 (no carry leaves a lane).
func h4nan(a, b uint64) bool {
	const mag, nanBias, top = 0x7FFF7FFF7FFF7FFF, 0x03FF03FF03FF03FF, 0x8000800080008000
	return ((a&mag+nanBias)|(b&mag+nanBias))&top != 0
}

// h4gt returns all ones in the lanes where a > b and zeros elsewhere, for
// non-NaN lanes, -0 below +0. It compares the order keys of all lanes at
// once (order16: flip every bit of a negative lane, only the sign bit of
// a positive one), unsigned: the top bits decide when they differ, else
// the low 15 bits, compared by the top bit of (ka | top) - (kb &^ top) -
// 1, which borrows from no other lane.
func h4gt(a, b uint64) uint64 {
	const top, ones = 0x8000800080008000, 0x0001000100010001
	ka := a ^ ((a>>15)&ones*0x7FFF | top)
	kb := b ^ ((b>>15)&ones*0x7FFF | top)
	low := ((ka | top) - (kb &^ top) - ones) & top
	gt := (ka&^kb | ^(ka^kb)&low) & top
	return (gt >> 15) * 0xFFFF
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
