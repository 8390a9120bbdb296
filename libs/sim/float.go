package sim

import (
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// Canonical quiet NaNs: every arithmetic result that is a NaN is written
// as one of these, so that results do not depend on the host CPU's NaN
// propagation rules.
const (
	qnan32 = 0x7FC00000
	qnan16 = 0x7E00
)

func f32(b uint32) float32 { return math.Float32frombits(b) }

// bits32 returns the bits of an arithmetic result, NaN made canonical.
func bits32(f float32) uint32 {
	if f != f {
		return qnan32
	}
	return math.Float32bits(f)
}

// fmax32 is f32max: NaN if either is NaN, max(-0, +0) = +0.
func fmax32(x, y uint32) uint32 {
	a, b := f32(x), f32(y)
	switch {
	case a != a || b != b:
		return qnan32
	case a > b:
		return x
	case b > a:
		return y
	}
	return x & y // equal: only the signs of zeros can differ
}

// fmin32 is f32min: NaN if either is NaN, min(-0, +0) = -0.
func fmin32(x, y uint32) uint32 {
	a, b := f32(x), f32(y)
	switch {
	case a != a || b != b:
		return qnan32
	case a < b:
		return x
	case b < a:
		return y
	}
	return x | y
}

func mask32(c bool) uint32 {
	if c {
		return 0xFFFFFFFF
	}
	return 0
}

// f16to32 converts FP16 bits to FP32 bits exactly (NaN keeps sign and
// payload, made quiet), as numfmt.F16ToF32 does.
func f16to32(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1F
	mant := uint32(h & 0x3FF)
	switch {
	case e == 0x1F:
		if mant == 0 {
			return sign | 0x7F800000
		}
		return sign | 0x7FC00000 | mant<<13
	case e != 0:
		return sign | (e+112)<<23 | mant<<13
	case mant == 0:
		return sign
	}
	// Subnormal: mant * 2^-24; normalise.
	e = 113
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3FF)<<13
}

// f64to16 rounds x to FP16 once, to nearest even; overflow gives Inf; a
// NaN gives the canonical NaN.
func f64to16(x float64) uint16 {
	b := math.Float64bits(x)
	sign := uint16(b>>48) & 0x8000
	exp := int(b>>52) & 0x7FF
	mant := b & (1<<52 - 1)
	if exp == 0x7FF {
		if mant != 0 {
			return qnan16
		}
		return sign | 0x7C00
	}
	if exp == 0 {
		return sign // float64 subnormals are far below FP16's range
	}
	e := exp - 1023
	if e > 15 {
		return sign | 0x7C00
	}
	sig := mant | 1<<52
	var shift uint
	if e >= -14 {
		shift = 42
	} else {
		shift = uint(28 - e) // units of 2^-24
		if shift > 60 {
			return sign
		}
	}
	r := sig >> shift
	rem := sig & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	if e < -14 {
		return sign | uint16(r) // r == 0x400 is the smallest normal
	}
	if r == 1<<11 {
		r >>= 1
		e++
		if e > 15 {
			return sign | 0x7C00
		}
	}
	return sign | uint16(e+15)<<10 | uint16(r&0x3FF)
}

// h16f returns FP16 bits as a float32, exactly; NaNs stay NaNs (their
// payload does not matter: arithmetic results are made canonical).
func h16f(h uint16) float32 {
	if h&0x7C00 == 0x7C00 {
		return f32(uint32(h&0x8000)<<16 | 0x7F800000 | uint32(h&0x3FF)<<13)
	}
	// The FP16 exponent and mantissa, placed as an FP32's, give the value
	// times 2^-112 (subnormals included), exactly.
	f := f32(uint32(h&0x7FFF)<<13) * 0x1p112
	if h&0x8000 != 0 {
		f = -f
	}
	return f
}

