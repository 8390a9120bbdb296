// Package numfmt converts numbers bit-exactly between FP32, FP16 and the
// four FP8 formats of ONNX. The simulator's conversion instructions and the
// host reference both call it, so the device and the reference agree to the
// bit by construction.
//
// Every conversion rounds once, to nearest with ties to even, from the
// exact input value (times 2^-scale for FP8 targets, 2^scale for FP8
// sources: an exponent adjustment, never a separate rounding).
//
// # FP8 special values
//
// The FP8 rules are ONNX Cast's as onnxruntime (include/onnxruntime/core/
// common/float8.h, checked against the conformance data in
// conformance/ort/cast_fp8_*) and the onnx reference implementation
// (onnx.helper float32_to_float8e4m3: "any value out of range included inf
// becomes the maximum value") apply them:
//
//	input                 Saturate             NaNOnOverflow
//	NaN                   NaN                  NaN
//	+-Inf                 +-max                NaN; E5M2: +-Inf
//	|rounded| > max       +-max                NaN; E5M2: +-Inf
//	rounds to zero        +-0; FNUZ: +0        +-0; FNUZ: +0
//	-0                    -0; FNUZ: +0         -0; FNUZ: +0
//
// "Rounded" means rounded with an unbounded exponent, so a value above max
// that rounds down to max is not an overflow. The NaN produced is
// sign|0x7F for E4M3FN and E5M2 (the sign of the input kept) and 0x80 for
// the FNUZ formats. The Cast operator's documentation table (Cast-19 and
// later) says +-Inf with saturate gives NaN for the FNUZ formats; both
// onnxruntime and the onnx reference give +-max, and so does this package.
//
// Decoding an FP8 NaN gives sign|0x7FC00000 in FP32 and sign|0x7E00 in FP16
// (the FNUZ NaN 0x80 has its sign bit set, so it decodes to a negative
// NaN, as in onnxruntime). FP8 to FP16 overflow (only possible with a
// positive scale) gives +-Inf.
//
// onnxruntime 1.30's CPU Cast departs from these rules in two overflow
// ranges with saturate=0; F32ToF8ORT reproduces it for comparing against
// its output.
//
// # The device
//
// The simulator uses these functions as they are, so a Cast lowers to one
// conversion instruction. Graphcore's hardware turns Inf into NaN even when
// saturating (poplibs QuarterTypeArithmeticTests, see architecture.md);
// this device saturates Inf to +-max instead, as ONNX does.
package numfmt

import (
	"fmt"
	"math"
	"math/bits"
)

// Format is an FP8 encoding. The numbering is the one of the fp8 control
// register's format fields (isa.CSRFP8).
type Format uint8

// FP8 formats.
const (
	E4M3FNUZ Format = iota // ONNX FLOAT8E4M3FNUZ (18), Graphcore F143: bias 8, max 240, NaN 0x80
	E5M2FNUZ               // ONNX FLOAT8E5M2FNUZ (20), Graphcore F152: bias 16, max 57344, NaN 0x80
	E4M3FN                 // ONNX FLOAT8E4M3FN (17), OCP: bias 7, max 448, NaN S.1111.111
	E5M2                   // ONNX FLOAT8E5M2 (19), OCP: bias 15, max 57344, +-Inf, NaNs
	NumFormats
)

// Mode selects what an FP8 overflow gives.
type Mode uint8

// Overflow modes.
const (
	// Saturate clamps overflow (and infinities) to +-max: ONNX Cast with
	// saturate=1.
	Saturate Mode = iota
	// NaNOnOverflow gives NaN on overflow, or +-Inf for E5M2: ONNX Cast
	// with saturate=0, and the device's NaN-on-overflow control bit.
	NaNOnOverflow
)

// Range of the device's per-tensor FP8 scale (value = fp8 x 2^scale). The
// conversions accept any scale; only the device limits it.
const (
	MinScale = -32
	MaxScale = 31
)

// spec describes an FP8 format.
type spec struct {
	name     string
	expBits  uint
	mantBits uint
	bias     int
	fnuz     bool  // single NaN at 0x80, no -0, no Inf
	hasInf   bool  // S.11111.00 is Inf (E5M2)
	maxCode  uint8 // largest finite positive code
}

