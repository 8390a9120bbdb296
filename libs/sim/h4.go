package sim

import (
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// The f16v4 lanes without the generic path: FP16 to FP32 through the
// table (halfTable), FP64 to FP16 by integer arithmetic on the bits when
// every lane is zero or normal (round4), the generic conversion for the
// rest, and fma's round to odd only for sums that are not FP16 normals
// (h4fmaZ: no exactness test otherwise). The four lanes are
// written out, with no branch per lane. Results equal h4op's bit for bit.

// Bits of 2^-14 (the smallest normal FP16) and 2^16 as FP64.
const (
	f64MinNormal16 = 1009 << 52
	f64Two16       = 1039 << 52
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

// h4fma is H4FMA: h4fmaZ with the addend's lanes read through the table.
func h4fma(a, b, d uint64, half *[1 << 16]float32) uint64 {
	r, _, _, _, _ := h4fmaZ(a, b, float64(half[uint16(d)]), float64(half[uint16(d>>16)]),
		float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)]), half)
	return r
}

// h4fmaZ is H4FMA of a and b into the addend whose lanes' values are z0..z3
// (exactly); it returns the result's bits and its lanes' values, so that a
// loop of fmas into one register can keep its lanes as FP64 instead of
// converting them back on the addend's dependency chain.
//
// Each product p is exact in FP32 and its sum s with the addend z is
// rounded to nearest even in FP64. Rounding s to FP16 gives what rounding
// the exact sum gives when s is an FP16 normal: FP16 values and midpoints
// are FP64 values and rounding to FP64 is monotonic, so only an inexact s
// on a midpoint could differ, and none is. An inexact sum needs operands
// more than 51 bits apart, and z's lowest bit is at least 2^-24 and p's
// at least 2^-21 |p|: so |p| >= 2^27, which z (below 2^16) cannot bring
// back into range, or |p| < 2^-30 |z|, when s is within 2^-29 |z| of z,
// an FP16 value, far from any midpoint. So the fast path (h4fmaFastY)
// needs no exactness test: every lane zero or rounded (as a normal) to a
// magnitude in [2^-14, 2^16). The rest (subnormal results, overflow, Inf,
// NaN) go to h4fmaSlow.
func h4fmaZ(a, b uint64, z0, z1, z2, z3 float64, half *[1 << 16]float32) (uint64, float64, float64, float64, float64) {
	y0, y1, y2, y3 := half[uint16(b)], half[uint16(b>>16)], half[uint16(b>>32)], half[uint16(b>>48)]
	r0, r1, r2, r3, ok := h4fmaFastY(a, y0, y1, y2, y3, z0, z1, z2, z3, half)
	if !ok {
		return h4fmaSlow(a, b, z0, z1, z2, z3, half)
	}
	h := uint64(f16of64(r0)) | uint64(f16of64(r1))<<16 | uint64(f16of64(r2))<<32 | uint64(f16of64(r3))<<48
	return h, math.Float64frombits(r0), math.Float64frombits(r1), math.Float64frombits(r2), math.Float64frombits(r3)
}

// h4fmaFastY is h4fmaZ's fast path, b's lanes given by their values
// y0..y3: the FP64 bits of the four result lanes' values, and whether
// every lane may take it. It rounds each sum's bits
// to 10 mantissa bits in place (to nearest even; the sign bit is
// untouched, a carry goes into the exponent; a NaN's can reach the sign
// bit). It checks the rounded magnitudes q (the sign bit cleared, or set
// by such a carry): a sum in [2^-14 - 2^-26, 2^-14), below the normals,
// rounds to 2^-14 here as it does to FP16, the rest of that binade stays
// below 2^-14.
func h4fmaFastY(a uint64, y0, y1, y2, y3 float32, z0, z1, z2, z3 float64, half *[1 << 16]float32) (r0, r1, r2, r3 uint64, ok bool) {
	b0 := math.Float64bits(float64(half[uint16(a)]*y0) + z0)
	b1 := math.Float64bits(float64(half[uint16(a>>16)]*y1) + z1)
	b2 := math.Float64bits(float64(half[uint16(a>>32)]*y2) + z2)
	b3 := math.Float64bits(float64(half[uint16(a>>48)]*y3) + z3)
	const tie, sign = 1 << 41, 1 << 63
	r0 = (b0 + (tie - 1) + (b0>>42)&1) >> 42 << 42
	r1 = (b1 + (tie - 1) + (b1>>42)&1) >> 42 << 42
	r2 = (b2 + (tie - 1) + (b2>>42)&1) >> 42 << 42
	r3 = (b3 + (tie - 1) + (b3>>42)&1) >> 42 << 42
	q0, q1, q2, q3 := r0^b0&sign, r1^b1&sign, r2^b2&sign, r3^b3&sign
	ok = min(q0-1, q1-1, q2-1, q3-1) >= f64MinNormal16-1 && max(q0, q1, q2, q3) < f64Two16
	return r0, r1, r2, r3, ok
}

// f16of64 is the FP16 bits of r, FP64 bits that are zero or an FP16
// normal: the sign, then the exponent rebiased and the mantissa's top 10
// bits (zero stays zero).
func f16of64(r uint64) uint16 {
	m := r << 1 >> 43
	return uint16(r>>48)&0x8000 | uint16(max(m, 1008<<10)-1008<<10)
}

// h4fmaSlow is h4fmaZ lane by lane: each sum rounded to odd when it is
// inexact (SumRTO), then to FP16; the lanes' values through the table.
func h4fmaSlow(a, b uint64, z0, z1, z2, z3 float64, half *[1 << 16]float32) (uint64, float64, float64, float64, float64) {
	z := [4]float64{z0, z1, z2, z3}
	var r uint64
	for i := range z {
		p := float64(half[uint16(a>>(16*i))] * half[uint16(b>>(16*i))])
		r |= uint64(f64to16(numfmt.SumRTO(p, z[i]))) << (16 * i)
	}
	return r, float64(half[uint16(r)]), float64(half[uint16(r>>16)]), float64(half[uint16(r>>32)]), float64(half[uint16(r>>48)])
}

// round4Slow is f64to16 of four lanes.
func round4Slow(s0, s1, s2, s3 float64) uint64 {
	return uint64(f64to16(s0)) | uint64(f64to16(s1))<<16 | uint64(f64to16(s2))<<32 | uint64(f64to16(s3))<<48
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
