package numfmt

import "math"

// SumRTO returns p + c rounded to FP64 with round-to-odd (NaN and Inf as
// the ordinary sum).
func SumRTO(p, c float64) float64 {
	s := p + c
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return s
	}
	// TwoSum: s + e == p + c exactly.
	bb := s - p
	e := (p - (s - bb)) + (c - bb)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		if e > 0 {
			s = math.Nextafter(s, math.Inf(1))
		} else {
			s = math.Nextafter(s, math.Inf(-1))
		}
	}
	return s
}

// FMA16 returns a*b + c for FP16 operands rounded once to FP16 (the
// product of two FP16 values is exact in FP64; see FMA32).
func FMA16(a, b, c uint16) uint16 {
	return F64ToF16(SumRTO(F16ToF64(a)*F16ToF64(b), F16ToF64(c)))
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
	return float32(SumRTO(float64(a)*float64(b), float64(c)))
}