// h4op applies an f16v4 arithmetic or compare op to the four FP16 lanes of
// a and b (lane i in bits 16i..16i+15); d is the accumulator of fma.
func h4op(op isa.Op, a, b, d uint64) uint64 {
	var r uint64
	switch op {
	case isa.H4ADD:
		for i := 0; i < 64; i += 16 {
			r |= uint64(f64to16(float64(h16f(uint16(a>>i)))+float64(h16f(uint16(b>>i))))) << i
		}
	case isa.H4SUB:
		for i := 0; i < 64; i += 16 {
			r |= uint64(f64to16(float64(h16f(uint16(a>>i)))-float64(h16f(uint16(b>>i))))) << i
		}
	case isa.H4MUL:
		for i := 0; i < 64; i += 16 {
			r |= uint64(f64to16(float64(h16f(uint16(a>>i)))*float64(h16f(uint16(b>>i))))) << i
		}
	case isa.H4FMA:
		for i := 0; i < 64; i += 16 {
			x, y, z := float64(h16f(uint16(a>>i))), float64(h16f(uint16(b>>i))), float64(h16f(uint16(d>>i)))
			r |= uint64(f64to16(numfmt.SumRTO(float64(x*y), z))) << i
		}
	case isa.H4MAX, isa.H4MIN:
		for i := 0; i < 64; i += 16 {
			ha, hb := uint16(a>>i), uint16(b>>i)
			x, y := h16f(ha), h16f(hb)
			var v uint16
			switch {
			case x != x || y != y:
				v = qnan16
			case x == y:
				v = ha & hb // only the signs of zeros can differ
				if op == isa.H4MIN {
					v = ha | hb
				}
			case x > y == (op == isa.H4MAX):
				v = ha
			default:
				v = hb
			}
			r |= uint64(v) << i
		}
	case isa.H4CMPLT:
		for i := 0; i < 64; i += 16 {
			if h16f(uint16(a>>i)) < h16f(uint16(b>>i)) {
				r |= 0xFFFF << i
			}
		}
	case isa.H4CMPEQ:
		for i := 0; i < 64; i += 16 {
			if h16f(uint16(a>>i)) == h16f(uint16(b>>i)) {
				r |= 0xFFFF << i
			}
		}
	}
	return r
}

// sel16 is f16v4sel on one 32-bit half: per 16-bit lane, a != 0 ? b : c.
func sel16(a, b, c uint32) uint32 {
	var r uint32
	for sh := 0; sh < 32; sh += 16 {
		if (a>>sh)&0xFFFF != 0 {
			r |= b & (0xFFFF << sh)
		} else {
			r |= c & (0xFFFF << sh)
		}
	}
	return r
}

// f32toi32 converts toward zero, saturating; NaN gives 0.
func f32toi32(b uint32) uint32 {
	f := f32(b)
	switch {
	case f != f:
		return 0
	case f >= 2147483648:
		return 0x7FFFFFFF
	case f <= -2147483648:
		return 0x80000000
	}
	return uint32(int32(f))
}

// fp8cfg decodes CSR fp8.
type fp8cfg struct {
	fa, fb numfmt.Format
	sa, sb int
	mode   numfmt.Mode
}

func decodeFP8(v uint32) fp8cfg {
	c := fp8cfg{
		fa: numfmt.Format(v >> isa.FP8FormatAShift & 3),
		fb: numfmt.Format(v >> isa.FP8FormatBShift & 3),
		sa: int(int32(v<<(32-isa.FP8ScaleAShift-6)) >> 26),
		sb: int(int32(v<<(32-isa.FP8ScaleBShift-6)) >> 26),
	}
	if v&isa.FP8NaNOnOverflow != 0 {
		c.mode = numfmt.NaNOnOverflow
	}
	return c
}

// fp8val[f][code] is FP8 code of format f, unscaled, as FP32.
var fp8val [4][256]float32

func init() {
	for f := range fp8val {
		for c := range fp8val[f] {
			fp8val[f][c] = f32(numfmt.F8ToF32(uint8(c), numfmt.Format(f), 0))
		}
	}
}
