package numfmt

import "math"

// SumRTO returns p + c rounded to FP64 with round-to-odd (NaN and Inf as
// the ordinary sum). Callers passing a product pass it converted
// (float64(a*b)), so that no compiler fuses it into the sum.
func SumRTO(p, c float64) float64 {
	s := p + c
	bits := math.Float64bits(s)
	if bits&0x7FF0000000000000 == 0x7FF0000000000000 {
		return s // Inf or NaN
	}
	// TwoSum: s + e == p + c exactly.
	bb := s - p
	e := (p - (s - bb)) + (c - bb)
	if e != 0 && bits&1 == 0 {
		// One ulp toward e (s is not zero: a sum that rounds to zero is
		// exact). Moving away from zero adds one to the magnitude's bits.
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return s
}

// FMA16 returns a*b + c for FP16 operands rounded once to FP16 (the
// product of two FP16 values is exact in FP64; see FMA32).
func FMA16(a, b, c uint16) uint16 {
	return F64ToF16(SumRTO(float64(F16ToF64(a)*F16ToF64(b)), F16ToF64(c)))
}

// FMA32 returns a*b + c rounded once to FP32, to nearest even: the
// semantics of the device's fused multiply-add instructions.
//
// The product of two FP32 values is exact in FP64 (48 significant bits,
// and no FP64 underflow: the smallest product is 2^-298). The sum p + c is
// split exactly into s + e (TwoSum); s + e is then rounded to FP64 with
// round-to-odd, which keeps enough information (53 >= 2*24 + 2 bits) for
// the final rounding to FP32 to be the correctly rounded result. A plain
// float32(math.FMA(...)) would round twice.
func FMA32(a, b, c float32) float32 {
	return float32(SumRTO(float64(float64(a)*float64(b)), float64(c)))
}