var specs = [NumFormats]spec{
	E4M3FNUZ: {name: "e4m3fnuz", expBits: 4, mantBits: 3, bias: 8, fnuz: true, maxCode: 0x7F},
	E5M2FNUZ: {name: "e5m2fnuz", expBits: 5, mantBits: 2, bias: 16, fnuz: true, maxCode: 0x7F},
	E4M3FN:   {name: "e4m3fn", expBits: 4, mantBits: 3, bias: 7, maxCode: 0x7E},
	E5M2:     {name: "e5m2", expBits: 5, mantBits: 2, bias: 15, hasInf: true, maxCode: 0x7B},
}

func (f Format) spec() *spec {
	if f >= NumFormats {
		panic(fmt.Sprintf("numfmt: invalid fp8 format %d", uint8(f)))
	}
	return &specs[f]
}

// String returns the ONNX-style lower-case name ("e4m3fnuz").
func (f Format) String() string {
	if f >= NumFormats {
		return fmt.Sprintf("fp8format(%d)", uint8(f))
	}
	return specs[f].name
}

// Valid reports whether f names one of the four formats. The conversions
// panic on an invalid format: callers decoding untrusted input check first.
func (f Format) Valid() bool { return f < NumFormats }

// String returns "saturate" or "nan-on-overflow".
func (m Mode) String() string {
	switch m {
	case Saturate:
		return "saturate"
	case NaNOnOverflow:
		return "nan-on-overflow"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// MaxCode returns the code of the largest finite positive value of f.
func (f Format) MaxCode() uint8 { return f.spec().maxCode }

// NaNCode returns the NaN f produces from a NaN input of the given sign.
func (f Format) NaNCode(neg bool) uint8 {
	s := f.spec()
	if s.fnuz {
		return 0x80
	}
	return signBit8(neg) | 0x7F
}

// IsNaN reports whether code is a NaN of f.
func (f Format) IsNaN(code uint8) bool {
	s := f.spec()
	switch {
	case s.fnuz:
		return code == 0x80
	case s.hasInf:
		return code&0x7F > 0x7C
	}
	return code&0x7F == 0x7F
}

// IsInf reports whether code is an infinity of f (E5M2 only).
func (f Format) IsInf(code uint8) bool {
	return f.spec().hasInf && code&0x7F == 0x7C
}

func signBit8(neg bool) uint8 {
	if neg {
		return 0x80
	}
	return 0
}

// roundRNE rounds mant x 2^exp (mant > 0) to a binary format with m
// fraction bits and minimum normal exponent emin, unbounded above. The
// result is sig x 2^(e-m) with 2^m <= sig < 2^(m+1), or with sig < 2^m and
// e == emin when subnormal; sig == 0 is zero.
func roundRNE(mant uint64, exp int, m uint, emin int) (sig uint64, e int) {
	top := exp + bits.Len64(mant) - 1 // the value lies in [2^top, 2^(top+1))
	e = max(top, emin)
	shift := e - int(m) - exp // quantum 2^(e-m) over the input's 2^exp
	switch {
	case shift <= 0:
		// Exact: mant < 2^(top+1-exp), so sig < 2^(m+1).
		sig = mant << uint(-shift)
	case shift > 64:
		sig = 0 // below half a quantum
	case shift == 64:
		if mant > 1<<63 {
			sig = 1 // above half a quantum; exactly half ties to 0
		}
	default:
		sig = mant >> uint(shift)
		rem := mant & (1<<uint(shift) - 1)
		half := uint64(1) << uint(shift-1)
		if rem > half || rem == half && sig&1 == 1 {
			sig++
		}
	}
	if sig == 1<<(m+1) {
		sig >>= 1
		e++
	}
	return sig, e
}

// value is a decoded finite nonzero number: (-1)^neg x mant x 2^exp.
type value struct {
	neg  bool
	mant uint64
	exp  int
}

// class of a decoded number.
type class uint8

const (
	finite class = iota // nonzero finite, in value
	zero
	inf
	nan
)

func decodeF32(b uint32) (class, value) {
	v := value{neg: b>>31 != 0}
	e := int(b >> 23 & 0xFF)
	f := uint64(b & 0x7FFFFF)
	switch {
	case e == 0xFF && f == 0:
		return inf, v
	case e == 0xFF:
		return nan, v
	case e == 0 && f == 0:
		return zero, v
	case e == 0:
		v.mant, v.exp = f, -126-23
	default:
		v.mant, v.exp = f|1<<23, e-127-23
	}
	return finite, v
}

func decodeF16(h uint16) (class, value) {
	v := value{neg: h>>15 != 0}
	e := int(h >> 10 & 0x1F)
	f := uint64(h & 0x3FF)
	switch {
	case e == 0x1F && f == 0:
		return inf, v
	case e == 0x1F:
		return nan, v
	case e == 0 && f == 0:
		return zero, v
	case e == 0:
		v.mant, v.exp = f, -14-10
	default:
		v.mant, v.exp = f|1<<10, e-15-10
	}
	return finite, v
}

func decodeF64(x float64) (class, value) {
	b := math.Float64bits(x)
	v := value{neg: b>>63 != 0}
	e := int(b >> 52 & 0x7FF)
	f := b & (1<<52 - 1)
	switch {
	case e == 0x7FF && f == 0:
		return inf, v
	case e == 0x7FF:
		return nan, v
	case e == 0 && f == 0:
		return zero, v
	case e == 0:
		v.mant, v.exp = f, -1022-52
	default:
		v.mant, v.exp = f|1<<52, e-1023-52
	}
	return finite, v
}

func decodeF8(code uint8, s *spec) (class, value) {
	v := value{neg: code>>7 != 0}
	m := s.mantBits
	e := int(code>>m) & (1<<s.expBits - 1)
	f := uint64(code) & (1<<m - 1)
	switch {
	case s.fnuz && code == 0x80:
		return nan, v
	case s.hasInf && e == 1<<s.expBits-1 && f == 0:
		return inf, v
	case s.hasInf && e == 1<<s.expBits-1:
		return nan, v
	case !s.fnuz && !s.hasInf && code&0x7F == 0x7F:
		return nan, v
	case e == 0 && f == 0:
		return zero, v
	case e == 0:
		v.mant, v.exp = f, 1-s.bias-int(m)
	default:
		v.mant, v.exp = f|1<<m, e-s.bias-int(m)
	}
	return finite, v
}

// encodeIEEE rounds a decoded number into an IEEE binary format with
// expBits exponent bits and m fraction bits; overflow gives Inf.
func encodeIEEE(c class, v value, expBits, m uint) uint64 {
	sign := uint64(0)
	if v.neg {
		sign = 1 << (expBits + m)
	}
	expAll := uint64(1)<<expBits - 1
	switch c {
	case zero:
		return sign
	case inf:
		return sign | expAll<<m
	case nan:
		panic("numfmt: encodeIEEE called with NaN")
	}
	bias := int(expAll >> 1)
	sig, e := roundRNE(v.mant, v.exp, m, 1-bias)
	if sig < 1<<m {
		return sign | sig // subnormal or zero
	}
	if e+bias >= int(expAll) {
		return sign | expAll<<m
	}
	return sign | uint64(e+bias)<<m | sig&(1<<m-1)
}

// encodeF8 rounds a decoded number into FP8 format s.
func encodeF8(c class, v value, s *spec, mode Mode) uint8 {
	sign := signBit8(v.neg)
	overflow := func() uint8 {
		switch {
		case mode == Saturate:
			return sign | s.maxCode
		case s.hasInf:
			return sign | 0x7C
		case s.fnuz:
			return 0x80
		}
		return sign | 0x7F
	}
	zeroCode := func() uint8 {
		if s.fnuz {
			return 0
		}
		return sign
	}
	switch c {
	case nan:
		if s.fnuz {
			return 0x80
		}
		return sign | 0x7F
	case inf:
		return overflow()
	case zero:
		return zeroCode()
	}
	m := s.mantBits
	sig, e := roundRNE(v.mant, v.exp, m, 1-s.bias)
	if sig == 0 {
		return zeroCode()
	}
	if sig < 1<<m {
		return sign | uint8(sig)
	}
	field := e + s.bias
	if field >= 1<<s.expBits {
		return overflow()
	}
	code := uint8(field)<<m | uint8(sig&(1<<m-1))
	if code > s.maxCode {
		return overflow()
	}
	return sign | code
}

// F32ToF16 converts FP32 bits to FP16 bits, rounding to nearest even.
// Overflow gives +-Inf; a NaN stays a NaN with its sign, made quiet, its
// payload truncated to the top 9 bits.
//
// The rounding is done on the bits (the general path, encodeIEEE, costs
// about ten times as much): a normal result rebiases the exponent and
// rounds the 23-bit fraction to 10 with the carry running into the
// exponent; a subnormal one shifts the significand with its implicit
// bit. TestF16FastPaths checks both against encodeIEEE.
func F32ToF16(b uint32) uint16 {
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7FFFFFFF
	switch {
	case a > 0x7F800000: // NaN
		return sign | 0x7E00 | uint16(b>>13&0x1FF)
	case a >= 0x477FF000: // at least 65520, the midpoint above 65504: Inf
		return sign | 0x7C00
	case a >= 0x38800000: // at least 2^-14: normal
		v := a - (127-15)<<23
		return sign | uint16((v+0xFFF+v>>13&1)>>13)
	case a >= 0x33000000: // at least 2^-25: subnormal, or the least normal
		return sign | uint16(shiftRNE(uint64(a&0x7FFFFF|1<<23), uint(126-a>>23)))
	}
	return sign // below 2^-25: zero
}

// F64ToF16 converts x to FP16 bits with a single rounding to nearest even
// (not through FP32), on the bits as F32ToF16. NaNs as in F32ToF16.
func F64ToF16(x float64) uint16 {
	b := math.Float64bits(x)
	sign := uint16(b>>48) & 0x8000
	a := b & (1<<63 - 1)
	switch {
	case a > 0x7FF0000000000000: // NaN
		return sign | 0x7E00 | uint16(b>>42&0x1FF)
	case a >= 0x40EFFE0000000000: // at least 65520: Inf
		return sign | 0x7C00
	case a >= 0x3F10000000000000: // at least 2^-14: normal
		v := a - (1023-15)<<52
		return sign | uint16((v+(1<<41-1)+v>>42&1)>>42)
	case a >= 0x3E60000000000000: // at least 2^-25
		return sign | uint16(shiftRNE(a&(1<<52-1)|1<<52, uint(1051-a>>52)))
	}
	return sign
}

// shiftRNE returns m / 2^shift rounded to nearest even (0 < shift < 64).
func shiftRNE(m uint64, shift uint) uint64 {
	r := m >> shift
	rem, half := m&(1<<shift-1), uint64(1)<<(shift-1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return r
}

// F16ToF32 converts FP16 bits to FP32 bits, exactly. A NaN keeps its sign
// and payload and is made quiet, as IEEE 754 conversions do. On the bits:
// a normal value rebiases its exponent, a subnormal one is normalized.
func F16ToF32(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	e, f := uint32(h>>10&0x1F), uint32(h&0x3FF)
	switch {
	case e == 0x1F && f != 0:
		return sign | 0x7FC00000 | f<<13
	case e == 0x1F:
		return sign | 0x7F800000
	case e != 0:
		return sign | (e+127-15)<<23 | f<<13
	case f == 0:
		return sign
	}
	// f * 2^-24 with f of n bits lies in [2^(n-25), 2^(n-24)).
	n := uint32(bits.Len32(f))
	return sign | (n+127-25)<<23 | f<<(24-n)&0x7FFFFF
}

// F16ToF64 converts FP16 bits to a float64, exactly; NaNs as in F16ToF32.
func F16ToF64(h uint16) float64 {
	return float64(math.Float32frombits(F16ToF32(h)))
}

// F32ToF8 converts FP32 bits divided by 2^scale to FP8 format f with one
// rounding to nearest even; mode decides overflow (see the package doc).
func F32ToF8(b uint32, f Format, scale int, mode Mode) uint8 {
	c, v := decodeF32(b)
	v.exp -= scale
	return encodeF8(c, v, f.spec(), mode)
}

// F16ToF8 converts FP16 bits divided by 2^scale to FP8 format f, like
// F32ToF8.
func F16ToF8(h uint16, f Format, scale int, mode Mode) uint8 {
	c, v := decodeF16(h)
	v.exp -= scale
	return encodeF8(c, v, f.spec(), mode)
}

// F64ToF8 converts x divided by 2^scale to FP8 format f, like F32ToF8.
func F64ToF8(x float64, f Format, scale int, mode Mode) uint8 {
	c, v := decodeF64(x)
	v.exp -= scale
	return encodeF8(c, v, f.spec(), mode)
}

// F8ToF32 converts FP8 code of format f times 2^scale to FP32 bits. For
// scales in [MinScale, MaxScale] the result is exact; beyond, it rounds to
// nearest even and overflows to Inf. NaN gives sign|0x7FC00000.
func F8ToF32(code uint8, f Format, scale int) uint32 {
	c, v := decodeF8(code, f.spec())
	if c == nan {
		return uint32(code&0x80)<<24 | 0x7FC00000
	}
	v.exp += scale
	return uint32(encodeIEEE(c, v, 8, 23))
}

// F8ToF16 converts FP8 code of format f times 2^scale to FP16 bits,
// rounding to nearest even where the scaled value is not representable;
// overflow gives +-Inf. NaN gives sign|0x7E00.
func F8ToF16(code uint8, f Format, scale int) uint16 {
	c, v := decodeF8(code, f.spec())
	if c == nan {
		return uint16(code&0x80)<<8 | 0x7E00
	}
	v.exp += scale
	return uint16(encodeIEEE(c, v, 5, 10))
}

// F8ToF64 converts FP8 code of format f times 2^scale to a float64,
// exactly for any scale that keeps the result in float64 range. NaN gives
// a NaN with the code's sign.
func F8ToF64(code uint8, f Format, scale int) float64 {
	c, v := decodeF8(code, f.spec())
	if c == nan {
		return math.Float64frombits(uint64(code&0x80)<<56 | 0x7FF8000000000000)
	}
	v.exp += scale
	return math.Float64frombits(encodeIEEE(c, v, 11, 52))
}

// F32ToF8ORT converts FP32 bits to FP8 as onnxruntime's CPU Cast kernel
// does (onnxruntime 1.30, include/onnxruntime/core/common/float8.h), for
// checking against data it produced. It equals F32ToF8 with scale 0 except
// for two overflow cases of mode NaNOnOverflow where onnxruntime departs
// from the ONNX rules:
//
//   - E4M3FN, 480 <= |x| < 496: onnxruntime gives +-448; ONNX says NaN
//     (x rounds to 480 > 448).
//   - E5M2, 61440 <= |x| < 65536: onnxruntime gives NaN (sign|0x7F); ONNX
//     says +-Inf (x rounds to 65536 > 57344).
//
// The device's conversion instructions follow it (F32ToF8Dev), so that a
// model's Cast runs bit-exact with onnxruntime.
func F32ToF8ORT(b uint32, f Format, mode Mode) uint8 { return F32ToF8Dev(b, f, 0, mode) }

// F32ToF8Dev is the device's FP32 -> FP8 conversion (f32v2tof8): F32ToF8,
// with onnxruntime's two departures in mode NaNOnOverflow (F32ToF8ORT),
// applied to x / 2^scale.
func F32ToF8Dev(b uint32, f Format, scale int, mode Mode) uint8 {
	code := F32ToF8(b, f, scale, mode)
	if mode != NaNOnOverflow {
		return code
	}
	return ortEdge(code, b>>31 != 0, math.Abs(math.Ldexp(float64(math.Float32frombits(b)), -scale)), f)
}

// F16ToF8Dev is the device's FP16 -> FP8 conversion (f16v4tof8), with the
// same departures as F32ToF8Dev.
func F16ToF8Dev(h uint16, f Format, scale int, mode Mode) uint8 {
	code := F16ToF8(h, f, scale, mode)
	if mode != NaNOnOverflow {
		return code
	}
	return ortEdge(code, h>>15 != 0, math.Abs(math.Ldexp(F16ToF64(h), -scale)), f)
}

// F64ToF8Dev is F64ToF8 with the device's departures, for the host
// reference at device precision.
func F64ToF8Dev(x float64, f Format, scale int, mode Mode) uint8 {
	code := F64ToF8(x, f, scale, mode)
	if mode != NaNOnOverflow {
		return code
	}
	return ortEdge(code, math.Signbit(x), math.Abs(math.Ldexp(x, -scale)), f)
}

// ortEdge replaces the ONNX-rule code of a value of magnitude mag by
// onnxruntime's in its two departures (see F32ToF8ORT).
func ortEdge(code uint8, neg bool, mag float64, f Format) uint8 {
	sign := signBit8(neg)
	switch {
	case f == E4M3FN && mag >= 480 && mag < 496:
		return sign | 0x7E
	case f == E5M2 && mag >= 61440 && mag < 65536:
		return sign | 0x7F
	}
	return code
}
